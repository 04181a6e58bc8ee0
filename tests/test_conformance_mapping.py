"""The ledger trace mapping: its explanations agree with the spec's actions, its modes say what they hide."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
from ledgerspec.spec.explorer import explore
from ledgerspec.spec.ledger import LedgerSpec, Msg
from ledgerspec.spec.ledger_trace import CLIENT, FULL, TRACE
from ledgerspec.spec.tracing import mapping_for

# Small models that between them enable every action and every guard of the ledger spec.
MODELS = {
    "losses": {"MaxEntries": 1, "MaxLoss": 1},
    "crashes and ensemble change": {"MaxEntries": 1, "NumBookies": 4, "MaxCrashes": 1},
    "throttle": {"MaxEntries": 2, "Throttle": 1},
}


@functools.cache
def _explored(name: str) -> tuple[LedgerSpec, tuple[Any, ...]]:
    spec = LedgerSpec(**MODELS[name])
    result = explore(spec, check_deadlock=False, keep_states=True)
    assert result.states is not None
    return spec, result.states


@pytest.fixture(scope="module", params=list(MODELS), ids=list(MODELS))
def model(request: pytest.FixtureRequest) -> tuple[LedgerSpec, tuple[Any, ...]]:
    return _explored(request.param)


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


def test_explanations_agree_with_the_actions(model: tuple[LedgerSpec, tuple[Any, ...]]) -> None:
    """In every reachable state: an explanation names a failing guard exactly when the instance is disabled,
    and it names one for every argument that is not an instance at all."""
    spec, states = model
    strangers = _strangers(spec, states)
    sample = set(states[:: max(1, len(states) // 300)])
    reasons: set[str] = set()
    for s in states:
        for act in spec.actions:
            explain = TRACE.explain[act.name]
            instances = [()] if act.params is None else list(act.params(spec, s))
            for args in instances:
                why = explain(spec, s, *args)
                enabled = act.fn(spec, s, *args) is not None
                assert (why is None) == enabled, (act.name, args, why, s)
                if why is not None:
                    reasons.add(why.split(" ")[0] + " " + why.split(" ")[1])
            if s in sample:
                for args in strangers.get(act.name, ()):
                    if args not in instances:
                        assert explain(spec, s, *args) is not None, (act.name, args, s)
    assert reasons  # every model disables something


def test_explanations_cover_every_guard() -> None:
    """Across the models, each guard's sentence is produced somewhere: no explanation branch is dead."""
    texts: set[str] = set()
    for name in MODELS:
        spec, states = _explored(name)
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
        "no add pending on bookie",
        "are still pending",
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
        "bookies have crashed",
    ]
    missing = [phrase for phrase in expected if not any(phrase in t for t in texts)]
    assert not missing, missing


def test_modes_hide_what_a_client_cannot_see() -> None:
    spec = LedgerSpec(MaxLoss=1, MaxCrashes=1)
    add = Msg("AddReq", 0, 2, 0, -1)
    assert CLIENT.hides("BookieReceivesAdd", (add, False)) and not CLIENT.hides("BookieReceivesAdd", (add, True))
    assert CLIENT.hides("BookieCrashes", (1,)) and CLIENT.hides("NetworkLosesMessage", (add,))
    assert not CLIENT.hides("WriterAddsEntry", ())
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
