"""The autorecovery spec under the oracle: its trace mapping (spec/autorecovery/autorecovery_trace.py), and the
reference engine's runs (reference/autorecovery/trace.py) as traces, checked from the library and the command line."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from explored_models import explored, explored_cases, guarded_broken_invariants, guards_never_held
from ledgerspec.conformance import TraceChecker, events_from_json
from ledgerspec.reference.autorecovery import RunConfig
from ledgerspec.reference.autorecovery.trace import simulate_autorecovery_traces
from ledgerspec.spec import catalog
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.autorecovery.autorecovery_trace import FULL, GUARDS, METADATA, METADATA_OBSERVES, TRACE
from ledgerspec.spec.tracing import mapping_for
from ledgerspec.tools.cli.main import main

CONFIG = RunConfig(workers=2)
# The default ledger left open, its writer alive: closes, grace periods and recoveries, failed opens.
OPEN_CONFIG = RunConfig(workers=2, open_ledger=True)


# -- the mapping --------------------------------------------------------------------------
def test_mapping_is_found_by_spec_name_and_speaks_the_specs_vocabulary() -> None:
    assert mapping_for("autorecovery") is TRACE
    assert list(TRACE.actions) == [a.name for a in AutorecoverySpec.actions]
    assert set(TRACE.explain) == set(TRACE.actions)
    assert {"data", "workers", "lost_seen"} <= FULL.observes and not {"data", "workers"} & METADATA.observes
    assert TRACE.encode_params("WorkerStartsFragment", (1, 1, 2, 4)) == {"w": 1, "seg": 1, "old": 2, "new": 4}


@pytest.mark.parametrize(("model", "bug"), explored_cases("autorecovery"))
def test_explanations_agree_with_the_actions_on_fragments_that_are_not_under_replicated(bug: str, model: str) -> None:
    """Beyond the spec's own instances (tests/test_explanations.py): a worker starting any fragment of segment 1,
    from any bookie to any other, which the spec never generates where it is not under-replicated."""
    spec, states = explored("autorecovery", model, bug)
    disabled = 0
    for s in states:
        for args in [(w, 1, old, new) for w in spec.worker_ids for old in spec.bookies for new in spec.bookies]:
            why = TRACE.explain["WorkerStartsFragment"](spec, s, *args)
            assert (why is None) == (spec.WorkerStartsFragment(s, *args) is not None), (args, why, s)
            disabled += why is not None
    assert disabled


def test_explanations_name_the_failing_guard() -> None:
    spec, states = explored("autorecovery", "stops", "none")
    first = states[0]
    assert TRACE.explain["WorkerTakesLock"](spec, first, 1) == "the ledger is not marked under-replicated"
    assert TRACE.explain["AuditorChecksBookies"](spec, first) == "no auditor is elected"
    assert TRACE.explain["BookieLosesDisk"](spec, first, 2) == "bookie 2 is up: only a stopped bookie loses its disk"
    assert TRACE.explain["WorkerCopiesEntry"](spec, first, 1, 0) == "worker 1 copies no fragment"
    assert TRACE.explain["BookieStops"](spec, first, 9) == "there is no bookie 9 (bookies 1 .. 4)"


def test_every_guard_holds_in_each_state_that_breaks_its_invariant() -> None:
    models = catalog.find("autorecovery").models.explored
    broken = guarded_broken_invariants("autorecovery", models, GUARDS)
    assert broken == {"NoEntryLostWhileReplicaRemains", "MetadataNamesOnlyHolders", "LostBookiesMarked"}


def test_every_guard_holds_somewhere() -> None:
    assert guards_never_held("autorecovery", "two-workers", GUARDS) == []


def test_hidden_steps_change_nothing_a_metadata_watcher_observes() -> None:
    for model in catalog.find("autorecovery").models.explored:
        spec, states = explored("autorecovery", model, "none")
        hidden = [a for a in spec.actions if a.name in METADATA.hidden]
        assert {a.name for a in hidden} == set(METADATA.hidden)
        for s in states:
            for act in hidden:
                for args in [()] if act.params is None else list(act.params(spec, s)):
                    t = act.fn(spec, s, *args)
                    if t is not None:
                        for name in METADATA_OBSERVES:
                            assert TRACE.observe(spec, t, name) == TRACE.observe(spec, s, name), (act.name, name)


# -- traces of the reference engine ---------------------------------------------------------
@functools.cache
def _traces(mutant: str | None = None, config: RunConfig = CONFIG) -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    with tempfile.TemporaryDirectory() as root:
        return list(
            simulate_autorecovery_traces(
                attrs.evolve(config, mutant=mutant), root, seed=3, steps=80, traces=12, modes=("full", "metadata")
            )
        )


@functools.cache
def _open_traces() -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    with tempfile.TemporaryDirectory() as root:
        return list(
            simulate_autorecovery_traces(OPEN_CONFIG, root, seed=5, steps=100, traces=12, modes=("full", "metadata"))
        )


def _spec(config: RunConfig = CONFIG) -> AutorecoverySpec:
    return AutorecoverySpec(**config.spec_constants())


def test_the_correct_engine_conforms_in_both_modes_and_takes_every_action() -> None:
    """Closed-ledger runs and open-ledger runs, each checked against the spec of its own configuration: between
    them, every action of the spec is taken."""
    actions: set[str] = set()
    for config, traces in ((CONFIG, _traces()), (OPEN_CONFIG, _open_traces())):
        for mode in ("full", "metadata"):
            checker = TraceChecker(_spec(config), mode)
            for trace_id, lines in traces:
                verdict = checker.check(events_from_json(lines[mode]))
                assert verdict.status == "conforms", (config.open_ledger, trace_id, mode, verdict.reason)
                actions |= {line["type"] for line in lines[mode]}
    assert actions == {"Init", *TRACE.actions}


def test_open_ledger_traces_close_the_ledger_both_ways_and_end_grace_periods_with_and_without_a_replacement() -> None:
    lines = [line for _, trace in _open_traces() for line in trace["full"]]
    types = {line["type"] for line in lines}
    assert {"WriterClosesLedger", "WorkerDefersLock", "WorkerReleasesLockAfterFailure", "BookieLosesDisk"} <= types
    grace = {line["params"]["nb"] for line in lines if line["type"] == "WorkerEndsGracePeriod"}
    assert grace == {0, 4}  # NO_ONE, and the spare bookie the recovery put in place of one that was down


def test_metadata_lines_carry_what_a_watcher_of_the_store_sees() -> None:
    lines = [line for _, trace in _traces() for line in trace["metadata"]]
    assert {line["process"] for line in lines} == {"zookeeper"}
    assert not {line["type"] for line in lines} & set(METADATA.hidden)
    assert all(set(line["observed"]) == METADATA_OBSERVES for line in lines)  # all of it, at every step


def test_the_same_seed_gives_the_same_traces() -> None:
    with tempfile.TemporaryDirectory() as root:
        again = list(
            simulate_autorecovery_traces(CONFIG, root, seed=3, steps=80, traces=12, modes=("full", "metadata"))
        )
    assert again == _traces()


@pytest.mark.parametrize(
    ("mutant", "full_event", "metadata_event"),
    [
        ("marks_nothing", "AuditorChecksBookies", "AuditorChecksBookies"),
        ("metadata_before_copy", "WorkerStartsFragment", None),
        ("failed_pass_unmarks", "WorkerReleasesLockAfterFailure", "WorkerReleasesLockAfterFailure"),
        ("copies_open_fragment", "WorkerStartsFragment", None),
    ],
)
def test_each_mutant_is_caught_in_both_modes(mutant: str, full_event: str, metadata_event: str | None) -> None:
    """Full observation stops at the step itself; a watcher of the metadata sees the worker's early write at the
    next event it logs, whatever that is (the write itself is in a step it cannot see)."""
    config = OPEN_CONFIG if mutant == "copies_open_fragment" else CONFIG
    for mode, event in (("full", full_event), ("metadata", metadata_event)):
        checker = TraceChecker(_spec(config), mode)
        verdicts = [checker.check(events_from_json(lines[mode])) for _, lines in _traces(mutant, config)]
        caught = [v for v in verdicts if v.status == "violates"]
        assert caught, (mutant, mode)
        assert all(v.status in ("violates", "conforms") for v in verdicts)
        failure = caught[0].failure
        assert failure is not None
        if event is not None:
            assert failure.event_type == event
        # what the event changes that the spec does not, or why the spec's worker cannot take it
        assert any(words in failure.reason for words in ("meta_segments", "mark", "is open", "copies no fragment")), (
            failure.reason
        )


# -- the command line -----------------------------------------------------------------------
def test_simulate_writes_traces_that_check_clean_and_a_mutants_that_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            ["simulate", "autorecovery", "--traces", "4", "--mode", "metadata", "--out", str(tmp_path / "ok"), "--json"]
        )
        == 0
    )
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["spec"] == "autorecovery" and len(manifest["traces"]) == 4
    check = manifest["check"].split()[1:]
    assert main([*check, "--json"]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad"
    assert (
        main(
            [
                "simulate",
                "autorecovery",
                "--traces",
                "4",
                "--mode",
                "metadata",
                "--mutant",
                "marks_nothing",
                "--out",
                str(bad),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main([*[str(bad) if a == str(tmp_path / "ok") else a for a in check], "--json"]) == 1
    assert "observed mark = []" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "client"], "unknown mode 'client' for autorecovery; modes: full, metadata"),
        (
            ["--mutant", "nope"],
            "unknown autorecovery mutant 'nope'; mutants: marks_nothing, metadata_before_copy, failed_pass_unmarks, "
            "copies_open_fragment",
        ),
        (["--const", "Segments=2"], "an autorecovery run takes the constants NumBookies, E, Qw"),
        (["--const", "Qw=5"], "need 1 <= Qw <= E <= NumBookies"),
        (["--const", "NumEntries=0"], "NumEntries must be at least 1"),
    ],
)
def test_bad_simulate_options_are_usage_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "autorecovery", "--out", str(tmp_path), *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())  # the console wraps long lines


def test_tables_piped_to_a_file_keep_their_columns_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not on a terminal, the console is wide enough for every column (Rich alone would cut them to 80)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["simulate", "autorecovery", "--traces", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "│ autorecovery-0-0 │" in out
    assert "│ bookies replaced │" in out.replace("┃", "│")


def test_a_worker_names_the_new_bookie_once_its_writes_were_acknowledged_whatever_became_of_it() -> None:
    """The soak's run autorecovery-24-281, shortened: the worker copies the fragment to bookie 4, which then stops
    and loses its disk before the worker updates the ensemble. BookKeeper's worker updates it all the same
    (LedgerFragmentReplicator.SingleFragmentCallback reads nothing back), so the step is the spec's too; the
    auditor then finds the fragment lost again."""
    spec = AutorecoverySpec(NumBookies=4, E=3, Qw=2, NumWorkers=2, MaxStops=2, MaxDiskLosses=1)
    steps = [
        ("BookieStops", (2,)),
        ("AuditorIsElected", (1,)),
        ("AuditorChecksBookies", ()),
        ("WorkerTakesLock", (1,)),
        ("WorkerStartsFragment", (1, 1, 2, 4)),
        ("WorkerCopiesEntry", (1, 0)),
        ("WorkerCopiesEntry", (1, 1)),
        ("BookieStops", (4,)),
        ("BookieLosesDisk", (4,)),
        ("WorkerUpdatesEnsemble", (1,)),
    ]
    [state] = spec.init_states()
    seen = {}
    for name, args in steps:
        after = getattr(spec, name)(state, *args)
        assert after is not None, (name, TRACE.explain[name](spec, state, *args))
        state = seen[name] = after
    assert state.meta_segments == ((0, (1, 4, 3)),) and state.data[3] == frozenset()
    assert spec.AuditorChecksBookies(state) is not None  # bookie 4 is lost: the fragment is marked again
    # Before its writes are acknowledged the worker may not update the ensemble, and the mapping says why.
    started = seen["WorkerStartsFragment"]
    assert spec.WorkerUpdatesEnsemble(started, 1) is None
    assert TRACE.explain["WorkerUpdatesEnsemble"](spec, started, 1) == (
        "worker 1 has entries [0, 1] of the fragment left to write: the copy is not done"
    )
