"""The BookKeeper adapter without Java: recordings of the real system mapped and checked again, rule by rule."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from ledgerspec.conformance.adapters import bookkeeper
from ledgerspec.conformance.adapters.bookkeeper import LedgerTraceMapper, MappingError, order_by_service
from ledgerspec.conformance.adapters.cluster import free_ports
from ledgerspec.conformance.adapters.findings import FINDINGS
from ledgerspec.conformance.adapters.jars import JavaSetupError, ensure_jars
from ledgerspec.conformance.adapters.ml_scenarios import ML_SCENARIOS
from ledgerspec.conformance.adapters.scenarios import SCENARIOS
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording import real_systems
from ledgerspec.tools.recording.real_systems import RecordingError, ScenarioRecording, check_recording
from raced_replies import raced_lines
from recording_support import Edit, edited_copy, moved_copy

RECORDINGS = Path(__file__).parent / "data" / "bookkeeper-4.17.2"


def _recheck(tmp_path: Path, system: str, recordings: str, *more: str) -> int:
    """``ledgerspec record SYSTEM --recheck RECORDINGS --out TMP/out ...``: its exit status."""
    return main(["record", system, "--out", str(tmp_path / "out"), "--recheck", recordings, *more])


def recheck(tmp_path: Path, name: str, edit: Edit | None = None) -> ScenarioRecording:
    """Check a stored recording again in a copy; ``edit`` may change or drop (None) each observation."""
    return check_recording(edited_copy(RECORDINGS / name, tmp_path, edit))


#: Recordings in which a race brought about a finding the scenario may show (``Scenario.may_show``).
RACED_INTO_A_FINDING = {
    "recovery-races-writer-journal-latency": "fenced-writer-closes-ledger",
    "recovery-races-writer-acks-after-refusal": "fenced-writer-closes-ledger",
    "recovery-races-writer-late-ack": "fenced-writer-closes-ledger",
}


def scenario_and_status(name: str) -> tuple[str, str]:
    """The scenario a stored recording is of, and the status it was judged with when recorded."""
    scenario = SCENARIOS[json.loads((RECORDINGS / name / "run.json").read_text())["scenario"]]
    raced = RACED_INTO_A_FINDING.get(name)
    assert raced is None or raced in scenario.may_show
    return scenario.name, "known" if scenario.expects or raced else "conforms"


@pytest.mark.parametrize("name", sorted(p.name for p in RECORDINGS.iterdir()))
def test_each_recording_checks_as_it_did_when_recorded(tmp_path: Path, name: str) -> None:
    recording = recheck(tmp_path, name)
    _, expected = scenario_and_status(name)
    assert recording.status == expected, [r.verdict.reason for r in recording.ledgers]
    written = [orjson.loads(line) for line in (tmp_path / name / "trace.ndjson").read_bytes().splitlines()]
    assert written and all(line["process"] in ("writer", "recoverer-1", "recoverer-2", "reader-1") for line in written)
    assert [line["seq"] for line in written] == sorted(line["seq"] for line in written)
    verdict = json.loads((tmp_path / name / "verdict.json").read_text())
    assert verdict["status"] == expected and verdict["traces"][0]["constants"]["NumBookies"] == 5


def test_a_bookie_that_refused_an_add_after_it_completed_is_replaced_at_the_next_add(tmp_path: Path) -> None:
    """On reference bookies (their faults make bookie 1's refusal late), E=4 Qw=3 Qa=2: entry 4 completed on
    bookies 2 and 3 before bookie 1 refused it, and the writer replaced bookie 1 as it added entry 5, which goes to
    bookies 2, 3 and 4 (PendingAddOp.initiate, maybeHandleDelayedWriteBookieFailure, 4.17.2). Entry 5's acks, held
    back while the ensemble changed, completed it as the change ended: their steps go before the close."""
    recording = recheck(tmp_path, "replace-after-late-refusal")
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    lines = [orjson.loads(line) for line in (tmp_path / "replace-after-late-refusal" / "trace.ndjson").open("rb")]
    change = next(i for i, line in enumerate(lines) if line["type"] == "WriterChangesEnsemble")
    close = next(i for i, line in enumerate(lines) if line["type"] == "WriterClosesLedger")
    assert lines[change]["params"] == {"b": 1, "nb": 5}
    assert lines[change - 1]["type"] == "WriterAddsEntry" and lines[change - 1]["observed"] == {"writer_lap": 5}
    acks = {(x["params"]["m"]["bookie"], x["params"]["m"]["entry"]) for x in lines[change + 1 : close]}
    assert acks == {(2, 5), (3, 5), (4, 5)} and lines[close]["observed"]["meta_last_entry"] == 5


def test_two_bookies_replaced_in_one_metadata_write_are_two_steps_each_one_version(tmp_path: Path) -> None:
    """On reference bookies, E=3 Qw=3 Qa=1: entry 3 completed on bookie 1 before bookies 2 and 3 refused it late;
    both failures waited for the next add (delayedWriteFailedBookies, 4.17.2), which replaced them in one write of
    the metadata, ZooKeeper's version 1. The spec replaces one bookie a step: two steps, its version 3."""
    recording = recheck(tmp_path, "replace-two-in-one-write")
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    observations = [
        orjson.loads(line) for line in (RECORDINGS / "replace-two-in-one-write" / "observations.ndjson").open("rb")
    ]
    writes = [o["written"]["version"] for o in observations if o["ev"] == "metadata" and o["op"] == "write"]
    assert writes == [1, 2]  # ZooKeeper's: the change, the close
    lines = [orjson.loads(line) for line in (tmp_path / "replace-two-in-one-write" / "trace.ndjson").open("rb")]
    steps = ("WriterChangesEnsemble", "WriterClosesLedger")
    metadata = [(x["type"], x.get("params"), x.get("observed")) for x in lines if x["type"] in steps]
    (first, _, _), (second, _, after_change), (close, _, after_close) = metadata
    assert (first, second, close) == ("WriterChangesEnsemble", "WriterChangesEnsemble", "WriterClosesLedger")
    assert {metadata[0][1]["b"], metadata[1][1]["b"]} == {2, 3} and metadata[0][2] is None
    assert after_change["meta_version"] == 3 and after_change["meta_segments"][-1][0] == 4
    assert after_close["meta_version"] == 4 and after_close["meta_last_entry"] == 4


def test_the_lost_fence_is_a_violation_of_the_acked_entry_promise(tmp_path: Path) -> None:
    recording = recheck(tmp_path, "fence-empty-ledger-then-restart")
    (ledger,) = recording.ledgers
    assert ledger.verdict.status == "violates" and FINDINGS["fence-of-empty-ledger-lost"].explains(
        ledger.verdict.reason
    )
    assert "acknowledged entry 0 is not in the closed ledger" in (recording.failure or "")
    # The oracle names the promise from the client's reports alone: the close at -1, the writer's LAC of 0.
    (promise,) = ledger.verdict.broken_promises
    assert promise.name == "NoAckedEntryLost" and ledger.verdict.finding == "bug"
    assert {e.variable for e in promise.evidence} == {"meta_status", "meta_last_entry", "writer_lac"}


@pytest.mark.parametrize("name", sorted(p.name for p in RECORDINGS.iterdir()))
def test_the_oracle_labels_each_known_finding_as_the_findings_list_does(tmp_path: Path, name: str) -> None:
    """bug where the verdict names a broken promise, difference where it does not: as docs/real-systems.md says."""
    recording = recheck(tmp_path, name)
    labels = recording.labels()
    for verdict, finding in labels:
        assert finding is not None and verdict.finding == finding.kind, (finding, verdict.reason)
    data = json.loads((tmp_path / name / "verdict.json").read_text())
    assert data["status"] == recording.status != "mislabelled"


def test_a_finding_the_oracle_labels_otherwise_is_mislabelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = FINDINGS["fenced-writer-closes-ledger"]
    monkeypatch.setitem(FINDINGS, listed.name, attrs.evolve(listed, kind="bug"))
    name = "recovery-races-writer-journal-latency"
    recording = recheck(tmp_path, name)
    assert recording.status == "mislabelled"
    assert _recheck(tmp_path / "again", "bookkeeper", str(RECORDINGS / name)) == 1


def test_a_recovery_that_replaces_a_bookie_conforms(tmp_path: Path) -> None:
    """The write-back to the killed bookie fails; the recovering client replaces it in its own ensemble and
    its close writes the new ensemble: RecovererChangesEnsemble, then RecovererClosesLedger with it."""
    recording = recheck(tmp_path, "recover-with-bookie-down")
    (ledger,) = recording.ledgers
    assert recording.status == ledger.verdict.status == "conforms", ledger.verdict.reason
    trace = (tmp_path / "recover-with-bookie-down" / "trace.ndjson").read_bytes()
    lines = [orjson.loads(line) for line in trace.splitlines()]
    (change,) = [line for line in lines if line["type"] == "RecovererChangesEnsemble"]
    assert change["params"] == {"c": 1, "b": 1, "nb": 4}
    (close,) = [line for line in lines if line["type"] == "RecovererClosesLedger"]
    assert close["observed"]["meta_segments"] == [[0, [4, 2, 3]]]


#: The fence of an empty ledger across a crash of its three bookies, recorded on each storage.
FENCE_VARIANTS = {
    "fence-empty-ledger-then-restart": ("known", "fence-of-empty-ledger-lost"),
    "fence-empty-ledger-checkpoint-then-restart": ("conforms", None),
    "fence-empty-ledger-db-storage-then-restart": ("known", "fence-lost-by-db-ledger-storage"),
}


@pytest.mark.parametrize("name", FENCE_VARIANTS)
def test_each_storage_variant_of_the_lost_fence_is_judged_as_recorded(tmp_path: Path, name: str) -> None:
    recording = recheck(tmp_path, name)
    status, finding = FENCE_VARIANTS[name]
    (ledger,) = recording.ledgers
    assert (recording.status, recording.expects) == (status, finding), ledger.verdict.reason
    if finding is None:  # the add was refused: the writer's handle ends FENCED, as in the spec
        assert recording.failure is None and ledger.verdict.status == "conforms"
    else:
        assert ledger.verdict.status == "violates" and FINDINGS[finding].explains(ledger.verdict.reason)
        assert "acknowledged entry 0 is not in the closed ledger" in (recording.failure or "")
    verdict = json.loads((tmp_path / name / "verdict.json").read_text())
    assert verdict["evidence"] == list(recording.evidence) and len(recording.evidence) > 6


def _before_the_kill(name: str) -> list[tuple[list[int] | None, list[int], dict[str, Any] | None]]:
    """Each bookie's lastMark, fence record and index of the ledger just before it was killed (evidence.json)."""
    evidence = json.loads((RECORDINGS / name / "evidence.json").read_text())
    (ledger,) = json.loads((RECORDINGS / name / "run.json").read_text())["ledgers"]
    found = []
    for inspection in evidence["inspections"]:
        if inspection["moment"] == "before the kill":
            (files,) = inspection["bookies"]
            mine = files["ledgers"][str(ledger)]
            (fence,) = mine["fence_records"]
            assert mine["ledger_key_records"] == []  # a fencing read journals no master key
            found.append((files["last_mark"], fence, mine["index"]))
    assert len(found) == 3
    return found


def test_without_a_checkpoint_the_replay_skips_the_fence_record_for_want_of_an_index() -> None:
    name = "fence-empty-ledger-then-restart"
    # No checkpoint came in the default storage: lastMark (0, 0), and no index file at all, on every bookie.
    assert all(mark == [0, 0] and index is None for mark, _, index in _before_the_kill(name))
    evidence = json.loads((RECORDINGS / name / "evidence.json").read_text())
    assert all(i["index_files"] == 0 for i in evidence["inspections"][0]["bookies"])
    (ledger,) = json.loads((RECORDINGS / name / "run.json").read_text())["ledgers"]
    for replay in evidence["replays"]:
        # The replay read the fence record (entry id -0x2000), found no master key, and skipped it.
        messages = [line.split(" Bookie ", 1)[-1] for line in replay["lines"]]
        assert f"Replay journal - ledger id : {ledger}, entry id : -8192." in messages
        assert f"Skip replaying entries of ledger {ledger} since it was deleted." in messages
        assert replay["dropped"] > 0
    assert "dropped and counted" in evidence["rule"]


def test_a_checkpoint_before_the_crash_writes_the_fence_into_the_index() -> None:
    name = "fence-empty-ledger-checkpoint-then-restart"
    assert all(
        mark > fence and index == {"fenced": True, "entries": 0} for mark, fence, index in _before_the_kill(name)
    )
    evidence = json.loads((RECORDINGS / name / "evidence.json").read_text())
    assert not any("Skip replaying" in line for replay in evidence["replays"] for line in replay["lines"])


def test_db_ledger_storage_moves_the_lastmark_past_the_fence_without_an_index_to_show_for_it() -> None:
    name = "fence-empty-ledger-db-storage-then-restart"
    before = _before_the_kill(name)
    assert all(mark is not None and mark > fence and index is None for mark, fence, index in before)
    evidence = json.loads((RECORDINGS / name / "evidence.json").read_text())
    # Each replay starts past the fence record: the ledger is not named in it.
    starts = [line for replay in evidence["replays"] for line in replay["lines"] if "Replaying journal" in line]
    assert len(starts) == 3 and all(int(line.rsplit(" ", 1)[1]) > 512 for line in starts)
    assert all(fence[1] == 512 for _, fence, _ in before)
    assert not any("Replay journal - ledger id" in line for replay in evidence["replays"] for line in replay["lines"])


def test_a_restart_log_keeps_the_replay_lines_of_the_scenarios_ledgers_only() -> None:
    text = "\n".join(
        [
            "10:00:00.000 INFO  [main] Main Hello, I'm your bookie",
            "10:00:00.001 INFO  [main] Bookie Replaying journal 42 from position 0",
            "10:00:00.002 DEBUG [main] Bookie Replay journal - ledger id : 230, entry id : 0.",
            "10:00:00.003 DEBUG [main] Bookie Replay journal - ledger id : 23, entry id : -8192.",
            "10:00:00.004 DEBUG [main] Bookie Skip replaying entries of ledger 230 since it was deleted.",
            "10:00:00.005 DEBUG [main] Bookie Skip replaying entries of ledger 23 since it was deleted.",
            "10:00:00.006 INFO  [main] Bookie Finished replaying journal in 3 ms.",
        ]
    )
    trimmed = real_systems._trimmed_replay_log(text, [23])
    assert [line[13:] for line in trimmed["lines"]] == [
        "INFO  [main] Bookie Replaying journal 42 from position 0",
        "DEBUG [main] Bookie Replay journal - ledger id : 23, entry id : -8192.",
        "DEBUG [main] Bookie Skip replaying entries of ledger 23 since it was deleted.",
        "INFO  [main] Bookie Finished replaying journal in 3 ms.",
    ]
    assert trimmed["dropped"] == 3


def test_damaged_evidence_is_refused_with_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = edited_copy(RECORDINGS / "fence-empty-ledger-then-restart", tmp_path)
    (copy / "evidence.json").write_text('{"inspections": [{"moment": "now"}], "replays": []}')
    assert _recheck(tmp_path, "bookkeeper", str(copy)) == 2
    assert "evidence.json: not the evidence the recorder writes (KeyError: 'bookies')" in capsys.readouterr().err
    (copy / "evidence.json").write_text("{")
    with pytest.raises(RecordingError, match=r"evidence\.json: not the evidence the recorder writes \(JSONDecodeError"):
        check_recording(copy)


def test_a_reply_that_changes_nothing_needs_the_stuttering_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TRACE, "stutters", {})
    (ledger,) = recheck(tmp_path, "fenced-writer").ledgers
    assert ledger.verdict.status == "violates" and "changes nothing the spec tracks" in ledger.verdict.reason


