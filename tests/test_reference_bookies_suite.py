"""``ledgerspec record bookkeeper --bookies reference``: the whole ledger scenario suite, with the released Java
client, on reference bookies served over TCP in place of BookKeeper's (``tools/recording/reference_bookies.py``).

Every scenario must conform: the reference bookie journals a ledger-key record with the fence, so the findings of
BookKeeper's bookie (a fence lost at restart) are not expected there, and do not show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ledgerspec.conformance.adapters.findings import FINDINGS
from ledgerspec.conformance.adapters.scenarios import SCENARIOS
from ledgerspec.tools.recording.real_systems import ScenarioRecording, check_recording, record_bookkeeper

FENCE_SCENARIOS = [name for name, s in SCENARIOS.items() if s.expects and FINDINGS[s.expects].part == "bookie"]


def test_the_suite_expects_findings_of_bookkeepers_bookie_that_reference_bookies_cannot_show() -> None:
    # the default storage, DbLedgerStorage before its first checkpoint, and DbLedgerStorage after one (with a
    # checkpoint before the crash, BookKeeper's default storage keeps the fence)
    assert FENCE_SCENARIOS == [
        "fence-empty-ledger-then-restart",
        "fence-empty-ledger-db-storage-before-checkpoint-then-restart",
        "fence-empty-ledger-db-storage-then-restart",
    ]
    assert {FINDINGS[name].part for name in FINDINGS} == {"bookie", "client", "managed-ledger"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ScenarioRecording]]:
    out = tmp_path_factory.mktemp("reference-bookies")
    return out, record_bookkeeper(list(SCENARIOS), out, bookies="reference")


def _why(recordings: list[ScenarioRecording]) -> str:
    """What each recording that does not conform says of itself: its verdicts and its traces, line by line (the
    recording's directory is gone once the run ends)."""
    told = []
    for r in recordings:
        if r.status == "conforms":
            continue
        told.append(f"{r.name}: {r.status}; failure {r.failure}; unmapped {r.unmapped}")
        for ledger in r.ledgers:
            v = ledger.verdict
            told.append(f"  {ledger.trace_id}: {v.status}, bound {v.bound}, {v.reason}; input {v.input_errors}")
        told.extend(f"  | {line}" for trace in sorted(r.directory.glob("*.ndjson")) for line in trace.open())
    return "\n".join(told)


@pytest.mark.real_bookkeeper
def test_every_scenario_conforms_on_reference_bookies(recorded: tuple[Path, list[ScenarioRecording]]) -> None:
    out, recordings = recorded
    assert {r.name: r.status for r in recordings} == dict.fromkeys(SCENARIOS, "conforms"), _why(recordings)
    assert all(r.expects is None for r in recordings if r.name in FENCE_SCENARIOS)
    run: dict[str, Any] = json.loads((out / FENCE_SCENARIOS[0] / "run.json").read_text())
    assert run["bookies"] == "reference" and run["bookies_crashed"] == 3
    # Checked again from what was stored, the expectations come from run.json: still no finding expected.
    assert check_recording(out / FENCE_SCENARIOS[0]).status == "conforms"


@pytest.mark.real_bookkeeper
def test_the_reference_bookie_keeps_the_fence_where_bookkeepers_loses_it(
    recorded: tuple[Path, list[ScenarioRecording]],
) -> None:
    """The evidence the recorder keeps says why: a ledger-key record beside the fence record in the journal, and
    after the restart the index fenced (BookKeeper's bookie journals no ledger-key record for a fence)."""
    _, recordings = recorded
    evidence = {r.name: r.evidence for r in recordings}["fence-empty-ledger-then-restart"]
    before = [line for line in evidence if line.startswith("before the kill")]
    after = [line for line in evidence if line.startswith("after the restart")]
    assert len(before) == len(after) == 3
    assert all("ledger-key record at" in line for line in before)
    assert all(line.endswith("index fenced") for line in after)


@pytest.mark.real_bookkeeper
def test_every_acknowledged_entry_is_kept_on_qa_bookies_of_its_write_set(
    recorded: tuple[Path, list[ScenarioRecording]],
) -> None:
    out, _ = recorded
    acknowledged = json.loads((out / "bookies-reference" / "acknowledged.json").read_text())
    assert sum(v["acknowledged"] for v in acknowledged.values()) > 200
    assert all(v["on_fewer_than_qa_bookies"] == [] for v in acknowledged.values())
