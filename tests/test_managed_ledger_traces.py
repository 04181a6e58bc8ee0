"""The managed-ledger spec under the oracle: its trace mapping (spec/managed_ledger/managed_ledger_trace.py), and
the reference topic's runs (reference/managed_ledger/topic_simulation.py) as traces, checked from the library and
the command line."""

from __future__ import annotations

import functools
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import pytest
from explored_models import explored, guarded_broken_invariants, guards_never_held
from ledgerspec.conformance import TraceChecker, events_from_json
from ledgerspec.reference.managed_ledger.managed_ledger import LOG, faults_injected
from ledgerspec.reference.managed_ledger.refinement import TopicRefinement
from ledgerspec.reference.managed_ledger.topic_run import TopicRun, TopicRunConfig
from ledgerspec.reference.managed_ledger.topic_simulation import simulate_topic_traces, spec_for, with_mutant
from ledgerspec.spec import catalog
from ledgerspec.spec.managed_ledger.managed_ledger import NO_LEDGER, ManagedLedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger_trace import CLIENT, FULL, GUARDS, TRACE
from ledgerspec.spec.tracing import mapping_for
from ledgerspec.tools.cli.main import main

# Two producers and two subscriptions, with every fault the spec bounds: a dropped connection, a failed ledger
# creation, ledgers rolled over by age as well as by size.
CONFIG = TopicRunConfig(
    producers=2, messages=4, cursors=2, disconnects=1, creation_failures=1, maximum_rollover=2, ticks=2, takeovers=1
)
CRASHES = 2


# -- the mapping --------------------------------------------------------------------------
def test_mapping_is_found_by_spec_name_and_speaks_the_specs_vocabulary() -> None:
    assert mapping_for("managed_ledger") is TRACE
    assert list(TRACE.actions) == [a.name for a in ManagedLedgerSpec.actions]
    assert set(TRACE.explain) == set(TRACE.actions)
    assert FULL.observes == set(TRACE.variables)
    assert TRACE.encode_params("BrokerCrashes", (1,)) == {"k": 1}
    assert TRACE.encode_params("ConsumerAcks", (2,)) == {"c": 2}
    assert FULL.logged_by("ProducerSends", (2,)) == "producer-2"
    assert FULL.logged_by("ConsumerAcks", (1,)) == "consumer-1"
    assert FULL.logged_by("BookKeeperCompletesAdd", ()) == "bookkeeper"


def test_explanations_name_the_failing_guard() -> None:
    spec, states = explored("managed_ledger", "default", "none")
    first = states[0]
    assert TRACE.explain["BookKeeperCompletesAdd"](spec, first) == "no add is in flight to BookKeeper"
    assert TRACE.explain["BrokerReceives"](spec, first, 1) == "no batch of producer 1 is in flight to the broker"
    assert TRACE.explain["ProducerResends"](spec, first, 1) == (
        "producer 1's connection is open and no batch of it was lost: it has nothing to send again"
    )
    assert TRACE.explain["ManagedLedgerOpens"](spec, first) == "the broker is up: the managed ledger is open"
    assert TRACE.explain["ConsumerAcks"](spec, first, 3) == "there is no cursor 3 (cursors 1 .. 2)"
    assert TRACE.explain["LedgerRollsOver"](spec, first) == "ledger 1 holds no entry: it is not rolled over"
    assert TRACE.explain["ConnectionDrops"](spec, first, 1) == "0 connections have dropped; MaxDisconnects is 0"
    down = next(s for s in states if not s.broker_up)
    assert TRACE.explain["TrimConsumedLedgers"](spec, down) == "the broker is down"
    assert TRACE.explain["BrokerCrashes"](spec, down, 0) == "the broker is down already"


def test_every_guard_holds_in_each_state_that_breaks_its_invariant() -> None:
    models = catalog.find("managed_ledger").models.explored
    assert guarded_broken_invariants("managed_ledger", models, GUARDS) == {
        "NoAcknowledgedMessageLost",
        "TrimKeepsUnconsumedEntries",
        "DedupPersistsNoDuplicate",
        "LastConfirmedIsLastEntry",
        "LedgerHoldsItsLimit",
        # the old broker's list written without compare-and-set (blind_ledger_list_write), in the takeover model
        "WritesGoToLastLedger",
        "ListedLedgersExist",
        "TrimPositionBehindCursor",
        # the read position persisted (persists_read_position)
        "DurableMarkDeleteAcknowledged",
    }