def test_acks_during_an_ensemble_change_must_wait_for_it(tmp_path: Path) -> None:
    def forget_the_flag(obs: dict[str, Any]) -> dict[str, Any]:
        obs.pop("changing", None)
        return obs

    (ledger,) = recheck(tmp_path, "two-ensemble-changes", forget_the_flag).ledgers
    # The spec completes entry 4 on its second ack; BookKeeper's handle was still changing its ensemble.
    assert ledger.verdict.status != "conforms"
    assert "observed writer_lac = 3, the spec has 4" in ledger.verdict.reason


def test_replies_are_put_in_the_order_their_bookie_served_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bookkeeper, "order_by_service", lambda lines: lines)
    (ledger,) = recheck(tmp_path, "fenced-writer").ledgers
    # A fencing reply logged before a refusal its bookie gave later: in log order the writer is fenced too early.
    assert ledger.verdict.status == "violates"
    assert "WriterAddsEntry(lac=4) is not enabled: the writer's handle is FENCED" in ledger.verdict.reason


def test_a_refusal_of_an_add_that_had_completed_does_not_fence_the_writer(tmp_path: Path) -> None:
    def forget_completions(obs: dict[str, Any]) -> dict[str, Any] | None:
        return None if obs["ev"] == "complete" else obs

    (ledger,) = recheck(tmp_path, "fenced-writer", forget_completions).ledgers
    assert ledger.verdict.status == "violates"
    assert "WriterAddsEntry(lac=4) is not enabled: the writer's handle is FENCED" in ledger.verdict.reason


