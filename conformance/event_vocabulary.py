"""Is an event in a spec's vocabulary? Its type, its params and its observed names, checked in one mode.

The first step of a check (:mod:`ledgerspec.conformance.checker`): an
event's type must be an action of the spec (or ``Init``, or ``Next`` for an
unnamed step), its params the action's parameters with values of their
types, its observed names variables or projections the mode observes, and
among them every name the mapping requires of its action there
(``TraceMapping.requires``: a close that does not say where it closed says
nothing). An
event that is not names what is wrong, with its file and line. The params
are decoded here, once for each (type, params) the traces hold, to the
action's arguments or, when some are not given, to a pattern that the
instances of the action must match.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from ledgerspec.conformance.events import Event, InputError
from ledgerspec.spec.codecs import CodecError
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import INIT, NEXT, ObservationMode, TraceMapping

__all__ = ["DecodedParams", "EventVocabulary"]


@attrs.frozen
class DecodedParams:
    """An event's params, decoded: the action's arguments, or a pattern when some are not given."""

    args: tuple[Any, ...] | None
    pattern: Mapping[str, Any] | None


class EventVocabulary:
    """The vocabulary of one spec's trace mapping, in one observation mode; decoded params are cached."""

    def __init__(self, spec: Spec[Any], mapping: TraceMapping, mode: ObservationMode, cache_limit: int) -> None:
        self.spec = spec
        self.mapping = mapping
        self.mode = mode
        self.cache_limit = cache_limit
        self._actions = mapping.actions
        self._params: dict[tuple[str, bytes], DecodedParams | InputError] = {}
        self._required = {a: tuple(sorted(n)) for a in mapping.actions if (n := mapping.required(a, mode))}

    def error(self, e: Event) -> InputError | None:
        """What puts the event outside the vocabulary, or None. Params are decoded (and cached) here."""
        if e.type in self._actions:
            decoded = self._params.get((e.type, e.params_key)) or self.params(e)
            if type(decoded) is DecodedParams and self.mode.observes.issuperset(e.observed):
                required = self._required.get(e.type)
                if required is None or all(e.observed.get(n) is not None for n in required):
                    return None  # the usual case, in few steps
        return self._error(e)

    def _error(self, e: Event) -> InputError | None:
        """What is wrong with the event's type, params or observed names, if anything."""

        def error(message: str) -> InputError:
            return InputError(e.file, e.line, message, e.trace)

        if e.type in (INIT, NEXT):
            if e.params:
                return error(f"the {e.type} event has no params")
        elif e.type not in self._actions:
            return error(
                f"unknown event type {e.type!r}: not an action of spec {self.spec.name} "
                f"(actions: {', '.join(self._actions)}; or Init, Next)"
            )
        else:
            decoded = self.params(e)
            if isinstance(decoded, InputError):
                return error(decoded.message)
        observes = self.mode.observes
        for name in e.observed:
            if name not in observes:
                if name in self.mapping.codecs:
                    return error(
                        f"observed {name!r} is not observable in mode {self.mode.name!r} "
                        f"(it observes {', '.join(sorted(observes))})"
                    )
                return error(
                    f"observed {name!r} is neither a variable nor a projection of spec {self.spec.name} "
                    f"(variables: {', '.join(self.mapping.variables)}; projections: "
                    f"{', '.join(self.mapping.projections) or 'none'})"
                )
        missing = [n for n in self._required.get(e.type, ()) if e.observed.get(n) is None]
        if missing:
            return error(
                f"a {e.type} event must report {', '.join(missing)} in mode {self.mode.name!r}: without "
                f"{'it' if len(missing) == 1 else 'them'} the event says nothing of what the step did "
                '(docs/trace-format.md, "What an event must report")'
            )
        return None

    def params(self, e: Event) -> DecodedParams | InputError:
        """The event's params decoded for its action (an action event), or what is wrong with them."""
        key = (e.type, e.params_key)
        found = self._params.get(key)
        if found is not None:
            return found
        codecs = self.mapping.param_codecs[e.type]
        unknown = [name for name in e.params if name not in codecs]
        if unknown:
            found = InputError(
                e.file,
                e.line,
                f"{e.type} has no parameter {', '.join(map(repr, unknown))} "
                f"(parameters: {', '.join(codecs) or 'none'})",
                e.trace,
            )
        else:
            try:
                complete = [codecs[n].check(v, f"params.{n}", partial=True) for n, v in e.params.items()]
                if len(e.params) == len(codecs) and all(complete):
                    found = DecodedParams(tuple(c.decode(e.params[n], f"params.{n}") for n, c in codecs.items()), None)
                else:
                    found = DecodedParams(None, dict(e.params))
            except CodecError as exc:
                found = InputError(e.file, e.line, str(exc), e.trace)
        if len(self._params) >= self.cache_limit:
            self._params.clear()
        self._params[key] = found
        return found
