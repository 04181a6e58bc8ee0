"""The cursor spec under the oracle: its trace mapping (spec/cursor/cursor_trace.py), and the reference managed
ledger's runs (reference/managed_ledger/simulation.py) as traces, checked from the library and the command line."""

from __future__ import annotations

import functools
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from explored_models import explored, guarded_broken_invariants, guards_never_held
from ledgerspec.conformance import BoundHit, Bounds, TraceChecker, Verdict, events_from_json
from ledgerspec.reference.managed_ledger import CursorRun, RunConfig
from ledgerspec.reference.managed_ledger.refinement import CursorRefinement, spec_for_config
from ledgerspec.reference.managed_ledger.simulation import CursorTraceRecorder, random_steps, simulate_cursor_traces
from ledgerspec.spec import catalog
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.spec.cursor.cursor_trace import CLIENT, CLIENT_OBSERVES, FULL, GUARDS, TRACE
from ledgerspec.spec.tracing import mapping_for
from ledgerspec.tools.cli.main import main


# -- the mapping --------------------------------------------------------------------------
def test_mapping_is_found_by_spec_name_and_speaks_the_specs_vocabulary() -> None:
    assert mapping_for("cursor") is TRACE
    assert list(TRACE.actions) == [a.name for a in CursorSpec.actions]
    assert "durable" not in FULL.observes and {"znode", "cursor_ledgers", "covered"} <= FULL.observes
    assert TRACE.encode_params("ConsumerAcks", (56, 9, 0)) == {"ledger": 56, "entry": 9, "index": 0}


def test_explanations_name_the_failing_guard() -> None:
    spec, states = explored("cursor", "loss", "none")
    first = states[0]
    no_message = "there is no message 0:0 (batch index 0) in the ledger list"
    assert TRACE.explain["ConsumerAcks"](spec, first, 0, 0, 0) == no_message
    assert TRACE.explain["CursorSwitchesLedger"](spec, first) == (
        "the cursor is NoLedger, not SwitchingLedger: no new cursor ledger waits to be named in the znode"
    )
    assert TRACE.explain["ManagedLedgerOpens"](spec, first) == "the broker is up: the managed ledger is open"


def test_every_guard_holds_in_each_state_that_breaks_its_invariant() -> None:
    assert guarded_broken_invariants("cursor", ["loss"], GUARDS) == {
        "CursorSkipsNoUnackedMessage",
        "OnlyUnpersistedAcksRedelivered",
        "TrimPositionBehindCursor",
        "TrimKeepsUnconsumedEntries",
    }


def test_every_guard_holds_somewhere() -> None:
    assert guards_never_held("cursor", "loss", GUARDS) == []


def test_hidden_steps_change_nothing_a_client_observes() -> None:
    for model in catalog.find("cursor").models.explored:
        spec, states = explored("cursor", model, "none")
        hidden = [a for a in spec.actions if a.name in CLIENT.hidden]
        assert {a.name for a in hidden} == set(CLIENT.hidden)
        for s in states:
            for act in hidden:
                for args in [()] if act.params is None else list(act.params(spec, s)):
                    t = act.fn(spec, s, *args)
                    if t is not None:
                        for name in CLIENT_OBSERVES:
                            assert TRACE.observe(spec, t, name) == TRACE.observe(spec, s, name), (act.name, name)


# -- traces of the reference managed ledger -------------------------------------------------
@functools.cache
def _traces(mutant: str | None = None) -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    with tempfile.TemporaryDirectory(prefix="cursor-traces-") as root:  # the bookies' files, not the traces
        runs = simulate_cursor_traces(
            RunConfig(mutant=mutant), root, seed=7, steps=100, traces=8, modes=("full", "client")
        )
        return [(run.trace_id, run.lines) for run in runs]