def test_a_reply_goes_before_an_add_that_carries_the_lac_it_made(tmp_path: Path) -> None:
    """Without the LAC each add carries, one reply lands after an add that carried its LAC to the bookies."""

    def forget_packaged_lac(obs: dict[str, Any]) -> dict[str, Any]:
        if obs["ev"] == "send":
            obs.pop("lac", None)
        return obs

    assert recheck(tmp_path / "a", "recovery-races-writer").status == "conforms"
    (ledger,) = recheck(tmp_path / "b", "recovery-races-writer", forget_packaged_lac).ledgers
    # The spec's bookies then hold a lower LAC, and its recovery reads from an entry the real one skipped.
    assert ledger.verdict.status == "violates"
    reason = ledger.verdict.reason
    assert "no instance of BookieReceivesRecoveryRead matches" in reason and '"entry":25' in reason, reason
    assert "the spec offers BookieReceivesRecoveryRead(m=ReadReq(c1 b1 e24 fence)" in reason, reason


def test_an_add_issued_from_a_callback_carries_the_lac_of_that_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add issued from an add's callback carries that add's id as its LAC, though later adds had their acks.

    Entry 27 had its acks before entry 26; the adds issued from 26's callback carry LAC 26, and the recovery,
    which starts after the highest LAC the bookies hold, reads entry 27 again.
    """
    name = "recovery-races-writer-callback-lac"
    (ledger,) = recheck(tmp_path / "a", name).ledgers
    assert ledger.verdict.status == "conforms" and ledger.constants["LacLag"] == 1
    written = [orjson.loads(line) for line in (tmp_path / "a" / name / "trace.ndjson").read_bytes().splitlines()]
    assert {"lac": 26} in [line.get("params") for line in written if line["type"] == "WriterAddsEntry"]
    # A spec whose adds carry the writer's LAC parts with the run at the first add that carries a lagging one.
    monkeypatch.setattr(LedgerTraceMapper, "_adds_name_their_lac", lambda self: False)
    (ledger,) = recheck(tmp_path / "b", name).ledgers
    assert ledger.verdict.status == "violates"
    assert (
        "WriterAddsEntry(lac=6) is not enabled: the add carries LAC 6, but the writer's next add carries one "
        "in 7 .. 7 (LacLag=0"
    ) in ledger.verdict.reason, ledger.verdict.reason


def test_an_add_sent_twice_to_one_bookie_is_served_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an ensemble change the writer resends its pending adds, some of them to a bookie that had them."""
    monkeypatch.setattr(
        LedgerTraceMapper, "_acks_since_change", property(lambda _: set(), lambda _, v: None), raising=False
    )
    (ledger,) = recheck(tmp_path, "crash-restart").ledgers
    assert ledger.verdict.status == "violates"
    assert "no instance of BookieReceivesAdd matches" in ledger.verdict.reason


def test_the_writers_explicit_lac_is_what_lets_the_reader_learn_a_lac_no_add_carried(tmp_path: Path) -> None:
    """explicit-lac-reader: three adds packaged before any ack carry LAC -1, so the reader's LAC 2 at its open can
    only come from the explicit LAC; without the writer's WriteLac requests the same run leaves the spec there."""
    (ledger,) = recheck(tmp_path / "as-recorded", "explicit-lac-reader").ledgers
    assert ledger.verdict.status == "conforms", ledger.verdict.reason
    lines = [
        orjson.loads(line)
        for line in (tmp_path / "as-recorded" / "explicit-lac-reader" / "trace.ndjson").read_bytes().splitlines()
    ]
    steps = [(line["type"], line.get("params")) for line in lines if line["type"] != "BookieReceivesAdd"]
    assert steps[3:5] == [("WriterSendsExplicitLac", {"at": 2}), ("ReaderReadsLac", {"r": 1, "lac": 2})]
    assert [p["lac"] for kind, p in steps if kind == "WriterAddsEntry"][:3] == [-1, -1, -1]
    assert {p["e"] for kind, p in steps if kind == "ReaderReadsEntry"} == set(range(6))
    constants = json.loads((tmp_path / "as-recorded" / "explicit-lac-reader" / "verdict.json").read_text())["traces"][
        0
    ]["constants"]
    assert (constants["ExplicitLac"], constants["NumReaders"]) == (1, 1)

    def drop_explicit_lac(obs: dict[str, Any]) -> dict[str, Any] | None:
        return None if obs.get("op") == "write-lac" else obs

    (ledger,) = recheck(tmp_path / "without", "explicit-lac-reader", drop_explicit_lac).ledgers
    assert ledger.verdict.status == "violates" and "ReaderReadsLac" in ledger.verdict.reason


