"""The Pulsar broker adapter without Java: recordings of a released broker and its Java client checked again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.adapters.broker_topic import BrokerMappingError, BrokerTopicTraceMapper
from ledgerspec.conformance.checker import check_trace
from ledgerspec.conformance.events import events_from_json
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording.real_systems import BOUNDS, RecordingError, ScenarioRecording, check_broker_recording
from recording_support import Edit, edited_copy

RECORDINGS = Path(__file__).parent / "data" / "pulsar-broker-4.0.7"


def recheck(tmp_path: Path, name: str, edit: Edit | None = None) -> ScenarioRecording:
    return check_broker_recording(edited_copy(RECORDINGS / name, tmp_path, edit))


def observations(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (RECORDINGS / name / "observations.ndjson").read_bytes().splitlines()]


@pytest.mark.parametrize("name", sorted(p.name for p in RECORDINGS.iterdir()))
def test_each_recording_conforms_with_dedup_as_the_broker_ran(tmp_path: Path, name: str) -> None:
    recording = recheck(tmp_path, name)
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    (trace,) = recording.ledgers
    run = json.loads((RECORDINGS / name / "run.json").read_text())
    assert trace.spec == "managed_ledger" and trace.constants["Dedup"] is run["deduplication"]
    types = [orjson.loads(line)["type"] for line in (tmp_path / name / "trace.ndjson").read_bytes().splitlines()]
    # the crash, the next broker's open, and the client sending again what it had no answer to
    assert types[types.index("BrokerCrashes") :][:3] == ["BrokerCrashes", "ManagedLedgerOpens", "ProducerResends"]


def test_the_next_broker_answers_the_messages_sent_again_as_duplicates_only_with_dedup_on() -> None:
    """What makes the two recordings the case they are: 3 and 4 were written before the crash, unanswered."""
    answers = {
        name: {o["seq"]: tuple(o["id"]) for o in observations(name) if o["ev"] == "receipt"}
        for name in ("dedup-across-restart", "no-dedup-across-restart")
    }
    assert answers["dedup-across-restart"][3] == answers["dedup-across-restart"][4] == (-1, -1)
    reads = [o["seq"] for o in observations("no-dedup-across-restart") if o["ev"] == "read"]
    assert reads == [0, 1, 2, 3, 4, 3, 4, 5]


def test_a_broker_that_writes_a_message_sent_again_twice_with_dedup_on_breaks_dedup() -> None:
    """The broker without dedup, judged as if dedup were on: what a broker that lost its dedup state across the
    restart does. The oracle names the promise."""
    mapper = BrokerTopicTraceMapper("t", "subscription", 1000, dedup=True)
    mapper.feed_all(observations("no-dedup-across-restart"))
    verdict = check_trace(
        events_from_json(mapper.lines, "t"), ManagedLedgerSpec(**mapper.constants()), "client", BOUNDS
    )
    assert verdict.status == "violates" and verdict.promise_names == ("DedupPersistsNoDuplicate",)
    assert verdict.finding == "bug" and "batch 3 is read at 1:3 and again at 2:0" in verdict.reason


def test_an_answer_as_a_duplicate_from_a_broker_without_dedup_is_an_error() -> None:
    mapper = BrokerTopicTraceMapper("t", "subscription", 1000, dedup=False)
    with pytest.raises(BrokerMappingError, match=r"observation 11: 3 answered as a duplicate \(-1:-1\)"):
        mapper.feed_all(observations("dedup-across-restart"))


def test_an_acknowledged_message_the_reader_does_not_find_is_named_lost(tmp_path: Path) -> None:
    def lose_message_1(obs: dict[str, Any]) -> dict[str, Any] | None:
        return None if obs["ev"] == "read" and obs["seq"] == 1 else obs

    with pytest.raises(RecordingError, match=r"observation 10: .*acknowledged messages \[1\] lost"):
        recheck(tmp_path, "dedup-across-restart", lose_message_1)


def test_an_answer_that_disagrees_with_what_the_reader_found_is_an_error(tmp_path: Path) -> None:
    def misplace(obs: dict[str, Any]) -> dict[str, Any]:
        return {**obs, "id": [0, 2]} if obs["ev"] == "read" and obs["seq"] == 1 else obs

    with pytest.raises(RecordingError, match=r"observation 6: 2 answered at 0:2, where the reader found 1$"):
        recheck(tmp_path, "dedup-across-restart", misplace)


def test_a_malformed_observation_is_named(tmp_path: Path) -> None:
    def drop_seq(obs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obs.items() if k != "seq"} if obs["n"] == 7 else obs

    with pytest.raises(RecordingError, match=r"observation 7: a sent observation with a field missing"):
        recheck(tmp_path, "dedup-across-restart", drop_seq)


def test_the_command_line_checks_the_stored_recordings_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["record", "pulsar-broker", "--recheck", str(RECORDINGS), "--out", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and [s["status"] for s in report["scenarios"]] == ["conforms", "conforms"]
    assert (tmp_path / "dedup-across-restart" / "manifest.json").is_file()
    assert main(["check", str(tmp_path / "dedup-across-restart")]) == 0