def test_the_correct_engine_conforms_in_full_observation() -> None:
    checker = TraceChecker(spec_for_config(RunConfig()), "full")
    actions: set[str] = set()
    for trace_id, lines in _traces():
        verdict = checker.check(events_from_json(lines["full"]))
        assert verdict.status == "conforms", (trace_id, verdict.reason)
        actions |= {line["type"] for line in lines["full"]}
    assert actions == {"Init", *TRACE.actions}  # every action is exercised


def test_client_lines_carry_what_a_consumer_knows() -> None:
    lines = [line for _, trace in _traces() for line in trace["client"]]
    assert {line["process"] for line in lines} == {"consumer"}
    assert not {line["type"] for line in lines} & set(CLIENT.hidden)
    assert {n for line in lines for n in line.get("observed", {})} <= CLIENT_OBSERVES


def test_a_short_client_trace_conforms(tmp_path: Path) -> None:
    """Client observation hides every persistence step; a short run stays within the checker's search bounds."""
    [run] = simulate_cursor_traces(RunConfig(), str(tmp_path), seed=5, steps=25, traces=1, modes=("client",))
    verdict = TraceChecker(spec_for_config(RunConfig()), "client").check(events_from_json(run.lines["client"]))
    assert verdict.status == "conforms", (run.trace_id, verdict.reason)


def test_a_long_client_trace_the_depth_first_search_and_the_beams_miss_is_decided_by_putting_off_hidden_steps(
    tmp_path: Path,
) -> None:
    """A run of 1,000 steps (172 events, 36 crashes, every persistence step hidden): the depth-first search spends
    its budget and the beams lose the behaviour; without the reduction the breadth-first search keeps 10,000
    candidates before an event and stops there, inconclusive."""
    *_, run = simulate_cursor_traces(RunConfig(), str(tmp_path), seed=3, steps=1000, traces=4, modes=("client",))
    events = events_from_json(run.lines["client"])
    spec = spec_for_config(RunConfig(), **run.bounds)
    assert len(events) == 172 and sum(e.type == "BrokerCrashes" for e in events) == 36
    verdict = TraceChecker(spec, "client").check(events)
    assert (verdict.status, verdict.search) == ("conforms", "reduced"), (run.trace_id, verdict.reason)


def test_the_reduced_search_reaches_past_max_candidates_before_a_reset_and_the_crashes_after_it(
    tmp_path: Path,
) -> None:
    """The first 34 events of another 1,000-step run: a reset pending while the consumer acknowledges, then two
    crashes. Every step of persistence is taken before the reset completes and before each crash, and the reduced
    closure there holds over 30,000 states: cut at max_candidates (10,000) the reduced search finds no candidate
    at event 32 and the trace is inconclusive; within its own reach, five times that, it conforms. (The
    depth-first search and the beams are left out: they find no behaviour here either, and take longer.)"""
    *_, run = simulate_cursor_traces(RunConfig(), str(tmp_path), seed=3, steps=1000, traces=3, modes=("client",))
    events = events_from_json(run.lines["client"])[:34]
    spec = spec_for_config(RunConfig(), **run.bounds)
    assert [e.type for e in events[21:25]] == [
        "CursorResetCompletes",
        "BrokerCrashes",
        "ManagedLedgerOpens",
        "CursorRecovers",
    ]
    bounds = Bounds(max_examined=1, beam_widths=())
    verdict = TraceChecker(spec, "client", bounds).check(events)
    assert (verdict.status, verdict.search) == ("conforms", "reduced"), (run.trace_id, verdict.reason)
    assert bounds.max_candidates < verdict.max_candidates <= bounds.reduced_closure()