def test_a_close_with_adds_pending_is_placed_where_it_drained_them(tmp_path: Path) -> None:
    """close-with-adds-pending: 164 adds pending at the close fail with LedgerClosedException before its metadata
    write; acks that arrive in between complete nothing. Without those failures reported, the acks would move the
    spec's writer past the 140 the handle stayed at."""
    (ledger,) = recheck(tmp_path / "as-recorded", "close-with-adds-pending").ledgers
    assert ledger.verdict.status == "conforms", ledger.verdict.reason
    lines = [
        orjson.loads(line)
        for line in (tmp_path / "as-recorded" / "close-with-adds-pending" / "trace.ndjson").read_bytes().splitlines()
    ]
    (close,) = [i for i, line in enumerate(lines) if line["type"] == "WriterClosesLedger"]
    assert lines[close]["observed"]["meta_last_entry"] == 140
    late = [line for line in lines[close:] if line["type"] == "BookieReceivesAdd"]
    assert late and all(line["params"]["m"]["entry"] > 140 for line in late)

    def no_drain_reported(obs: dict[str, Any]) -> dict[str, Any] | None:
        return None if obs["ev"] == "complete" and obs["rc"] == -11 else obs

    (ledger,) = recheck(tmp_path / "without", "close-with-adds-pending", no_drain_reported).ledgers
    assert ledger.verdict.status == "violates" and "observed writer_lac = 140" in ledger.verdict.reason


def test_a_long_poll_gives_the_reader_the_lac_and_the_next_entry(tmp_path: Path) -> None:
    (ledger,) = recheck(tmp_path, "long-poll-reader").ledgers
    assert ledger.verdict.status == "conforms", ledger.verdict.reason
    lines = [orjson.loads(line) for line in (tmp_path / "long-poll-reader" / "trace.ndjson").read_bytes().splitlines()]
    reader = [(line["type"], line["params"]) for line in lines if line["process"] == "reader-1"]
    assert reader == [("ReaderReadsLac", {"r": 1, "lac": 2}), ("ReaderReadsEntry", {"r": 1, "e": 0, "b": 1})]


@pytest.mark.parametrize("bookie_named", [True, False], ids=["long-poll", "lac-read"])
def test_a_lac_read_before_the_writer_has_the_ack_conforms(tmp_path: Path, bookie_named: bool) -> None:
    """The bookie sets its LAC before it journals the add (BookieImpl.addEntryInternal): the long poll that
    reports LAC 2 may reach the reader before any ack of entry 3, the first add that carried LAC 2. Without
    the poll's reply, the client's report of the LAC it read names no bookie: the first add sent with LAC 2
    is the one stored, bookie 1's here too."""
    dropped: list[dict[str, Any]] = []

    def drop_the_poll_reply(obs: dict[str, Any]) -> dict[str, Any] | None:
        if bookie_named or not (obs["ev"] == "reply" and obs["client"] == 1):
            return obs
        dropped.append(obs)
        return None

    copy = moved_copy(RECORDINGS / "long-poll-reader", tmp_path, {48, 49}, before=33, edit=drop_the_poll_reply)
    assert len(dropped) == (0 if bookie_named else 1)
    recording = check_recording(copy)
    (ledger,) = recording.ledgers
    assert ledger.verdict.status == "conforms", ledger.verdict.reason
    lines = [orjson.loads(line) for line in (copy / "trace.ndjson").read_bytes().splitlines()]
    steps = [(line["type"], line.get("params", {})) for line in lines]
    read = steps.index(("ReaderReadsLac", {"r": 1, "lac": 2}))
    stored = [
        i
        for i, (kind, params) in enumerate(steps)
        if kind == "BookieReceivesAdd" and params["m"]["bookie"] == 1 and params["m"]["entry"] == 3
    ]
    assert stored == [read - 1]  # bookie 1 (the one polled) stores entry 3 first, once: its ack is no second step
    # The writer's LAC is not compared while the ack is on its way: the handle's stays 2 meanwhile.
    acked = next(
        i for i, (kind, params) in enumerate(steps) if kind == "BookieReceivesAdd" and params["m"]["entry"] == 4
    )
    assert all("writer_lac" not in lines[i].get("observed", {}) for i in range(read, acked + 1))


def test_adds_a_killed_bookie_stored_unanswered_are_replies_lost_with_it(tmp_path: Path) -> None:
    """write-cache-pressure-then-crash: bookie 1, throttled by its full write cache, had journaled entries 30 to 34
    without acknowledging them when it was killed; the writer saw those adds fail. After its restart its fencing
    reply names entry 34 as the last it holds, and the recovery reads entries from it up to there."""
    name = "write-cache-pressure-then-crash"
    (ledger,) = recheck(tmp_path, name).ledgers
    assert ledger.verdict.status == "conforms", ledger.verdict.reason
    lines = [orjson.loads(line) for line in (tmp_path / name / "trace.ndjson").read_bytes().splitlines()]
    lost = [
        (line["params"]["m"]["bookie"], line["params"]["m"]["entry"])
        for line in lines
        if line["type"] == "BookieReceivesAdd" and line["params"]["replied"] is False
    ]
    assert sorted(lost) == [(1, e) for e in range(30, 35)]
    verdict = json.loads((tmp_path / name / "verdict.json").read_text())
    assert verdict["traces"][0]["constants"]["MaxLoss"] == 5  # one lost reply each, and no more

    observations = [
        orjson.loads(line) for line in (RECORDINGS / name / "observations.ndjson").read_bytes().splitlines()
    ]
    (created,) = [o for o in observations if o["ev"] == "metadata" and o["op"] == "create"]
    bookie_1 = created["written"]["ensembles"]["0"][0]  # the spec's bookie 1: the first of the first ensemble

    def holds_less(obs: dict[str, Any]) -> dict[str, Any]:
        fencing_reply = obs["ev"] == "reply" and obs["client"] == 1 and obs["entry"] == -1
        return {**obs, "returned_entry": 29} if fencing_reply and obs["bookie"] == bookie_1 else obs

    # Told that bookie 1 holds nothing past entry 29, the spec's bookie cannot serve the read of entry 30 it served.
    (ledger,) = recheck(tmp_path / "less", name, holds_less).ledgers
    assert ledger.verdict.status != "conforms" and "BookieReceivesRecoveryRead" in ledger.verdict.reason


