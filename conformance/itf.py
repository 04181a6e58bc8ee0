"""ITF traces (the Informal Trace Format of Apalache and Quint) as trace events.

An ITF trace is a JSON document listing *states*: ``{"vars": [...], "states":
[{"#meta": {...}, var: value, ...}, ...]}``. Where its variables are a spec's
variables, each state becomes an event that observes them: the first an
``Init`` event, each next one a ``Next`` event (some step of the spec; the
checker finds which), or, when the state names its action as Quint's
model-based-testing mode does (``mbt::actionTaken``, with the arguments in
``mbt::nondetPicks``), an event of that action with those params.

ITF values become the trace format's JSON: ``{"#bigint": "7"}`` an integer,
``{"#tup": [...]}`` and ``{"#set": [...]}`` arrays, ``{"#map": [[k, v], ...]}``
an array when its keys are ``1..n`` (a TLA+ function on ``1..n`` is a
sequence), an object when they are strings, an array of pairs otherwise;
records stay objects. A lasso's ``loop`` is not used: the finite prefix is
checked. Events carry the trace id given (the file name, when read from a
file), process ``itf``, ``seq`` the state's index from 1, and, as their
"line", the state's index in the file.

Reference: https://apalache-mc.org/docs/adr/015adr-trace.html
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledgerspec.spec.tracing import INIT, NEXT
from ledgerspec.spec.vocabulary import trace_line

__all__ = ["ItfError", "from_itf", "itf_events"]

ACTION_TAKEN = "mbt::actionTaken"
NONDET_PICKS = "mbt::nondetPicks"


class ItfError(ValueError):
    """A document that is not an ITF trace, or a value ITF cannot give in plain JSON."""


def from_itf(value: Any, path: str = "value") -> Any:
    """An ITF value as the trace format's JSON."""
    if isinstance(value, list):
        return [from_itf(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "#bigint":
            try:
                return int(inner)
            except (TypeError, ValueError):
                raise ItfError(f"{path}: #bigint {inner!r} is not an integer") from None
        if tag in ("#tup", "#set"):
            if not isinstance(inner, list):
                raise ItfError(f"{path}: {tag} must hold an array")
            return [from_itf(v, f"{path}[{i}]") for i, v in enumerate(inner)]
        if tag == "#map":
            return _from_map(inner, path)
        if tag == "#unserializable":
            raise ItfError(f"{path}: an unserializable value: {inner}")
    return {k: from_itf(v, f"{path}.{k}") for k, v in value.items()}


def _from_map(pairs: Any, path: str) -> Any:
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise ItfError(f"{path}: #map must hold an array of [key, value] pairs")
    keys = [from_itf(k, f"{path} key") for k, _ in pairs]
    values = [from_itf(v, f"{path}[{k}]") for k, (_, v) in zip(keys, pairs, strict=True)]
    if all(type(k) is int for k in keys) and sorted(keys) == list(range(1, len(keys) + 1)):
        return [v for _, v in sorted(zip(keys, values, strict=True))]
    if all(isinstance(k, str) for k in keys):
        return dict(zip(keys, values, strict=True))
    return [[k, v] for k, v in zip(keys, values, strict=True)]


def _picks(picks: Any, path: str) -> dict[str, Any]:
    """Quint's nondeterministic picks: each an option, ``{"tag": "Some", "value": v}`` or ``None``."""
    if not isinstance(picks, dict):
        raise ItfError(f"{path}: {NONDET_PICKS} must be a record")
    params = {}
    for name, option in picks.items():
        if isinstance(option, dict) and option.get("tag") == "Some":
            params[name] = from_itf(option.get("value"), f"{path}.{name}")
        elif not (isinstance(option, dict) and option.get("tag") == "None"):
            params[name] = from_itf(option, f"{path}.{name}")
    return params


def itf_events(doc: Any, trace: str) -> list[dict[str, Any]]:
    """The events of an ITF document, as lines of the trace format."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("states"), list):
        raise ItfError('not an ITF trace: no "states" array')
    events = []
    for index, state in enumerate(doc["states"]):
        where = f"state {index}"
        if not isinstance(state, Mapping):
            raise ItfError(f"{where}: a state must be an object")
        action = state.get(ACTION_TAKEN)
        named = action if isinstance(action, str) and action and action != "init" else None
        params = None
        if index > 0 and named and NONDET_PICKS in state:
            params = _picks(state[NONDET_PICKS], f"{where}.{NONDET_PICKS}")
        observed = {
            name: from_itf(value, f"{where}.{name}")
            for name, value in state.items()
            if name != "#meta" and not name.startswith("mbt::")
        }
        kind = INIT if index == 0 else (named or NEXT)
        events.append(trace_line(trace, "itf", index + 1, kind, params, observed))
    return events
