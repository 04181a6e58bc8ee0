"""A stored trace of reference bookies served to the released BookKeeper 4.17.2 client, its metadata writes
recorded through the proxy in front of ZooKeeper (``tests/data/served-bookies``), checked as it was written.

``held-acks``: the scenario ``crash-before-first-add`` (E=3 Qw=3 Qa=2, bookie 1 killed before the first add).
Bookies 2 and 3 served entries 0 to 3 before the writer's change of ensemble was written, yet the new ensemble
starts at entry 0: the writer had taken in none of their acks when bookie 1's failure started the change, and took
none while it changed (``LedgerHandle.changingEnsemble``, 4.17.2).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from ledgerspec.conformance.checker import TraceChecker
from ledgerspec.conformance.events import events_from_json
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.tools.cli.main import main

HELD_ACKS = Path(__file__).parent / "data" / "served-bookies" / "held-acks"


def _trace() -> tuple[list[dict[str, object]], dict[str, object]]:
    manifest = json.loads((HELD_ACKS / "manifest.json").read_text())
    (listed,) = manifest["traces"]
    lines = [orjson.loads(line) for line in (HELD_ACKS / "served.ndjson").read_bytes().splitlines()]
    return lines, {**manifest["constants"], **listed["constants"]}


def test_the_change_starts_after_the_lac_the_writer_had_not_after_the_acks_the_bookies_sent() -> None:
    lines, _ = _trace()
    change = next(i for i, line in enumerate(lines) if line["type"] == "WriterChangesEnsemble")
    served = [line["params"]["m"]["entry"] for line in lines[:change] if line["type"] == "BookieReceivesAdd"]
    assert sorted(served) == [0, 0, 1, 1, 2, 2, 3, 3]  # every entry on bookies 2 and 3: Qa = 2 each
    assert lines[change]["observed"]["meta_segments"] == [[0, [4, 2, 3]]]  # yet the new ensemble starts at 0


def test_with_replies_in_flight_it_conforms_and_without_it_violates() -> None:
    """The writer's taking of each ack is a step of its own only with ``RepliesInFlight = 1``, as the trace's
    manifest says; with the bookie's step delivering its ack at once, no add is pending at the change."""
    lines, constants = _trace()
    events = events_from_json(lines)
    assert TraceChecker(LedgerSpec(**constants), "bookies").check(events).status == "conforms"
    at_once = TraceChecker(LedgerSpec(**{**constants, "RepliesInFlight": 0}), "bookies").check(events)
    assert at_once.status == "violates" and at_once.failure is not None
    assert "no add is pending" in at_once.failure.reason


@pytest.mark.parametrize("taken_at_once", [True, False])
def test_a_coarser_model_decides_first_and_coverage_counts_each_trace_once(taken_at_once: bool) -> None:
    """A trace the model without replies in flight takes is decided there (its behaviours are among those with
    them); one it does not take is checked with them. Either way the coverage counts the trace once."""
    lines, constants = _trace()
    if taken_at_once:
        # the same run, had the change been decided after the acks were taken: the new ensemble starts at 4
        lines = [
            line for line in lines if line["type"] != "WriterChangesEnsemble" and line["type"] != "WriterClosesLedger"
        ]
        for line in lines:
            line["observed"] = {k: v for k, v in line["observed"].items() if not k.startswith("meta_")}
    checker = TraceChecker(LedgerSpec(**constants), "bookies")
    verdict = checker.check(events_from_json(lines))
    assert verdict.status == "conforms"
    covered = checker.coverage()
    assert covered.traces == 1
    # the client's taking of a reply is a step only in the model with replies in flight
    assert (covered.hidden_steps["ClientReceivesReply"] == 0) is taken_at_once


def test_ledgerspec_check_judges_the_stored_trace_by_its_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(HELD_ACKS / "served.ndjson"), "--json", "--max-hidden-steps", "30"]) == 0
    verdicts = json.loads(capsys.readouterr().out)
    assert (verdicts["mode"], verdicts["traces"], verdicts["conforms"]) == ("bookies", 1, 1)