def test_a_long_poll_no_add_explains_is_caught(tmp_path: Path) -> None:
    """The same early reply with a LAC no add to the polled bookie carried (3): the reader could not have it."""

    def inflate(obs: dict[str, Any]) -> dict[str, Any]:
        return {**obs, "lac": 3} if obs["ev"] in ("reply", "lac-read") and obs["client"] == 1 else obs

    copy = moved_copy(RECORDINGS / "long-poll-reader", tmp_path, {48, 49}, before=33, edit=inflate)
    (ledger,) = check_recording(copy).ledgers
    assert ledger.verdict.status == "violates" and "ReaderReadsLac(r=1, lac=3)" in ledger.verdict.reason


def test_a_reader_told_a_lac_past_the_acknowledged_entries_is_caught(tmp_path: Path) -> None:
    def inflate(obs: dict[str, Any]) -> dict[str, Any]:
        return {**obs, "lac": 6} if obs["ev"] == "lac-read" else obs

    (ledger,) = recheck(tmp_path, "explicit-lac-reader", inflate).ledgers
    assert ledger.verdict.status == "violates" and "ReaderReadsLac" in ledger.verdict.reason


def test_a_lac_the_writer_never_had_is_caught(tmp_path: Path) -> None:
    """The writer's handle reports one entry more than it acknowledged."""
    bumped = False

    def bump(obs: dict[str, Any]) -> dict[str, Any]:
        nonlocal bumped
        if obs["ev"] == "after" and obs["lac"] == 2 and not bumped:
            obs["lac"], bumped = 3, True
        return obs

    (ledger,) = recheck(tmp_path, "recover-open", bump).ledgers
    assert bumped and ledger.verdict.status == "violates"
    assert "observed writer_lac = 3" in ledger.verdict.reason


def test_an_ack_that_never_came_back_is_not_needed_but_one_invented_is_caught(tmp_path: Path) -> None:
    def drop_recoverer_close(obs: dict[str, Any]) -> dict[str, Any] | None:
        return None if obs["ev"] == "metadata" and obs["client"] == 1 and obs["written"]["state"] == "CLOSED" else obs

    assert recheck(tmp_path / "a", "recover-open", drop_recoverer_close).status == "conforms"  # a prefix

    def add_to_a_stranger(obs: dict[str, Any]) -> dict[str, Any]:
        if obs["ev"] == "reply" and obs["op"] == "add" and obs["client"] == 0 and obs["entry"] == 1:
            first = json.loads((RECORDINGS / "recover-open" / "run.json").read_text())["cluster_bookies"]
            obs["bookie"] = first[-1] if obs["bookie"] != first[-1] else first[0]
        return obs

    (ledger,) = recheck(tmp_path / "b", "recover-open", add_to_a_stranger).ledgers
    assert ledger.verdict.status == "violates"


