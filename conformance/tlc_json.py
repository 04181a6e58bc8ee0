r"""TLC's JSON traces (``tlc2.TLC -dumpTrace json FILE``) as trace events.

TLC (1.8 and later) writes each counterexample it finds with its ``Json``
module as ``{"counterexample": CounterExample, "vars": [...]}``, where
``CounterExample`` is the record TLC also gives a spec as
``TLCGet("trace")``-style data:

- ``state``: a set of ``<<i, s>>``: the behaviour's ``i``-th state (from 1),
  ``s`` a record of the variables;
- ``action``: a set of ``<<<<i, s>>, a, <<j, t>>>>``: the step from state
  ``i`` to state ``j``, ``a`` a record naming the action: ``name``, its
  ``location`` in the spec and, for an action operator with arguments,
  ``parameters`` (their names) and ``context`` (their values by name),
  tlaplus/tlaplus#853. (The issue drew them as one record ``parameter``;
  that is read too.)

Where the variables are a spec's variables, the first state becomes an
``Init`` event observing them, and the step into each next state an event of
the named action with its arguments as params. TLC names an action after the
operator it could split ``Next`` into: a disjunct under an ``\E`` whose
range depends on the state (``\E m \in net : ...``) stays inside the
operator around it, and the step gets that operator's name
(``BookieSteps``). Given the spec's action names (``actions``), a step
named otherwise becomes a ``Next`` event: some step of the spec, the checker
finds which; so does a step with no name. A liveness counterexample also
holds the step that closes its lasso (``j <= i``); it is not used: the finite
prefix is checked.

TLC's ``Json`` writes a TLA+ set as an array, a function on ``1..n`` (a
sequence, a tuple) as an array, a record as an object, a model value as its
name: the trace format's JSON already. A function on any other domain
becomes an object keyed by each element's TLA+ text (``"0"``, ``"<<1, 2>>"``);
the spec's codecs reject it with the path of the value. Events carry the
trace id given (the file name, when read from a file), process ``tlc``,
``seq`` the state's index, and, as their "line", that index too.

Reference: ``tlc2/module/Json.java`` and ``StandardModules/_JsonTrace.tla``
of tlaplus/tlaplus.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ledgerspec.spec.codecs import short_json
from ledgerspec.spec.tracing import INIT, NEXT
from ledgerspec.spec.vocabulary import trace_line

__all__ = ["TlcJsonError", "tlc_json_events"]

PROCESS = "tlc"


class TlcJsonError(ValueError):
    """A document that is not one of TLC's JSON traces; the message says where."""


def _indexed(item: Any, where: str) -> tuple[int, Mapping[str, Any]]:
    """``<<i, s>>``: a state's index and its variables."""
    if (
        not isinstance(item, list)
        or len(item) != 2
        or type(item[0]) is not int
        or item[0] < 1
        or not isinstance(item[1], Mapping)
    ):
        raise TlcJsonError(f"{where}: a state must be [index >= 1, {{variable: value}}], got {short_json(item, 80)}")
    return item[0], item[1]


def _states(counterexample: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = counterexample.get("state")
    if not isinstance(items, list) or not items:
        raise TlcJsonError('not a TLC trace: "counterexample.state" must be a non-empty array')
    by_index: dict[int, Mapping[str, Any]] = {}
    for k, item in enumerate(items):
        index, state = _indexed(item, f"counterexample.state[{k}]")
        if index in by_index:
            raise TlcJsonError(f"counterexample.state[{k}]: a second state {index}")
        by_index[index] = state
    if sorted(by_index) != list(range(1, len(by_index) + 1)):
        missing = sorted(set(range(1, max(by_index) + 1)) - set(by_index))
        raise TlcJsonError(f"counterexample.state: states {missing} are missing")
    return [by_index[i] for i in range(1, len(by_index) + 1)]


def _steps(counterexample: Mapping[str, Any], length: int) -> dict[int, Mapping[str, Any]]:
    """The action of each forward step, by the index of the state it leads to."""
    items = counterexample.get("action", [])
    if not isinstance(items, list):
        raise TlcJsonError('"counterexample.action" must be an array')
    actions: dict[int, Mapping[str, Any]] = {}
    for k, item in enumerate(items):
        where = f"counterexample.action[{k}]"
        if not isinstance(item, list) or len(item) != 3 or not isinstance(item[1], Mapping):
            raise TlcJsonError(f"{where}: a step must be [[i, state], {{name, ...}}, [j, state]]")
        source, _ = _indexed(item[0], f"{where}[0]")
        target, _ = _indexed(item[2], f"{where}[2]")
        if target <= source:  # the step closing a liveness lasso
            continue
        if target != source + 1 or target > length:
            raise TlcJsonError(f"{where}: a step from state {source} to state {target} of {length}")
        actions[target] = item[1]
    return actions


def _event_type(action: Mapping[str, Any] | None, actions: Collection[str] | None) -> tuple[str, dict[str, Any] | None]:
    """The event type and params of a step: its action's name and arguments, or ``Next``."""
    name = None if action is None else action.get("name")
    if action is None or not isinstance(name, str) or not name or (actions is not None and name not in actions):
        return NEXT, None
    context, names = action.get("context"), action.get("parameters")
    if isinstance(context, Mapping) and isinstance(names, list):
        params = {n: context[n] for n in names if isinstance(n, str) and n in context}
    elif isinstance(action.get("parameter"), Mapping):
        params = dict(action["parameter"])
    else:
        params = {}
    return name, params or None


def tlc_json_events(doc: Any, trace: str, actions: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The events of a TLC JSON trace document, as lines of the trace format. ``actions``: the names of the
    spec's actions, when known (a step TLC names otherwise is a ``Next`` event)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("counterexample"), Mapping):
        raise TlcJsonError('not a TLC trace: no "counterexample" record (written by TLC\'s -dumpTrace json)')
    counterexample = doc["counterexample"]
    states = _states(counterexample)
    steps = _steps(counterexample, len(states))
    events = []
    for index, state in enumerate(states, start=1):
        kind, params = (INIT, None) if index == 1 else _event_type(steps.get(index), actions)
        events.append(trace_line(trace, PROCESS, index, kind, params, dict(state)))
    return events