def test_every_guard_holds_somewhere() -> None:
    assert guards_never_held("managed_ledger", "default", GUARDS) == []


def test_the_closed_ledger_is_kept_when_consumed_ledgers_are_trimmed_after_a_failed_creation() -> None:
    """The soak's run topic-7-4, shortened: after creating the next ledger failed, none is open, and the broker
    trims the consumed ledgers all the same. Pulsar's currentLedger is then the ledger just closed
    (internalTrimLedgers runs in ClosedLedger too, ManagedLedgerImpl, Pulsar 4.0.7): it is kept, the others
    before the slowest reader's ledger go."""
    spec = ManagedLedgerSpec(MaxMessages=4, MaxCreateFailures=1)
    steps = [
        *[("ProducerSends", (1,)), ("BrokerReceives", (1,)), ("BookKeeperCompletesAdd", ())] * 2,
        ("LedgerRollsOver", ()),
        *[("ProducerSends", (1,)), ("BrokerReceives", (1,)), ("BookKeeperCompletesAdd", ())] * 2,
        ("LedgerCreationFails", ()),
        *[("ConsumerAcks", (1,))] * 3,
        ("CursorPersists", (1,)),
    ]
    [state] = spec.init_states()
    for name, args in steps:
        after = getattr(spec, name)(state, *args)
        assert after is not None, (name, TRACE.explain[name](spec, state, *args))
        state = after
    assert state.current == NO_LEDGER and state.ledgers == (1, 2) and state.mark_delete == ((2, 0),)
    trimmed = spec.TrimConsumedLedgers(state)
    assert trimmed is not None and trimmed.ledgers == (2,) and trimmed.deleted == {1}
    # The engine does the same, step for step under the refinement check.
    with tempfile.TemporaryDirectory() as root:
        run = TopicRun(root, TopicRunConfig(messages=4, creation_failures=1))
        check = TopicRefinement(run)
        for next_ledger in (run.roll_over, run.fail_creation):
            for _ in range(2):
                run.send(1)
                run.receive(1)
                run.complete_add()
            assert next_ledger()
        for _ in range(3):
            assert run.consume(1)
        assert run.trim() == []  # acknowledged, not yet persisted: the managed ledger holds the cursor at 1:-1
        assert run.persist(1)
        assert len(run.trim()) == 1
        assert check.state.ledgers == (2,) and check.state.current == NO_LEDGER
        run.close()


def _steps(spec: ManagedLedgerSpec, state: Any, *steps: tuple[str, tuple[Any, ...]]) -> Any:
    for name, args in steps:
        after = getattr(spec, name)(state, *args)
        assert after is not None, (name, TRACE.explain[name](spec, state, *args))
        state = after
    return state


PUBLISH = (("ProducerSends", (1,)), ("BrokerReceives", (1,)), ("BookKeeperCompletesAdd", ()))


def test_a_broker_that_lost_the_topic_cannot_write_the_list_once_the_new_owner_has() -> None:
    """The old broker's rollover writes its list by compare-and-set: after the new owner's open the version it holds
    is old, its write fails and the ledger it created is deleted. Written blindly (the seeded bug), its list drops
    the new owner's ledger, and the batch the new owner acknowledged there with it."""
    spec = ManagedLedgerSpec(MaxTakeovers=1)
    [state] = spec.init_states()
    state = _steps(spec, state, *PUBLISH, ("TopicMovesToAnotherBroker", (0,)), ("ManagedLedgerOpens", ()))
    assert (state.ledgers, state.old_broker, state.old_broker_stale) == ((1, 2), (1,), True)
    assert TRACE.explain["TopicMovesToAnotherBroker"](spec, state, 0) == "1 takeovers have happened; MaxTakeovers is 1"
    state = _steps(spec, state, *PUBLISH)
    assert state.acked == (1,) and state.last_id[0] == 2  # acknowledged in the new owner's ledger
    refused = _steps(spec, state, ("OldBrokerRollsOver", ()))
    assert (refused.ledgers, refused.deleted, refused.old_broker) == ((1, 2), {3}, ())
    assert spec.invariant_failures(refused) == []
    blind = ManagedLedgerSpec(MaxTakeovers=1, Bug="blind_ledger_list_write")
    overwritten = _steps(blind, state, ("OldBrokerRollsOver", ()))
    assert overwritten.ledgers == (1, 3)
    broken = [name for name, _ in blind.invariant_failures(overwritten)]
    assert "WritesGoToLastLedger" in broken and "NoAcknowledgedMessageLost" in broken