def _mapper() -> LedgerTraceMapper:
    mapper = LedgerTraceMapper("t", 7, ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"])
    mapper.feed(
        {
            "obs": 0, "ev": "metadata", "client": 0, "op": "create", "ledger": 7, "ok": True,
            "written": {"state": "OPEN", "ensembles": {"0": ["127.0.0.1:3", "127.0.0.1:1", "127.0.0.1:2"]},
                        "last_entry": -1, "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2, "version": 0},
        }
    )  # fmt: skip
    return mapper


def test_bookies_are_numbered_from_the_first_ensemble_and_bad_observations_are_named() -> None:
    mapper = _mapper()
    assert mapper.numbers == {"127.0.0.1:3": 1, "127.0.0.1:1": 2, "127.0.0.1:2": 3, "127.0.0.1:4": 4}
    mapper.feed({"obs": 1, "ev": "send", "client": 0, "op": "add", "bookie": "127.0.0.1:3", "ledger": 7,
                 "entry": 0, "flags": 0})  # fmt: skip
    mapper.feed({"obs": 2, "ev": "send", "client": 0, "op": "add", "bookie": "127.0.0.1:3", "ledger": 8,
                 "entry": 5, "flags": 0})  # fmt: skip  # another ledger's: not this trace's
    assert [line["type"] for line in mapper.lines] == ["WriterAddsEntry"]
    with pytest.raises(MappingError, match="observation 3: unknown kind 'gossip'"):
        mapper.feed({"obs": 3, "ev": "gossip", "ledger": 7})
    with pytest.raises(MappingError, match=r"observation 4: bookie 10\.0\.0\.9:3181 is not a bookie of the cluster"):
        mapper.feed({"obs": 4, "ev": "reply", "client": 0, "op": "add", "bookie": "10.0.0.9:3181", "ledger": 7,
                     "entry": 0, "rc": 0})  # fmt: skip
    with pytest.raises(MappingError, match="observation 5: a read reply for a request that was never sent"):
        mapper.feed({"obs": 5, "ev": "reply", "client": 1, "op": "read", "bookie": "127.0.0.1:1", "ledger": 7,
                     "entry": 0, "rc": 0})  # fmt: skip
    with pytest.raises(MappingError, match=r"observation 6: a reply observation with a field missing .*'x'"):
        mapper.feed({"obs": 6, "ev": "reply", "client": 0, "op": "add", "bookie": "127.0.0.1:1", "ledger": 7,
                     "entry": "x", "rc": 0})  # fmt: skip
    with pytest.raises(MappingError, match=r"observation 7: a send observation with a field missing .*'flags'"):
        mapper.feed({"obs": 7, "ev": "send", "client": 0, "op": "add", "bookie": "127.0.0.1:1", "ledger": 7,
                     "entry": 1})  # fmt: skip
    with pytest.raises(MappingError, match="ledger 9: no creation of its metadata was observed"):
        LedgerTraceMapper("t", 9, ["127.0.0.1:1"]).constants()


def _line(process: str, kind: str, bookie: int, obs: int, sent: int | None = None, **extra: Any) -> dict[str, Any]:
    client = 0 if process == "writer" else 1
    m = {"type": {"add": "AddReq", "fence": "FenceReq"}[kind], "client": client, "bookie": bookie, "entry": 0,
         "recovery": False, "fence": kind == "fence"}  # fmt: skip
    action = "BookieReceivesAdd" if kind == "add" else "BookieReceivesFenceRead"
    line: dict[str, Any] = {"process": process, "type": action, "params": {"m": m, "replied": True}, "x-obs": obs}
    line.update(extra)
    if sent is not None:
        line["x-sent"] = sent
    return line


def test_a_fencing_reply_that_overtook_an_ack_of_its_bookie_goes_after_it_with_what_follows_it() -> None:
    fence = _line("recoverer-1", "fence", 2, obs=10, sent=5)
    then = _line("recoverer-1", "fence", 3, obs=11, sent=5)
    other = _line("writer", "add", 1, obs=12, sent=3)
    ack = _line("writer", "add", 2, obs=13, sent=4)  # sent before the fencing reply came: served first
    late = _line("writer", "add", 2, obs=14, sent=12)  # sent after it: served after the fence, stays put
    ordered = order_by_service([fence, then, other, ack, late])
    assert [line["x-obs"] for line in ordered] == [12, 13, 10, 11, 14]
    assert [line["seq"] for line in ordered] == [1, 2, 3, 4, 5]
    rejected = _line("writer", "add", 2, obs=20, sent=1, observed={"writer_status": "FENCED"})
    fenced = _line("recoverer-1", "fence", 2, obs=21, sent=2)
    assert [line["x-obs"] for line in order_by_service([rejected, fenced])] == [21, 20]


def test_a_refusal_that_overtook_acks_of_its_bookie_goes_after_them_and_after_its_fence() -> None:
    early = _line("writer", "add", 1, obs=10, sent=1)
    refused = _line("writer", "add", 1, obs=11, sent=4, observed={"writer_status": "FENCED"})
    other = _line("writer", "add", 2, obs=12, sent=2)
    synced = _line("writer", "add", 1, obs=13, sent=3)  # sent before the refused add: its bookie served it first
    ordered = order_by_service([early, refused, other, synced])
    assert [line["x-obs"] for line in ordered] == [10, 12, 13, 11]
    # Not past a step the writer took after the refusal: it may have taken it because it was fenced.
    closes = {"process": "writer", "type": "WriterClosesLedger", "params": {}, "x-obs": 12}
    assert [line["x-obs"] for line in order_by_service([early, refused, closes, synced])] == [10, 11, 12, 13]
    # Fencing replies on their way together come in any order: the one the refusal needs goes first.
    fence_other = _line("recoverer-1", "fence", 2, obs=20, sent=15)
    fence_its = _line("recoverer-1", "fence", 1, obs=21, sent=14)
    refused = _line("writer", "add", 1, obs=19, sent=16, observed={"writer_status": "FENCED"})
    ack_other = _line("writer", "add", 2, obs=22, sent=13)  # on its way when bookie 2's fencing reply came
    ordered = order_by_service([refused, fence_other, fence_its, ack_other])
    assert [line["x-obs"] for line in ordered] == [21, 19, 22, 20]


def test_a_refusal_that_overtook_acks_and_fencing_replies_in_another_order_maps(tmp_path: Path) -> None:
    name = "recovery-races-writer-journal-latency"
    (ledger,) = recheck(tmp_path, name).ledgers
    assert FINDINGS["fenced-writer-closes-ledger"].explains(ledger.verdict.reason)
    # A refusal that takes the writer's later acks along past a fencing reply needs both rules that reorder
    # the writer's and the recovering client's replies; one that leaves its bookies' acks before it, neither.
    along = {
        "_move_refusal_after": lambda order, i, later: bookkeeper._move_after(
            order, i, later, bookkeeper._lines_of("writer")
        )
    }
    switched_off: dict[str, Any] = {
        "_refusals_after_earlier_acks": lambda order: order,
        "_first_of_its_fencing_replies": lambda order, k: (order, k),
    }
    for rule, unchanged in switched_off.items():
        with pytest.MonkeyPatch.context() as patch:
            for name_, replacement in {**along, rule: unchanged}.items():
                patch.setattr(bookkeeper, name_, replacement)
            with pytest.raises(RecordingError, match="the replies give no order in which each bookie could have"):
                recheck(tmp_path / rule, name)
    with pytest.MonkeyPatch.context() as patch:
        for rule, unchanged in switched_off.items():
            patch.setattr(bookkeeper, rule, unchanged)
        (ledger,) = recheck(tmp_path / "neither", name).ledgers
    assert FINDINGS["fenced-writer-closes-ledger"].explains(ledger.verdict.reason)


def test_a_refusal_goes_after_the_acks_the_handle_completed_adds_with_before_its_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's handle took acks in and moved its LAC from 17 to 37 after a refusal, until its close ran."""
    name = "recovery-races-writer-acks-after-refusal"
    (ledger,) = recheck(tmp_path / "a", name).ledgers
    assert FINDINGS["fenced-writer-closes-ledger"].explains(ledger.verdict.reason), ledger.verdict.reason
    monkeypatch.setattr(bookkeeper, "_refusal_where_the_handle_took_it_in", lambda order: order)
    (ledger,) = recheck(tmp_path / "b", name).ledgers
    assert "observed writer_lac = 19, the spec has 17" in ledger.verdict.reason, ledger.verdict.reason


def test_an_ack_that_came_after_its_add_failed_observes_no_lac_of_the_handle(tmp_path: Path) -> None:
    """Entry 39 had one ack when another bookie refused entry 40 as fenced and the handle failed every pending
    add; the second ack of 39 came after, from a bookie that had served it before its fence, and completed
    nothing: the handle's LAC stayed 38 where the spec's writer, taking the ack in as it is served, has 39."""
    name = "recovery-races-writer-late-ack"
    (ledger,) = recheck(tmp_path / "a", name).ledgers
    assert FINDINGS["fenced-writer-closes-ledger"].explains(ledger.verdict.reason), ledger.verdict.reason
    late = [
        line
        for line in map(orjson.loads, (tmp_path / "a" / name / "trace.ndjson").read_bytes().splitlines())
        if line.get("x-late") and line["params"]["m"]["entry"] == 39
    ]
    assert len(late) == 1 and "writer_lac" not in late[0].get("observed", {})

    def failure_unseen(obs: dict[str, Any]) -> dict[str, Any] | None:  # as if the application was not told
        return None if obs["ev"] == "complete" and obs["rc"] != 0 else obs

    (ledger,) = recheck(tmp_path / "b", name, failure_unseen).ledgers
    assert "observed writer_lac = 38, the spec has 39" in ledger.verdict.reason, ledger.verdict.reason


def _simulated_race(seed: int) -> list[dict[str, Any]]:
    shape = random.Random(seed)
    return raced_lines(seed, entries=shape.choice([10, 40]), qw=shape.choice([2, 3]), fenced_by=shape.choice([2, 3]))


def test_every_simulated_race_has_an_order_in_which_each_bookie_served_the_writer_and_its_fences() -> None:
    """Races whose order of service is known: each bookie acks before its first fencing step, refuses after."""
    for seed in range(2000):
        lines = _simulated_race(seed)
        ordered = order_by_service([dict(line) for line in lines])
        assert sorted(line["x-obs"] for line in ordered) == [line["x-obs"] for line in lines]
        fenced: set[int] = set()
        for line in ordered:
            m = line.get("params", {}).get("m")
            if m is None:
                continue
            if m["fence"]:
                fenced.add(m["bookie"])
            elif line.get("observed", {}).get("writer_status") == "FENCED":
                assert m["bookie"] in fenced, seed
            elif m["client"] == 0:
                assert m["bookie"] not in fenced, seed
        for process in ("writer", "recoverer-1"):
            steps = [
                line["x-obs"] for line in ordered if line["process"] == process and "m" not in line.get("params", {})
            ]
            assert steps == sorted(steps), (seed, process)


def test_a_refusal_that_takes_the_acks_after_it_along_leaves_some_races_without_an_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ack of a bookie whose journal synced late reaches the writer after another bookie's refusal."""
    lines = _simulated_race(377)
    order_by_service([dict(line) for line in lines])
    monkeypatch.setattr(
        bookkeeper,
        "_move_refusal_after",
        lambda order, i, later: bookkeeper._move_after(order, i, later, bookkeeper._lines_of("writer")),
    )
    with pytest.raises(MappingError, match="the replies give no order in which each bookie could have"):
        order_by_service([dict(line) for line in lines])


def test_every_finding_is_shown_by_a_scenario_and_every_expectation_names_a_finding() -> None:
    scenarios = [*SCENARIOS.values(), *ML_SCENARIOS.values()]
    expected = {s.expects for s in scenarios if s.expects is not None}
    shown_by_a_race = {name for s in scenarios for name in s.may_show}
    assert expected | shown_by_a_race == set(FINDINGS) and shown_by_a_race <= set(FINDINGS)
    assert len(SCENARIOS) >= 20
    for finding in FINDINGS.values():
        assert finding.kind in ("bug", "difference") and finding.sources and finding.oracle_says


def test_missing_maven_or_java_is_named_with_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaSetupError, match=r"Maven \(mvn\) is not on the PATH.*apt-get install maven"):
        ensure_jars(cache=tmp_path / "cache")
    (tmp_path / "mvn").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "mvn").chmod(0o755)
    with pytest.raises(JavaSetupError, match=r"java was not found \(JAVA_HOME=unset.*openjdk-17-jre-headless"):
        ensure_jars(cache=tmp_path / "cache")


