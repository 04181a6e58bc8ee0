"""The ledger trace mapping: its explanations agree with the spec's actions, its modes say what they hide."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from explored_models import explored
from ledgerspec.spec import catalog
from ledgerspec.spec.ledger.ledger import LedgerSpec, Msg
from ledgerspec.spec.ledger.ledger_trace import CLIENT, FULL, GUARDS, TRACE, messages
from ledgerspec.spec.tracing import Message, mapping_for
from ledgerspec.tools.model_checking.explorer.explorer import explore

MODELS = list(catalog.find("ledger").models.explored)


@pytest.fixture(scope="module", params=MODELS, ids=MODELS)
def model(request: pytest.FixtureRequest) -> tuple[LedgerSpec, tuple[Any, ...]]:
    return explored("ledger", request.param)  # type: ignore[return-value]


def _strangers(spec: LedgerSpec, states: tuple[Any, ...]) -> dict[str, list[tuple[Any, ...]]]:
    """Arguments of each action that are often not instances: requests from other states, ids out of range."""
    messages = sorted({m for s in states[:: max(1, len(states) // 200)] for m in s.net}, key=repr)[:40]
    messages.append(Msg("AddReq", 0, 1, 7, 3))
    ids = range(-1, spec.NumBookies + 2)
    return {
        "BookieReceivesAdd": [(m, r) for m in messages for r in (True, False)],
        "BookieReceivesFenceRead": [(m, r) for m in messages for r in (True, False)],
        "BookieReceivesRecoveryRead": [(m, r) for m in messages for r in (True, False)],
        "NetworkLosesMessage": [(m,) for m in messages],
        "BookieCrashes": [(b,) for b in ids],
        "WriterChangesEnsemble": list(itertools.product(ids, ids)),
        "RecovererStartsRecovery": [(c,) for c in range(-1, 3)],
        "RecovererClosesLedger": [(c,) for c in range(-1, 3)],
        "RecovererResendsFenceRead": list(itertools.product(range(0, 3), ids)),
        "RecovererResendsRead": list(itertools.product(range(0, 3), ids)),
        "RecovererResendsWriteBack": list(itertools.product(range(0, 3), range(-1, 3), ids)),
    }


def test_explanations_name_a_guard_for_every_argument_that_is_not_an_instance(
    model: tuple[LedgerSpec, tuple[Any, ...]],
) -> None:
    """Beyond the spec's own instances (tests/test_explanations.py): requests from other states and ids out of
    range are explained as disabled, in a sample of the reachable states."""
    spec, states = model
    strangers = _strangers(spec, states)
    tried = 0
    for s in states[:: max(1, len(states) // 300)]:
        for act in spec.actions:
            instances = [()] if act.params is None else list(act.params(spec, s))
            for args in strangers.get(act.name, ()):
                if args not in instances:
                    assert TRACE.explain[act.name](spec, s, *args) is not None, (act.name, args, s)
                    tried += 1
    assert tried


def test_explanations_cover_every_guard() -> None:
    """Across the models, each guard's sentence is produced somewhere: no explanation branch is dead."""
    texts: set[str] = set()
    for name in MODELS:
        spec, states = explored("ledger", name)
        strangers = _strangers(spec, states)
        for s in states[:: max(1, len(states) // 500)]:
            for act in spec.actions:
                instances = [()] if act.params is None else list(act.params(spec, s))
                for args in instances + strangers.get(act.name, []):
                    why = TRACE.explain[act.name](spec, s, *args)
                    if why is not None:
                        texts.add(why)
    expected = [
        "the writer's handle is",
        "the writer has pushed every entry",
        "and the throttle allows 1",
        "no add sent to bookie",
        "its reply cannot be lost",
        "has crashed",
        "serving it changes nothing",
        "losing its reply changes nothing",
        "is already in the last ensemble",
        "is not in the last ensemble",
        "there is no bookie",
        "there is no recovering client",
        "no request",
        "is not among the recovered entries",
        "not yet written back",
        "has answered the fencing read",
        "is still in flight",
        "losses have happened",
        "crashes have happened",
        "only a crashed bookie restarts",
    ]
    missing = [phrase for phrase in expected if not any(phrase in t for t in texts)]
    assert not missing, missing


def test_modes_hide_what_a_client_cannot_see() -> None:
    spec = LedgerSpec(MaxLoss=1, MaxCrashes=1)
    add = Msg("AddReq", 0, 2, 0, -1)
    assert CLIENT.hides("BookieReceivesAdd", (add, False)) and not CLIENT.hides("BookieReceivesAdd", (add, True))
    assert CLIENT.hides("BookieCrashes", (1,)) and CLIENT.hides("NetworkLosesMessage", (add,))
    assert not CLIENT.hides("WriterAddsEntry", (-1,))
    assert not any(FULL.hides(a.name, ()) for a in spec.actions if a.params is None)
    assert "bookie_entries" in FULL.observes and "bookie_entries" not in CLIENT.observes
    assert "net" not in CLIENT.observes and "writer_lac" in CLIENT.observes
    # A reply is logged by the client it reaches, a step by the process that takes it.
    assert CLIENT.logged_by("BookieReceivesAdd", (add, True)) == "writer"
    assert FULL.logged_by("BookieReceivesAdd", (add, True)) == "bookie-2"
    fence = Msg("FenceReq", 1, 3, fence=True)
    assert CLIENT.logged_by("BookieReceivesFenceRead", (fence, True)) == "recoverer-1"
    assert FULL.logged_by("RecovererStartsRecovery", (1,)) == "recoverer-1"
    assert FULL.logged_by("NetworkLosesMessage", (add,)) == "network"


def test_mapping_is_found_by_spec_name() -> None:
    assert mapping_for("ledger") is TRACE
    with pytest.raises(KeyError, match="spec nosuch has no trace mapping"):
        mapping_for("nosuch")


def test_vocabulary_is_the_specs() -> None:
    """One vocabulary: event types are the spec's action names, params its parameter names."""
    assert list(TRACE.actions) == [a.name for a in LedgerSpec.actions]
    assert {a: list(c) for a, c in TRACE.param_codecs.items()} == {
        a.name: list(a.param_names) for a in LedgerSpec.actions
    }
    assert TRACE.param_codecs["BookieReceivesAdd"]["m"].name == "Msg record"
    assert set(TRACE.variables) | {"recoverer_phases", "last_ensemble"} == FULL.observes


# -- guards of the invariants -------------------------------------------------------------
# Seeded bugs whose models reach states that break guarded invariants (the first states, breadth first).
BROKEN = {
    "lac_before_qa": {"MaxEntries": 2, "NumBookies": 2, "E": 2, "Qw": 2, "Qa": 2},
    "fence_qa_total": {"E": 3, "Qw": 2, "Qa": 1, "MaxEntries": 1},
    "missing_after_qa_no_such": {"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1},
}


def test_every_guard_holds_in_each_state_that_breaks_its_invariant() -> None:
    """A guard is an antecedent: where it is false, its invariant holds. Tested on the states of the seeded
    bugs that break invariants; ClosedLedgerIsReadable and the action property, which no seeded bug
    breaks, are guarded by the first test of their own code (``meta_status != CLOSED: return None``)."""
    broken: dict[str, int] = {}
    for bug, constants in BROKEN.items():
        spec = LedgerSpec(Bug=bug, **constants)
        result = explore(spec, check_deadlock=False, stop_at_first=False, keep_states=True, max_states=5000)
        assert result.states is not None
        for s in result.states:
            for inv in spec.invariants:
                if inv.fn(spec, s) is None:
                    continue
                broken[inv.name] = broken.get(inv.name, 0) + 1
                for guard in GUARDS.get(inv.name, ()):
                    assert guard.fn(spec, s), (bug, inv.name, guard.name, s)
    assert set(broken) == {"NoAckedEntryLost", "ReadersAgreeUpToLac", "NoNewAcksToFencedWriter"}, broken


def test_every_guard_holds_somewhere() -> None:
    """Each guard holds in some reachable state of the small models: none is vacuous."""
    held = {
        (prop, g.name)
        for name in MODELS
        for spec, states in [explored("ledger", name)]
        for prop, guards in GUARDS.items()
        for g in guards
        if any(g.fn(spec, s) for s in states)
    }
    assert held == {(prop, g.name) for prop, guards in GUARDS.items() for g in guards}


# -- drawings: lanes and messages -----------------------------------------------------------
def test_lanes_are_ordered_writer_recoverers_bookies_network() -> None:
    processes = ["network", "bookie-10", "recoverer-2", "bookie-2", "writer", "zookeeper", "recoverer-1"]
    assert sorted(processes, key=TRACE.lane_order) == [
        "writer",
        "recoverer-1",
        "recoverer-2",
        "bookie-2",
        "bookie-10",
        "network",
        "zookeeper",
    ]


def test_messages_are_read_from_the_params() -> None:
    add = {"type": "AddReq", "client": 0, "bookie": 2, "entry": 0, "lac": -1, "recovery": False, "fence": False}
    assert messages("BookieReceivesAdd", {"m": add, "replied": True}) == (
        Message("writer", "bookie-2", "AddReq e0"),
        Message("bookie-2", "writer", "ack"),
    )
    fence = {"type": "FenceReq", "client": 1, "bookie": 3}
    assert messages("BookieReceivesFenceRead", {"m": fence, "replied": False}) == (
        Message("recoverer-1", "bookie-3", "FenceReq"),
        Message("bookie-3", "network", "fenced, LAC lost"),
    )
    assert messages("NetworkLosesMessage", {"m": add}) == (Message("writer", "network", "AddReq e0 lost"),)
    assert messages("RecovererResendsWriteBack", {"c": 1, "e": 0, "b": 2}) == (
        Message("recoverer-1", "bookie-2", "AddReq e0 (write-back), resent"),
    )
    resent = messages("RecovererResendsRead", {"c": 2, "b": 1})
    assert resent == (Message("recoverer-2", "bookie-1", "ReadReq, resent"),)
    # A request whose sender or receiver is left out, and steps that send nothing, draw no arrow.
    assert messages("BookieReceivesAdd", {"m": {"type": "AddReq", "bookie": 2}}) == ()
    assert messages("BookieReceivesAdd", {"replied": True}) == ()
    assert messages("WriterAddsEntry", {}) == messages("BookieCrashes", {"b": 1}) == ()