def test_before_the_new_owners_open_the_old_broker_writes_and_the_open_drops_its_empty_ledger() -> None:
    spec = ManagedLedgerSpec(MaxTakeovers=1)
    [state] = spec.init_states()
    state = _steps(spec, state, *PUBLISH, ("TopicMovesToAnotherBroker", (0,)), ("OldBrokerRollsOver", ()))
    assert (state.ledgers, state.deleted) == ((1, 2), frozenset())
    opened = _steps(spec, state, ("ManagedLedgerOpens", ()))
    assert (opened.ledgers, opened.deleted, opened.current) == ((1, 3), {2}, 3)
    # The engine does the same, under the refinement check, and refuses the write once the new owner has opened.
    with tempfile.TemporaryDirectory() as root:
        run = TopicRun(root, TopicRunConfig(takeovers=2))
        check = TopicRefinement(run)
        run.send(1)
        run.receive(1)
        run.complete_add()
        run.take_over()
        assert run.old_broker_rolls_over()
        run.restart()
        assert check.state.ledgers == (1, 3) and check.state.deleted == {2}
        run.take_over()
        run.restart()
        assert not run.old_broker_rolls_over()
        (abandoned,) = run.abandoned
        assert not run.ledger_metadata_exists(abandoned)  # the ledger it created is deleted
        assert check.state.old_broker == () and check.state.takeovers == 2
        run.close()


# -- traces of the reference topic ---------------------------------------------------------
@functools.cache
def _traces(mutant: str | None = None) -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    with tempfile.TemporaryDirectory() as root:
        config = with_mutant(CONFIG, mutant)
        return list(
            simulate_topic_traces(
                config, root, seed=5, steps=80, traces=12, max_crashes=CRASHES, modes=("full", "client")
            )
        )


def _checker() -> TraceChecker:
    return TraceChecker(spec_for(CONFIG, CRASHES), "full")


def test_the_correct_topic_conforms_and_takes_every_action() -> None:
    checker = _checker()
    actions: set[str] = set()
    for trace_id, lines in _traces():
        verdict = checker.check(events_from_json(lines["full"]))
        assert verdict.status == "conforms", (trace_id, verdict.reason)
        actions |= {line["type"] for line in lines["full"]}
    assert actions == {"Init", *TRACE.actions}


def test_every_line_carries_every_variable_and_the_process_that_took_the_step() -> None:
    lines = [line for _, trace in _traces() for line in trace["full"]]
    assert all(set(line["observed"]) == FULL.observes for line in lines)
    processes = {line["process"] for line in lines}
    assert {"producer-1", "producer-2", "consumer-1", "consumer-2", "bookkeeper", "broker"} <= processes
    crashes = [line for line in lines if line["type"] == "BrokerCrashes"]
    assert {line["params"]["k"] for line in crashes} == {0, 1}  # before an add is written, and after


def test_the_same_seed_gives_the_same_traces() -> None:
    with tempfile.TemporaryDirectory() as root:
        again = list(
            simulate_topic_traces(
                CONFIG, root, seed=5, steps=80, traces=12, max_crashes=CRASHES, modes=("full", "client")
            )
        )
    assert again == _traces()


