"""The scenario suites on a real Apache BookKeeper 4.17.2 cluster and Pulsar's managed ledger 4.0.7.

The jars are fetched with Maven into the cache the first time (about 125 MB).
One cluster of ZooKeeper and five bookies, each its own JVM, runs every
scenario; the module's fixture records them once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.adapters.ml_scenarios import ML_SCENARIOS
from ledgerspec.conformance.adapters.scenarios import SCENARIOS
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording import real_systems
from ledgerspec.tools.recording.real_systems import (
    RecordingError,
    ScenarioRecording,
    record_bookkeeper,
    record_managed_ledger,
)

pytestmark = pytest.mark.real_bookkeeper


#: The scenarios BookKeeper's bookies run: all but those that command faults only reference bookies take.
ON_BOOKKEEPER = [name for name, s in SCENARIOS.items() if s.runs_on("bookkeeper")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, ScenarioRecording]]:
    out = tmp_path_factory.mktemp("real")
    recordings = record_bookkeeper(ON_BOOKKEEPER, out)
    return out, {r.name: r for r in recordings}


def test_every_scenario_conforms_or_shows_the_finding_it_expects(
    recorded: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    _, recordings = recorded
    assert list(recordings) == ON_BOOKKEEPER and len(ON_BOOKKEEPER) == len(SCENARIOS) - 2
    outcome = {name: (r.status, [x.verdict.reason for x in r.ledgers], r.failure) for name, r in recordings.items()}
    for name, recording in recordings.items():
        expected = {"known"} if SCENARIOS[name].expects else {"conforms"}
        if SCENARIOS[name].may_show:
            expected.add("known")
        if name in _MAY_BE_UNDECIDED:
            expected.add("inconclusive")
        assert recording.status in expected, outcome[name]
    assert sum(x.events for r in recordings.values() for x in r.ledgers) > 1000


#: Scenarios whose trace the default bounds have once left undecided (never rejected): the recovery of 40 entries
#: after three bookies crashed at once, one of them throttled with 26 adds unanswered (docs/real-systems.md).
_MAY_BE_UNDECIDED = {"write-cache-pressure-then-crash", "memtable-pressure-then-crash"}


def test_a_recorded_trace_is_checked_the_same_by_the_command_line(
    recorded: tuple[Path, dict[str, ScenarioRecording]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, recordings = recorded
    (ledger,) = recordings["crash-ensemble-change"].ledgers
    consts = [arg for name, value in ledger.constants.items() for arg in ("--const", f"{name}={value}")]
    code = main(["check", str(out / "crash-ensemble-change" / "trace.ndjson"), "--mode", "client", *consts, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["traces"] == data["conforms"] == 1 and data["violations"] == []


def test_metadata_is_read_from_zookeeper_with_the_projects_format(
    recorded: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    out, _ = recorded
    changed = json.loads((out / "crash-ensemble-change" / "metadata.json").read_text())
    ((ledger_id, znode),) = changed.items()
    assert znode["state"] == "CLOSED" and znode["last_entry_id"] == 9 and znode["digest_type"] == "CRC32C"
    assert len(znode["segments"]) == 2 and znode["segments"][1][0] > 0  # the ensemble change, from ZooKeeper
    assert znode["znode_version"] == 2  # created, changed, closed: the spec's meta_version 3
    trace = [orjson.loads(line) for line in (out / "crash-ensemble-change" / "trace.ndjson").read_bytes().splitlines()]
    assert trace[-1]["type"] == "WriterClosesLedger" and trace[-1]["observed"]["meta_version"] == 3
    run = json.loads((out / "crash-ensemble-change" / "run.json").read_text())
    assert run["ledgers"] == [int(ledger_id)] and run["bookies_crashed"] == 1


def test_bookie_files_are_read_with_inspect_bookie_and_hold_every_acknowledged_entry(
    recorded: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    out, recordings = recorded
    (lost,) = recordings["fence-empty-ledger-then-restart"].ledgers
    errors = []
    for n in range(1, 6):
        files = json.loads((out / "bookies" / f"bookie-{n}.json").read_text())
        assert files["journals"] and files["persisted_mark"]["file_id"] > 0
        errors += [p["message"] for p in files["problems"] if p["severity"] == "error"]
    # The lost fence, seen in the files too: the replay skipped the fence record (no master key for it) and the
    # flush after it moved the lastMark past the record, so the journal fenced the ledger and the index never did.
    lost_fences = {
        int(m.split()[4]) for m in errors if m.endswith("before the lastMark but the index does not say fenced")
    }
    assert errors and len(lost_fences) == len(set(errors)) and lost.ledger in lost_fences
    # It shows for another ledger only where a race let a recovering client fence a bookie that held no entry yet.
    for ledger in lost_fences - {lost.ledger}:
        assert _fenced_while_empty(out, ledger), ledger
    acknowledged = json.loads((out / "bookies" / "acknowledged.json").read_text())
    assert sum(v["acknowledged"] for v in acknowledged.values()) > 200
    assert all(v["on_fewer_than_qa_journals"] == [] for v in acknowledged.values())


def test_the_fence_of_an_empty_ledger_survives_a_crash_only_if_a_checkpoint_wrote_it_first(
    recorded: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    out, recordings = recorded
    statuses = {name: recordings[name].status for name in recordings if name.startswith("fence-empty-ledger")}
    assert statuses == {
        "fence-empty-ledger-then-restart": "known",
        "fence-empty-ledger-checkpoint-then-restart": "conforms",
        "fence-empty-ledger-db-storage-before-checkpoint-then-restart": "known",
        "fence-empty-ledger-db-storage-then-restart": "known",
    }
    lost = recordings["fence-empty-ledger-then-restart"]
    (ledger,) = lost.ledgers
    # The default storage took no checkpoint after the fence: until the kill each lastMark stayed before the fence
    # record ((0, 0), or where an earlier scenario's restart left it), with no index file of the ledger; the replay
    # skipped the fence record, which it could not give a master key.
    files = _before_the_kill(out, lost)
    assert [(mark < min(fences), index) for mark, fences, index in files] == [(True, None)] * 3
    skipped = sum(f"Skip replaying entries of ledger {ledger.ledger} since" in line for line in lost.evidence)
    assert skipped == sum(len(fences) for _, fences, _ in files)
    kept = recordings["fence-empty-ledger-checkpoint-then-restart"]
    assert all(mark > max(fences) and index["fenced"] for mark, fences, index in _before_the_kill(out, kept))
    # DbLedgerStorage before its first checkpoint: the same route, the replay skipping the fence record.
    early = recordings["fence-empty-ledger-db-storage-before-checkpoint-then-restart"]
    files = _before_the_kill(out, early)
    assert [(mark < min(fences), index) for mark, fences, index in files] == [(True, None)] * 3
    (ledger,) = early.ledgers
    skipped = sum(f"Skip replaying entries of ledger {ledger.ledger} since" in line for line in early.evidence)
    assert skipped == sum(len(fences) for _, fences, _ in files)
    db = recordings["fence-empty-ledger-db-storage-then-restart"]
    assert all(mark > max(fences) and index is None for mark, fences, index in _before_the_kill(out, db))
    assert (out / "bookies-entry-log-per-ledger" / "bookie-1.json").exists() and (out / "bookies-db").is_dir()


@pytest.fixture(scope="module")
def recorded_cursors(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, ScenarioRecording]]:
    out = tmp_path_factory.mktemp("real-ml")
    recordings = record_managed_ledger(list(ML_SCENARIOS), out)
    return out, {r.name: r for r in recordings}


def test_every_managed_ledger_scenario_conforms_to_the_cursor_and_managed_ledger_specs(
    recorded_cursors: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    out, recordings = recorded_cursors
    assert list(recordings) == list(ML_SCENARIOS)
    for name, recording in recordings.items():
        expected = {"known"} if ML_SCENARIOS[name].expects is not None else {"conforms"}
        if ML_SCENARIOS[name].may_show:
            expected.add("known")
        assert recording.status in expected, (name, [x.verdict.reason for x in recording.ledgers], recording.failure)
    trace = [orjson.loads(line) for line in (out / "crash-twice" / "trace.ndjson").read_bytes().splitlines()]
    kinds = [line["type"] for line in trace]
    assert kinds.count("BrokerCrashes") == 2 and kinds.count("CursorRecovers") == 2 and "LedgerRollsOver" in kinds
    # The same runs as the managed-ledger spec's clients see them, but where the cursor is reset (no step of it).
    for name, recording in recordings.items():
        specs = [x.spec for x in recording.ledgers]
        assert specs == (["cursor"] if "reset" in recording.not_checked.get("managed_ledger", "") else
                         ["cursor", "managed_ledger"]), (name, recording.not_checked)  # fmt: skip
    assert [r.name for r in recordings.values() if r.not_checked] == ["reset-back-restart"]
    topic = [orjson.loads(line) for line in (out / "crash-twice" / "topic" / "trace.ndjson").read_bytes().splitlines()]
    kinds = [line["type"] for line in topic]
    assert kinds.count("BrokerCrashes") == 2 and kinds.count("ManagedLedgerOpens") == 2 and "ConsumerAcks" in kinds
    # The takeover: the old broker's add failed, and the ledger its refused rollover created is the spec's third
    # (OldBrokerRollsOver, hidden), so the third broker publishes into the fourth.
    takeover = out / "second-broker-takes-over"
    moved = [orjson.loads(x) for x in (takeover / "topic" / "trace.ndjson").read_bytes().splitlines()]
    assert [line["type"] for line in moved].count("TopicMovesToAnotherBroker") == 1
    assert moved[-1]["observed"]["last_id"][:2] == [4, 0]
    observations = (takeover / "observations.ndjson").read_bytes().splitlines()
    (failed,) = [o for o in map(orjson.loads, observations) if o["ev"] == "publish-failed"]
    assert failed["broker"] == 1 and failed["error"].startswith("ManagedLedgerFencedException")


def test_the_cursor_znode_is_decoded_with_the_projects_format(
    recorded_cursors: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    out, _ = recorded_cursors
    znodes = json.loads((out / "close-reopen" / "metadata.json").read_text())
    assert znodes["type"] == "ManagedLedgerInfo" and znodes["ledgerInfo"]
    cursor = znodes["cursors"]["subscription"]
    assert cursor["type"] == "ManagedCursorInfo" and ":" in cursor["markDelete"]
    run = json.loads((out / "close-reopen" / "run.json").read_text())
    first_ledger = run["published"][0][0]
    # Messages 0, 1, 2 and 3 of 5 were acknowledged: the mark-delete is past the first ledger's entries 0 and 1.
    assert tuple(map(int, cursor["markDelete"].split(":"))) >= (first_ledger, 1)


def test_every_published_message_is_journaled_on_qa_bookies_of_its_write_set(
    recorded_cursors: tuple[Path, dict[str, ScenarioRecording]],
) -> None:
    out, _ = recorded_cursors
    acknowledged = json.loads((out / "bookies" / "acknowledged.json").read_text())
    published = sum(len(json.loads((out / name / "run.json").read_text())["published"]) for name in ML_SCENARIOS)
    assert sum(v["acknowledged"] for v in acknowledged.values()) == published
    kept = [v for v in acknowledged.values() if not v.get("ledger_deleted")]
    assert kept and all(v["on_fewer_than_qa_journals"] == [] for v in kept)
    # Trimming deleted the ledgers every cursor had consumed: their write sets are gone with their znodes.
    assert any(v.get("ledger_deleted") for v in acknowledged.values())


def _before_the_kill(out: Path, recording: ScenarioRecording) -> list[tuple[list[int], list[list[int]], Any]]:
    """Each bookie's lastMark, its fence records of the scenario's ledger and that ledger's index, before its kill.

    A bookie journals a fence record when a fencing read first fences the ledger in its storage
    (LedgerDescriptorImpl.fenceAndLogInJournal, 4.17.2). One recording of this suite showed two records on one
    bookie, for a cause its evidence did not keep, so each lastMark is compared with every record.
    """
    evidence = json.loads((out / recording.name / "evidence.json").read_text())
    (ledger,) = recording.ledgers
    found = []
    for inspection in evidence["inspections"]:
        if inspection["moment"] == "before the kill":
            (files,) = inspection["bookies"]
            mine = files["ledgers"][str(ledger.ledger)]
            assert mine["fence_records"], (recording.name, files)
            found.append((files["last_mark"] or [0, 0], mine["fence_records"], mine["index"]))
    assert len(found) == 3
    return found


def _fenced_while_empty(out: Path, ledger: int) -> bool:
    """A recovering client's fencing read of the LAC of ``ledger`` answered "no such entry" by some bookie."""
    for run_file in out.glob("*/run.json"):
        if ledger in json.loads(run_file.read_text())["ledgers"]:
            observations = [
                orjson.loads(x) for x in (run_file.parent / "observations.ndjson").read_bytes().splitlines()
            ]
            return any(
                o["ev"] == "reply" and o["op"] == "read" and o["ledger"] == ledger and o["client"] >= 1
                and o["entry"] == -1 and o["rc"] in (-13, -7)
                for o in observations
            )  # fmt: skip
    return False