def test_record_lists_scenarios_and_refuses_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "bookkeeper", "--list"]) == 0
    out = capsys.readouterr().out
    assert "fence-empty-ledger-then-restart" in out and "fence-of-empty-ledger-lost" in out
    assert main(["record", "bookkeeper", "--scenario", "nope"]) == 2
    assert "unknown scenario 'nope'" in capsys.readouterr().err
    assert main(["record", "cassandra"]) == 2
    assert "unknown system 'cassandra'" in capsys.readouterr().err


def test_a_scenario_that_commands_faults_runs_on_reference_bookies_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BookKeeper's bookies take no fault on command: the scenario is refused there, before any JVM starts, and
    left out of a whole suite on them."""
    name = "replace-after-late-refusal"
    assert not SCENARIOS[name].runs_on("bookkeeper") and SCENARIOS[name].runs_on("reference")
    assert main(["record", "bookkeeper", "--scenario", name, "--out", str(tmp_path)]) == 2
    assert f"{name} command faults that only reference bookies take: add --bookies reference" in capsys.readouterr().err
    with pytest.raises(ValueError, match=f"{name} command faults that only reference bookies take"):
        real_systems.record_bookkeeper([name], tmp_path)
    assert main(["record", "bookkeeper", "--list", "--json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)["scenarios"]}
    assert listed[name]["storages"] == ["reference"] and listed["two-ensemble-changes"]["storages"] == ["default", "db"]


def test_record_lists_as_json_the_scenarios_and_the_findings_they_can_show(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["record", "bookkeeper", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["system"] == "bookkeeper"
    assert [s["name"] for s in listed["scenarios"]] == list(SCENARIOS)
    fence = next(s for s in listed["scenarios"] if s["name"] == "fence-empty-ledger-then-restart")
    assert fence == {
        "name": "fence-empty-ledger-then-restart",
        "summary": SCENARIOS["fence-empty-ledger-then-restart"].summary,
        "expects": "fence-of-empty-ledger-lost",
        "may_show": [],
        "storages": ["default"],
    }
    shown = [f for f in FINDINGS.values() if f.part != "managed-ledger"]
    assert [{k: f[k] for k in ("name", "kind", "title")} for f in listed["findings"]] == [
        {"name": f.name, "kind": f.kind, "title": f.title} for f in shown
    ]


def test_the_list_says_which_storages_each_scenario_runs_on_and_each_finding_shows_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["record", "bookkeeper", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    runs_on = {s["name"]: s["storages"] for s in listed["scenarios"]}
    # A scenario about no storage in particular runs on each one the suite runs on; the others on theirs.
    assert runs_on["recover-open"] == runs_on["recovery-races-writer"] == ["default", "db"]
    assert runs_on["write-cache-pressure-then-crash"] == ["db-small-write-cache"]
    assert runs_on["memtable-pressure-then-crash"] == ["default-small-memtable"]
    assert runs_on["fence-empty-ledger-checkpoint-then-restart"] == ["entry-log-per-ledger"]
    assert {f["name"]: f["storages"] for f in listed["findings"]} == {
        "fence-of-empty-ledger-lost": ["default", "db-hourly-checkpoints"],  # the replay's, on either storage
        "fence-lost-by-db-ledger-storage": ["db"],
        "fenced-writer-closes-ledger": ["default", "db"],  # the client's: whatever the bookies' storage
    }
    assert main(["record", "bookkeeper", "--list"]) == 0
    printed = capsys.readouterr().out
    assert "shows on" in printed and "default, db" in printed
    assert main(["record", "managed-ledger", "--list", "--json"]) == 0
    assert all("storages" not in s for s in json.loads(capsys.readouterr().out)["scenarios"])


@pytest.mark.parametrize(
    "argv",
    [
        ["managed-ledger", "--storage", "db"],
        ["reference-client", "--storage", "db"],
        ["bookkeeper", "--bookies", "reference", "--storage", "db"],
        ["bookkeeper", "--storage", "db", "--recheck", str(RECORDINGS)],
    ],
    ids=["managed-ledger", "reference-client", "reference-bookies", "recheck"],
)
def test_the_suite_storage_is_refused_where_it_means_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["record", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--storage is an option of bookkeeper on BookKeeper's bookies only" in err or "names the storage" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="the suite runs on default, db"):
        real_systems.record_bookkeeper(["recover-open"], tmp_path / "out", storage="entry-log-per-ledger")


def test_the_managed_ledger_list_names_only_its_own_findings(capsys: pytest.CaptureFixture[str]) -> None:
    from ledgerspec.conformance.adapters.findings import shown_by

    own = ["reset-record-keeps-acks"]
    assert main(["record", "managed-ledger", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["system"] == "managed-ledger"
    assert [f["name"] for f in listed["findings"]] == own
    assert [s["name"] for s in listed["scenarios"]] == list(ML_SCENARIOS)
    assert main(["record", "managed-ledger", "--list"]) == 0
    out = capsys.readouterr().out
    assert "crash-twice" in out and all(name in out for name in own)
    assert not any(name in out for name in FINDINGS if name not in own)
    assert shown_by(ML_SCENARIOS.values()) == [FINDINGS[name] for name in own]
    assert shown_by([SCENARIOS["recovery-races-writer"]]) == [FINDINGS["fenced-writer-closes-ledger"]]


def test_stored_recordings_are_checked_again_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(RECORDINGS, tmp_path / "all")
    before = {p: p.read_bytes() for p in (tmp_path / "all").rglob("*") if p.is_file()}
    out = tmp_path / "out"
    assert main(["record", "bookkeeper", "--out", str(out), "--recheck", str(tmp_path / "all"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    statuses = sorted((s["scenario"], s["status"]) for s in report["scenarios"])
    assert statuses == sorted(scenario_and_status(p.name) for p in RECORDINGS.iterdir())
    # The recordings read are left as they were; what the check wrote is under --out, with a manifest that
    # lets ``check`` judge the traces again under the constants each was recorded under.
    assert {p: p.read_bytes() for p in (tmp_path / "all").rglob("*") if p.is_file()} == before
    assert (out / "recover-open" / "verdict.json").exists() and (out / "recover-open" / "run.json").exists()
    violating = sorted(
        t["trace"] for s in report["scenarios"] for t in s["traces"] if t["verdict"]["status"] != "conforms"
    )
    assert main(["check", str(out), "--json"]) == (1 if violating else 0)
    checked = json.loads(capsys.readouterr().out)
    assert sorted(v["trace"] for v in checked["violations"]) == violating and checked["traces"] == len(
        list(out.iterdir())
    )
    assert {Path(n["file"]).name for n in checked["not_read"]} == {"observations.ndjson"}
    # A trace's own constants given again agree with its manifest; the spec's defaults it does not name are no
    # part of what it was recorded under.
    [trace] = next(s["traces"] for s in report["scenarios"] if s["scenario"] == "recover-open")
    again = [arg for name, value in trace["constants"].items() for arg in ("--const", f"{name}={value}")]
    assert main(["check", str(out / "recover-open" / "trace.ndjson"), *again]) == 0
    for inside in (tmp_path / "all", tmp_path / "all" / "recover-open" / "again"):
        assert main(["record", "bookkeeper", "--out", str(inside), "--recheck", str(tmp_path / "all")]) == 2
        assert "the recordings are not written; give --out another directory" in capsys.readouterr().err
    assert not (tmp_path / "all" / "recover-open" / "again").exists()
    shown = {s["scenario"]: s["evidence"] for s in report["scenarios"]}
    assert shown["recover-open"] == [] and any(
        "Skip replaying entries of ledger" in line for line in shown["fence-empty-ledger-then-restart"]
    )
    assert _recheck(tmp_path, "bookkeeper", str(tmp_path / "all" / "fence-empty-ledger-then-restart")) == 0
    printed = capsys.readouterr().out
    assert "fence-empty-ledger-then-restart: before the kill, bookie" in printed and "lastMark (0, 0)" in printed
    # One recording alone, by its directory; the managed-ledger checker refuses it.
    assert _recheck(tmp_path, "bookkeeper", str(tmp_path / "all" / "recover-open")) == 0
    assert "1 conforms of 1 scenarios" in capsys.readouterr().out
    assert _recheck(tmp_path, "bookkeeper", str(tmp_path / "all"), "--scenario", "empty-ledger") == 2
    assert "no recording of empty-ledger" in capsys.readouterr().err
    assert _recheck(tmp_path, "managed-ledger", str(tmp_path / "all" / "recover-open")) == 2
    assert "a recording of bookkeeper, not of managed-ledger" in capsys.readouterr().err


def test_a_recording_says_which_ledger_storage_its_bookies_kept(tmp_path: Path) -> None:
    """run.json names it; one recorded before it did ran on the storage its scenario needs, else the default."""
    assert recheck(tmp_path / "a", "recover-open").storage == "default"
    assert recheck(tmp_path / "b", "fence-empty-ledger-db-storage-then-restart").storage == "db"
    assert recheck(tmp_path / "c", "write-cache-pressure-then-crash").storage == "db-small-write-cache"
    on_db = recheck(tmp_path / "d", "explicit-lac-reader-on-db")  # recorded with --storage db
    assert (on_db.name, on_db.storage, on_db.status) == ("explicit-lac-reader", "db", "conforms")
    assert json.loads((on_db.directory / "verdict.json").read_text())["storage"] == "db"


def test_a_damaged_recording_is_refused_with_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = edited_copy(RECORDINGS / "recover-open", tmp_path)
    lines = (copy / "observations.ndjson").read_bytes().splitlines()
    (copy / "observations.ndjson").write_bytes(b"\n".join([*lines[:2], lines[2][:30], *lines[3:]]) + b"\n")
    assert _recheck(tmp_path, "bookkeeper", str(copy)) == 2
    assert "recover-open/observations.ndjson:3: not JSON" in capsys.readouterr().err
    (copy / "observations.ndjson").write_bytes(
        b"\n".join([*lines[:2], b'{"ev": "gossip", "obs": 99, "ledger": 11}', *lines[3:]])
    )
    assert _recheck(tmp_path, "bookkeeper", str(copy)) == 2
    assert "observations.ndjson: ledger 11: observation 99: unknown kind 'gossip'" in capsys.readouterr().err
    (copy / "run.json").write_text("{}")
    assert _recheck(tmp_path, "bookkeeper", str(copy)) == 2
    assert "run.json: lacks 'scenario', 'ledgers'" in capsys.readouterr().err
    (copy / "run.json").write_text("[11]")
    assert _recheck(tmp_path, "bookkeeper", str(copy)) == 2
    assert "run.json: not an object: [11]" in capsys.readouterr().err
    assert _recheck(tmp_path, "bookkeeper", str(tmp_path / "nowhere")) == 2
    assert "nowhere: no such directory" in capsys.readouterr().err


def test_a_writer_that_closes_with_adds_pending_conforms(tmp_path: Path) -> None:
    """LedgerHandle.doAsyncCloseInternal closes at the LAC and fails the adds in flight; their late acks change
    nothing. In ``recover-open`` the writer has entries 3 to 6 in flight at LAC 2 (observation 1363): here it
    closes there instead of the recovering client, whose observations are dropped."""
    created = orjson.loads((RECORDINGS / "recover-open" / "observations.ndjson").read_bytes().splitlines()[0])

    def close_at_lac_2(obs: dict[str, Any]) -> dict[str, Any] | None:
        if obs.get("client") != 0:
            return None
        if obs["obs"] == 1364:
            written = {**created["written"], "state": "CLOSED", "last_entry": 2, "version": 1}
            return {"obs": 1364, "ev": "metadata", "client": 0, "op": "write", "ledger": 11, "ok": True,
                    "written": written}  # fmt: skip
        if obs["obs"] > 1364 and obs["ev"] in ("after", "complete"):
            return None  # the handle is closed: the late acks complete nothing
        return obs

    recording = recheck(tmp_path, "recover-open", close_at_lac_2)
    (ledger,) = recording.ledgers
    assert recording.status == "conforms", ledger.verdict.reason
    lines = [orjson.loads(line) for line in (tmp_path / "recover-open" / "trace.ndjson").read_bytes().splitlines()]
    closed = [i for i, line in enumerate(lines) if line["type"] == "WriterClosesLedger"]
    assert closed and any(line["type"] == "BookieReceivesAdd" for line in lines[closed[0] + 1 :])


def test_the_ports_of_a_cluster_are_distinct() -> None:
    """The cluster's ZooKeeper and bookies get their ports together: ports released one at a time may be handed
    out twice (among 500 such, a pair repeats in nearly every try), and a bookie given its neighbour's port does not
    start."""
    ports = free_ports(500)
    assert len(set(ports)) == 500 and all(0 < p < 65536 for p in ports)