def test_an_inconclusive_verdict_names_the_bound_that_dropped_candidates_over_the_hidden_steps_in_a_row(
    tmp_path: Path,
) -> None:
    """Failed writes may follow one another: max_hidden_steps=1 cuts the search before event 5, max_candidates=20
    only before event 9; the verdict names the second, the bound that a wider search shows to matter."""
    [run] = simulate_cursor_traces(RunConfig(), str(tmp_path), seed=3, steps=200, traces=1, modes=("client",))
    events = events_from_json(run.lines["client"])
    spec = spec_for_config(RunConfig(), **run.bounds)

    def verdict(max_candidates: int) -> Verdict:
        bounds = Bounds(max_hidden_steps=1, max_candidates=max_candidates, beam_widths=())
        return TraceChecker(spec, "client", bounds, depth_first=False).check(events)

    wide, narrow = verdict(100_000), verdict(20)
    assert (wide.status, wide.bound) == ("inconclusive", BoundHit("max_hidden_steps", 1, 5))
    assert (narrow.status, narrow.bound) == ("inconclusive", BoundHit("max_candidates", 20, 9))
    assert narrow.reason.startswith("search bound max_candidates=20 reached before event 9; then event 23")


@pytest.mark.parametrize(
    ("mutant", "event"),
    [
        ("restore_ignores_no_ledger", "CursorRecovers"),
        ("restore_skips_unacked", "CursorRecovers"),
        ("trim_deletes_needed_ledger", "TrimConsumedLedgers"),
        ("skip_unconsumed_ledger", "CursorSkipsConsumedLedger"),
    ],
)
def test_a_mutant_is_caught_at_its_own_step(mutant: str, event: str) -> None:
    checker = TraceChecker(spec_for_config(RunConfig()), "full")
    for _, lines in _traces(mutant):
        verdict = checker.check(events_from_json(lines["full"]))
        if verdict.status == "violates":
            assert verdict.failure is not None and verdict.failure.event_type == event, verdict.reason
            return
    pytest.fail(f"no trace of {mutant} violates the spec")


def test_the_random_runs_refine_the_spec_event_by_event(tmp_path: Path) -> None:
    run = CursorRun(str(tmp_path), RunConfig(batch_size=2))
    check = CursorRefinement(run)
    random_steps(run, random.Random(11), 150)
    assert check.events > 50 and check.state.crashes > 0


def test_a_mark_delete_jumping_over_a_trimmed_ledger_drops_the_acks_it_passes(tmp_path: Path) -> None:
    """``setAcknowledgedPosition`` ends with ``individualDeletedMessages.removeAtMost(markDelete)``: every
    individual ack at or before the new mark-delete goes, also one in a ledger that was trimmed since, which the
    jump passes without visiting. One run in eighty of ``simulate managed-ledger`` took this path; the engine
    kept such an ack, and the oracle rejected the unmutated engine's trace."""
    run = CursorRun(str(tmp_path), RunConfig(max_entries_per_ledger=2))
    recorder = CursorTraceRecorder(run, "full", "jump-over-trimmed")
    a0, a1 = run.publish(), run.publish()  # the first ledger is full: the next entry goes to a new one
    assert a0 is not None and a1 is not None
    run.ack(a0)
    run.flush()
    b0 = run.publish()
    assert b0 is not None and b0[0] > a0[0]
    run.ack(b0)
    run.flush()  # the durable state: mark-delete a0, b0 acked individually
    run.ack(a1)
    b1 = run.publish()
    assert b1 is not None
    run.ack(b1)
    run.trim()  # both consumed ledgers go, though the durable mark-delete is still a0
    run.crash()
    run.restart()
    cursor = run.cursor
    assert cursor is not None and cursor.mark_delete == a0 and cursor.acked == {b0}
    c0 = run.publish()
    assert c0 is not None
    run.ack(c0)
    assert cursor.mark_delete == c0 and cursor.acked == set()
    run.flush()  # the trace reports what changed: the persisted record shows the acks kept
    verdict = TraceChecker(spec_for_config(run.config), "full").check(events_from_json(recorder.lines))
    assert verdict.status == "conforms", verdict.reason


def test_the_same_seed_gives_the_same_traces(tmp_path: Path) -> None:
    first = list(simulate_cursor_traces(RunConfig(), str(tmp_path / "a"), seed=2, steps=60, traces=2))
    again = list(simulate_cursor_traces(RunConfig(), str(tmp_path / "b"), seed=2, steps=60, traces=2))
    assert first == again and first[0].lines != first[1].lines