def test_what_the_injected_faults_make_the_broker_warn_of_is_not_logged_by_a_simulation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Run 1 of seed 1 of the soak's topic workload closes a ledger another broker deleted, which the broker warns of
    as Pulsar's does; in a simulation that is the injected fault's expected outcome, recorded in the trace, and the
    logger's level is the caller's again afterwards."""
    caplog.set_level(logging.WARNING, logger=LOG.name)
    config = TopicRunConfig(producers=2, messages=4, cursors=2, disconnects=2, creation_failures=1, takeovers=1)
    with tempfile.TemporaryDirectory() as root:
        runs = list(simulate_topic_traces(config, root, seed=1, steps=120, traces=2))
    assert len(runs) == 2 and not [r for r in caplog.records if r.name == LOG.name]
    assert LOG.level == logging.WARNING
    with faults_injected():
        LOG.warning("a fault's expected outcome")
    LOG.warning("Error when closing ledger 7")  # outside a simulation the broker's warning is logged
    assert [r.getMessage() for r in caplog.records if r.name == LOG.name] == ["Error when closing ledger 7"]


def test_client_mode_logs_what_the_clients_see_and_the_correct_topic_conforms() -> None:
    """Sends, acknowledgements received and given, the broker going and the topic served again, by the client that
    sees each; a crash without how many adds in flight reached the bookies; and no hidden step is logged."""
    checker = TraceChecker(spec_for(CONFIG, CRASHES), "client")
    lines = [line for _, trace in _traces() for line in trace["client"]]
    assert {line["type"] for line in lines} == {"Init", *TRACE.actions} - set(CLIENT.hidden)
    assert all(set(line["observed"]) == CLIENT.observes for line in lines)
    assert {line["process"] for line in lines} == {
        "producer-1",
        "producer-2",
        "producer",
        "consumer-1",
        "consumer-2",
        "clients",
    }
    assert all("params" not in line for line in lines if line["type"] in ("BrokerCrashes", "TopicMovesToAnotherBroker"))
    for trace_id, trace in _traces():
        assert len(trace["client"]) < len(trace["full"]), trace_id
        verdict = checker.check(events_from_json(trace["client"]))
        assert verdict.status == "conforms", (trace_id, verdict.reason)


def test_a_duplicate_a_consumer_reads_breaks_the_dedup_promise_in_client_mode() -> None:
    """The reopen that forgets the dedup state writes a batch sent again twice: the producer's view does not show
    it, the slowest subscription's backlog does, and the verdict names the promise from it; where the backlog does
    not show it, the write is where the trace leaves the spec."""
    checker = TraceChecker(spec_for(CONFIG, CRASHES), "client")
    verdicts = [checker.check(events_from_json(trace["client"])) for _, trace in _traces("forget_dedup_on_open")]
    caught = [v for v in verdicts if v.status == "violates"]
    assert caught and all(v.status != "inconclusive" for v in verdicts)
    assert any("DedupPersistsNoDuplicate" in {b.name for b in v.broken_promises} for v in caught)
    # Without the promise, the verdict says where the clients' view left the spec: the backlog they read, or an
    # acknowledgement the correct broker would have given without a write.
    unnamed = [v.failure for v in caught if not v.broken_promises]
    assert all(f is not None and ("backlog" in f.reason or "is not enabled" in f.reason) for f in unnamed)


def test_a_lost_acknowledged_message_a_consumer_misses_is_named_in_client_mode() -> None:
    """Trimming that deletes a ledger a subscription still reads: where it holds the last message a producer was
    acknowledged, the backlog shows it gone, and the verdict names NoAcknowledgedMessageLost."""
    checker = TraceChecker(spec_for(CONFIG, CRASHES), "client")
    verdicts = [checker.check(events_from_json(t["client"])) for _, t in _traces("trim_deletes_needed_ledger")]
    named = [v for v in verdicts if "NoAcknowledgedMessageLost" in {b.name for b in v.broken_promises}]
    assert named, [v.reason for v in verdicts]
    assert all("was acknowledged to its producer and no subscription consumed it" in v.reason for v in named)


@pytest.mark.parametrize(
    ("mutant", "events", "promises", "words"),
    [
        (
            "trim_deletes_needed_ledger",
            {"TrimConsumedLedgers"},
            {"TrimKeepsUnconsumedEntries"},
            "TrimConsumedLedgers is not enabled: no ledger of the list other than the last lies before the slowest",
        ),
        (
            "skip_unconsumed_ledger",
            {"CursorsSkipConsumedLedgers"},
            {"TrimPositionBehindCursor"},
            "the spec has",
        ),
        ("forget_dedup_on_open", {"ManagedLedgerOpens"}, set(), "after ManagedLedgerOpens: observed highest_pushed"),
        (  # the duplicate's answer acknowledges the batch still waiting to be added: a crash then loses it
            "unknown_answered_as_duplicate",
            {"BrokerReceives"},
            {"NoAcknowledgedMessageLost"},
            "): observed acked = ",
        ),
        (  # the reopened managed ledger confirms the new ledger's (l, -1), hiding the entries written before
            "reopen_confirms_new_ledger",
            {"ManagedLedgerOpens"},
            {"LastConfirmedIsLastEntry"},
            "ManagedLedgerOpens: observed last_confirmed = ",
        ),
        (  # the old broker's list, written over the new owner's, drops the ledger the new owner writes to
            "blind_ledger_list_write",
            {"OldBrokerRollsOver"},
            {"WritesGoToLastLedger"},
            "OldBrokerRollsOver: observed ",
        ),
        (  # a batch that comes while the ledger closes is added to it, past MaxEntriesPerLedger
            "closing_ledger_takes_adds",
            {"BrokerReceives"},
            {"LedgerHoldsItsLimit"},
            "): observed pending = ",
        ),
        (  # the batches queued for the ledger whose creation failed are answered, and never written
            "failed_creation_acks_queued",
            {"LedgerCreationFails"},
            {"NoAcknowledgedMessageLost"},
            "LedgerCreationFails: observed acked = ",
        ),
        (  # the cursor's first write after a reopen (its new cursor ledger's) persists what it reads next too
            "persists_read_position",
            {"CursorPersists", "ManagedLedgerOpens"},
            {"DurableMarkDeleteAcknowledged"},
            "observed persistent_mark_delete",
        ),
    ],
)
def test_each_mutant_is_caught_at_its_step(mutant: str, events: set[str], promises: set[str], words: str) -> None:
    """Full observation stops at the step that goes wrong; where the state it reports breaks an invariant, the
    verdict names it, else it says which value differs from the spec's."""
    checker = _checker()
    verdicts = [checker.check(events_from_json(lines["full"])) for _, lines in _traces(mutant)]
    caught = [v for v in verdicts if v.status == "violates"]
    assert caught and all(v.status in ("violates", "conforms") for v in verdicts)
    for verdict in caught:
        failure = verdict.failure
        assert failure is not None and failure.event_type in events, verdict.reason
    assert any(
        promises <= {b.name for b in v.failure.broken} and words in v.failure.reason
        for v in caught
        if v.failure is not None
    )


