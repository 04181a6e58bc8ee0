"""The BookKeeper adapter without Java: recordings of the real system mapped and checked again, rule by rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.adapters import bookkeeper
from ledgerspec.conformance.adapters.bookkeeper import LedgerTraceMapper, MappingError, order_by_service
from ledgerspec.conformance.adapters.findings import FINDINGS
from ledgerspec.conformance.adapters.jars import JavaSetupError, ensure_jars
from ledgerspec.conformance.adapters.scenarios import SCENARIOS
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording.real_systems import RecordingError, ScenarioRecording, check_recording
from recording_support import Edit, edited_copy

RECORDINGS = Path(__file__).parent / "data" / "bookkeeper-4.17.2"


def recheck(tmp_path: Path, name: str, edit: Edit | None = None) -> ScenarioRecording:
    """Check a stored recording again in a copy; ``edit`` may change or drop (None) each observation."""
    return check_recording(edited_copy(RECORDINGS / name, tmp_path, edit))


#: Recordings in which a race brought about a finding the scenario may show (``Scenario.may_show``).
RACED_INTO_A_FINDING = {"recovery-races-writer-journal-latency": "fenced-writer-closes-ledger"}


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
    assert written and all(line["process"] in ("writer", "recoverer-1", "recoverer-2") for line in written)
    assert [line["seq"] for line in written] == sorted(line["seq"] for line in written)
    verdict = json.loads((tmp_path / name / "verdict.json").read_text())
    assert verdict["status"] == expected and verdict["traces"][0]["constants"]["NumBookies"] == 5


def test_the_lost_fence_is_a_violation_of_the_acked_entry_promise(tmp_path: Path) -> None:
    recording = recheck(tmp_path, "fence-empty-ledger-then-restart")
    (ledger,) = recording.ledgers
    assert ledger.verdict.status == "violates" and FINDINGS["fence-of-empty-ledger-lost"].explains(
        ledger.verdict.reason
    )
    assert "acknowledged entry 0 is not in the closed ledger" in (recording.failure or "")


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
    assert "WriterAddsEntry is not enabled: the writer's handle is FENCED" in ledger.verdict.reason


def test_a_refusal_of_an_add_that_had_completed_does_not_fence_the_writer(tmp_path: Path) -> None:
    def forget_completions(obs: dict[str, Any]) -> dict[str, Any] | None:
        return None if obs["ev"] == "complete" else obs

    (ledger,) = recheck(tmp_path, "fenced-writer", forget_completions).ledgers
    assert ledger.verdict.status == "violates"
    assert "WriterAddsEntry is not enabled: the writer's handle is FENCED" in ledger.verdict.reason


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
    assert "ReadReq(c1 b2 e25 fence), replied=TRUE) is not enabled" in ledger.verdict.reason


def test_an_add_sent_twice_to_one_bookie_is_served_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an ensemble change the writer resends its pending adds, some of them to a bookie that had them."""
    monkeypatch.setattr(
        LedgerTraceMapper, "_acks_since_change", property(lambda _: set(), lambda _, v: None), raising=False
    )
    (ledger,) = recheck(tmp_path, "crash-restart").ledgers
    assert ledger.verdict.status == "violates"
    assert "no instance of BookieReceivesAdd matches" in ledger.verdict.reason


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
    switched_off: dict[str, Any] = {
        "_refusals_after_earlier_acks": lambda order: order,
        "_first_of_its_fencing_replies": lambda order, k: (order, k),
    }
    for rule, unchanged in switched_off.items():
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bookkeeper, rule, unchanged)
            with pytest.raises(RecordingError, match="the replies give no order in which each bookie could have"):
                recheck(tmp_path / rule, name)


def test_every_finding_is_shown_by_a_scenario_and_every_expectation_names_a_finding() -> None:
    expected = {s.expects for s in SCENARIOS.values() if s.expects is not None}
    shown_by_a_race = {name for s in SCENARIOS.values() for name in s.may_show}
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


def test_stored_recordings_are_checked_again_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(RECORDINGS, tmp_path / "all")
    assert main(["record", "bookkeeper", "--recheck", str(tmp_path / "all"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    statuses = sorted((s["scenario"], s["status"]) for s in report["scenarios"])
    assert statuses == sorted(scenario_and_status(p.name) for p in RECORDINGS.iterdir())
    assert (tmp_path / "all" / "recover-open" / "verdict.json").exists()
    # One recording alone, by its directory; the managed-ledger checker refuses it.
    assert main(["record", "bookkeeper", "--recheck", str(tmp_path / "all" / "recover-open")]) == 0
    assert "1 conforms of 1 scenarios" in capsys.readouterr().out
    assert main(["record", "bookkeeper", "--recheck", str(tmp_path / "all"), "--scenario", "empty-ledger"]) == 2
    assert "no recording of empty-ledger" in capsys.readouterr().err
    assert main(["record", "managed-ledger", "--recheck", str(tmp_path / "all" / "recover-open")]) == 2
    assert "a recording of bookkeeper, not of managed-ledger" in capsys.readouterr().err


def test_a_damaged_recording_is_refused_with_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = edited_copy(RECORDINGS / "recover-open", tmp_path)
    lines = (copy / "observations.ndjson").read_bytes().splitlines()
    (copy / "observations.ndjson").write_bytes(b"\n".join([*lines[:2], lines[2][:30], *lines[3:]]) + b"\n")
    assert main(["record", "bookkeeper", "--recheck", str(copy)]) == 2
    assert "recover-open/observations.ndjson:3: not JSON" in capsys.readouterr().err
    (copy / "observations.ndjson").write_bytes(
        b"\n".join([*lines[:2], b'{"ev": "gossip", "obs": 99, "ledger": 11}', *lines[3:]])
    )
    assert main(["record", "bookkeeper", "--recheck", str(copy)]) == 2
    assert "observations.ndjson: ledger 11: observation 99: unknown kind 'gossip'" in capsys.readouterr().err
    (copy / "run.json").write_text("{}")
    assert main(["record", "bookkeeper", "--recheck", str(copy)]) == 2
    assert "run.json: lacks 'scenario', 'ledgers'" in capsys.readouterr().err
    (copy / "run.json").write_text("[11]")
    assert main(["record", "bookkeeper", "--recheck", str(copy)]) == 2
    assert "run.json: not an object: [11]" in capsys.readouterr().err
    assert main(["record", "bookkeeper", "--recheck", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such directory" in capsys.readouterr().err