MODES = ("full", "client")


def test_a_run_tells_the_faults_it_spent(tmp_path: Path) -> None:
    """A run's bounds are the failed writes and lost cursor ledgers the harness caused, as the full trace's last
    ``faults`` and ``lost`` say; its client trace conforms under them."""
    runs = list(simulate_cursor_traces(RunConfig(), str(tmp_path), seed=12, steps=120, traces=4, modes=MODES))
    for run in runs:
        last: dict[str, Any] = {}
        for line in run.lines["full"]:
            last |= line.get("observed", {})
        assert run.bounds == {"MaxFaults": last["faults"], "MaxLedgerLoss": last["lost"]}, run.trace_id
        spec = spec_for_config(RunConfig(), **run.bounds)
        verdict = TraceChecker(spec, "client").check(events_from_json(run.lines["client"]))
        assert verdict.status == "conforms", (run.trace_id, verdict.reason)
    assert any(run.bounds["MaxFaults"] for run in runs) and any(run.bounds["MaxLedgerLoss"] for run in runs)


# -- the command line -------------------------------------------------------------------
def test_simulate_then_check_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traces"
    args = ["simulate", "managed-ledger", "--out", str(out), "--traces", "2", "--steps", "60", "--json"]
    assert main(args) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["spec"] == "cursor" and len(manifest["traces"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["cursor-0-0.ndjson", "cursor-0-1.ndjson", "manifest.json"]
    check = manifest["check"].split()[1:]
    assert main([*check, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["conforms"] == 2
    assert main([*args[:-1], "--mutant", "restore_skips_unacked", "--traces", "6", "--json"]) == 0
    capsys.readouterr()
    assert main([*check, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["violations"]


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (["--const", "E=3"], "a managed-ledger run takes the constants"),
        (["--const", "BatchSize=0"], "BatchSize must be at least 1"),
        (["--mutant", "lac_before_qa"], "unknown managed-ledger mutant"),
        (["--faults", "crash"], "--faults is for ledger runs"),
    ],
)
def test_bad_options_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], words: str
) -> None:
    assert main(["simulate", "managed-ledger", "--out", str(tmp_path), *option]) == 2
    assert words in capsys.readouterr().err


def test_runs_with_batches_use_batch_indexes(tmp_path: Path) -> None:
    config = attrs.evolve(RunConfig(), batch_size=3)
    [run] = simulate_cursor_traces(config, str(tmp_path), seed=1, steps=80, traces=1)
    lines = run.lines
    indexes = {line["params"]["index"] for line in lines["full"] if line["type"] == "ConsumerAcks"}
    assert indexes == {0, 1, 2}
    verdict = TraceChecker(spec_for_config(config), "full").check(events_from_json(lines["full"]))
    assert verdict.status == "conforms", verdict.reason


@pytest.mark.tlc
@pytest.mark.parametrize("mutant", [None, "restore_skips_unacked"])
def test_tlc_gives_the_same_verdicts_on_cursor_traces(tmp_path: Path, mutant: str | None) -> None:
    """Each trace as a TLA+ module over cursor.tla (and positions.tla, which it extends), validated by TLC."""
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc

    spec = spec_for_config(RunConfig())
    verdicts = []
    for run in simulate_cursor_traces(RunConfig(mutant=mutant), str(tmp_path), seed=3, steps=60, traces=3):
        trace_id, events = run.trace_id, events_from_json(run.lines["full"])
        verdict = TraceChecker(spec, "full").check(events)
        checked = validate_with_tlc(events, spec, directory=tmp_path / f"tlc-{trace_id}")
        assert checked.outcome.conforms == (verdict.status == "conforms"), (trace_id, checked.outcome, verdict.reason)
        assert verdict.failure is None or verdict.failure.event_index == checked.outcome.event_index
        verdicts.append(verdict.status)
    assert ("violates" in verdicts) == (mutant is not None)