# -- the command line -----------------------------------------------------------------------
def test_simulate_writes_traces_that_check_clean_and_a_mutants_that_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = tmp_path / "ok"
    constants = ["--const", "NumCursors=2", "--const", "NumProducers=2", "--const", "MaxMessages=4"]
    assert main(["simulate", "topic", "--traces", "3", "--steps", "60", *constants, "--out", str(ok), "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["spec"] == "managed_ledger" and len(manifest["traces"]) == 3
    assert manifest["constants"]["NumCursors"] == 2 and manifest["constants"]["MaxCrashes"] == 2
    assert sorted(p.name for p in ok.iterdir()) == ["manifest.json", *(f"topic-0-{i}.ndjson" for i in range(3))]
    check = manifest["check"].split()[1:]
    assert main([*check, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["conforms"] == 3
    bad = tmp_path / "bad"
    argv = ["simulate", "topic", "--traces", "4", "--steps", "60", "--seed", "1", *constants, "--out", str(bad)]
    assert main([*argv, "--mutant", "forget_dedup_on_open"]) == 0
    capsys.readouterr()
    assert main(["check", str(bad), "--json"]) == 1
    assert "observed highest_pushed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "metadata"], "unknown mode 'metadata' for topic; modes: full, client"),
        (["--mutant", "nope"], "unknown topic mutant 'nope'; mutants: trim_deletes_needed_ledger"),
        (["--const", "E=2"], "a topic run takes the constants NumProducers"),
        (["--const", "BatchSize=0"], "BatchSize must be at least 1"),
        (["--faults", "crash"], "--faults is for ledger runs"),
    ],
)
def test_bad_simulate_options_are_usage_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "topic", "--out", str(tmp_path), *argv]) == 2
    assert message in " ".join(capsys.readouterr().err.split())  # the console wraps long lines


@pytest.mark.tlc
@pytest.mark.parametrize("mutant", [None, "trim_deletes_needed_ledger"])
def test_tlc_gives_the_same_verdicts_on_topic_traces(tmp_path: Path, mutant: str | None) -> None:
    """Each trace as a TLA+ module over managed_ledger.tla (and positions.tla, which it extends), validated by
    TLC."""
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc

    spec = spec_for(CONFIG, CRASHES)
    verdicts = []
    runs = simulate_topic_traces(
        with_mutant(CONFIG, mutant), str(tmp_path), seed=5, steps=60, traces=2, max_crashes=CRASHES
    )
    for trace_id, lines in runs:
        events = events_from_json(lines["full"])
        verdict = TraceChecker(spec, "full").check(events)
        checked = validate_with_tlc(events, spec, directory=tmp_path / f"tlc-{trace_id}")
        assert checked.outcome.conforms == (verdict.status == "conforms"), (trace_id, checked.outcome, verdict.reason)
        assert verdict.failure is None or verdict.failure.event_index == checked.outcome.event_index
        verdicts.append(verdict.status)
    assert ("violates" in verdicts) == (mutant is not None)