def test_a_scenario_that_cannot_be_mapped_is_reported_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = real_systems.check_recording

    def unmappable(directory: Path) -> ScenarioRecording:
        if directory.name == "recover-open":
            raise RecordingError(f"{directory / 'observations.ndjson'}: ledger 0: no order")
        return checked(directory)

    monkeypatch.setattr(real_systems, "check_recording", unmappable)
    seen: list[str] = []
    lost, after = record_bookkeeper(["recover-open", "recover-empty"], tmp_path, progress=lambda r: seen.append(r.name))
    assert (lost.status, after.status, seen) == ("unmapped", "conforms", ["recover-open", "recover-empty"])
    assert lost.unmapped is not None and lost.unmapped.endswith("recover-open/observations.ndjson: ledger 0: no order")
    assert (tmp_path / "recover-open" / "observations.ndjson").stat().st_size > 0  # kept, for --recheck
    monkeypatch.setattr(real_systems, "check_recording", checked)
    assert real_systems.check_recording(tmp_path / "recover-open").status == "conforms"


def test_the_suite_runs_on_db_ledger_storage_as_pulsar_deploys_it(tmp_path: Path) -> None:
    """``--storage db``: the scenarios about no storage run on one cluster with the one about DbLedgerStorage, which
    then follows a recovery's write-back: the fence is lost all the same (the scenario waits for the write cache
    to be flushed before it fences)."""
    names = ["explicit-lac-reader", "long-poll-reader", "crash-restart-recover"]
    recordings = record_bookkeeper([*names, "fence-empty-ledger-db-storage-then-restart"], tmp_path, storage="db")
    outcome = [(r.name, r.storage, r.status, [x.verdict.reason for x in r.ledgers]) for r in recordings]
    assert [(r.storage, r.status) for r in recordings] == [("db", "conforms")] * 3 + [("db", "known")], outcome
    assert all(json.loads((tmp_path / n / "run.json").read_text())["storage"] == "db" for n in names)
    assert (tmp_path / "bookies-db" / "bookie-1.json").exists() and not (tmp_path / "bookies").exists()
