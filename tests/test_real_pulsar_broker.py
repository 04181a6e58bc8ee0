"""A released Pulsar broker and its Java client on the real BookKeeper cluster: deduplication across a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledgerspec.conformance.adapters.broker_scenarios import BROKER_SCENARIOS
from ledgerspec.tools.recording.real_systems import ScenarioRecording, record_pulsar_broker

pytestmark = pytest.mark.real_bookkeeper


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioRecording]:
    recordings = record_pulsar_broker(list(BROKER_SCENARIOS), tmp_path_factory.mktemp("broker"))
    return {r.name: r for r in recordings}


def test_every_broker_scenario_conforms_with_dedup_as_the_broker_ran(recorded: dict[str, ScenarioRecording]) -> None:
    assert list(recorded) == ["dedup-across-restart", "no-dedup-across-restart"]
    for recording in recorded.values():
        assert recording.status == "conforms", (recording.failure, [r.verdict.reason for r in recording.ledgers])
        (trace,) = recording.ledgers
        assert trace.constants["Dedup"] is BROKER_SCENARIOS[recording.name].deduplication


def test_the_messages_written_before_the_crash_are_sent_again_and_deduplicated_only_with_dedup_on(
    recorded: dict[str, ScenarioRecording],
) -> None:
    """The case the scenarios are for: the messages 3 and 4 were written, their answers lost in the crash; the
    client sent them again to the next broker."""
    runs = {name: json.loads((r.directory / "run.json").read_text()) for name, r in recorded.items()}
    deduplicated = runs["dedup-across-restart"]
    assert deduplicated["answered"]["3"] == deduplicated["answered"]["4"] == [-1, -1]
    assert [m[3] for m in deduplicated["read"]] == [0, 1, 2, 3, 4, 5]
    assert [m[3] for m in runs["no-dedup-across-restart"]["read"]] == [0, 1, 2, 3, 4, 3, 4, 5]


def test_the_broker_writes_its_recording_where_recheck_reads_it(recorded: dict[str, ScenarioRecording]) -> None:
    for recording in recorded.values():
        directory: Path = recording.directory
        assert {p.name for p in directory.iterdir()} >= {
            "run.json",
            "observations.ndjson",
            "trace.ndjson",
            "manifest.json",
            "verdict.json",
        }
