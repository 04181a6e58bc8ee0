"""What a search found: the violations with their behaviours, the counts; and how a behaviour is found again.

Shared by the one-process search (:mod:`.explorer`) and the level-by-level
one (:mod:`.levels`, :mod:`.parallel`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import attrs
from ledgerspec.spec.kernel import Spec, Step
from ledgerspec.tools.model_checking.explorer.fingerprints import fingerprint

__all__ = [
    "INIT",
    "ActionCount",
    "Exploration",
    "ProgressCallback",
    "TraceStep",
    "Violation",
    "action_counts",
    "rebuild",
]

S = TypeVar("S")

INIT = Step("Init")


@attrs.frozen
class TraceStep(Generic[S]):
    """A state of a behaviour, with the step that led to it (``Init`` for the first)."""

    step: Step
    state: S


@attrs.frozen
class Violation(Generic[S]):
    """A broken property: ``kind`` is ``invariant``, ``property`` or ``deadlock``."""

    kind: str
    name: str
    message: str
    trace: tuple[TraceStep[S], ...]


@attrs.frozen
class ActionCount:
    """How much of a search one action made: an action it never took leaves its steps unchecked."""

    transitions: int  # steps it took, to states new or already seen
    distinct_states: int  # states it reached first

    @property
    def taken(self) -> bool:
        return self.transitions > 0


@attrs.frozen
class Exploration(Generic[S]):
    """What a run found, and how much work it took."""

    spec_name: str
    distinct_states: int
    states_generated: int
    depth: int
    seconds: float
    violations: tuple[Violation[S], ...]
    reached: frozenset[str]
    complete: bool
    states: tuple[S, ...] | None = None
    collision_probability: float = 0.0  # TLC's optimistic estimate; 0 when whole states were kept
    stopped: str | None = None  # why the search stopped before the end, when a bound stopped it
    #: per action of the spec, in the spec's order, how often the search took it
    actions: Mapping[str, ActionCount] = attrs.field(factory=dict)

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else float("inf")


ProgressCallback = Callable[[int, int, int, int], None]


def action_counts(transitions: Mapping[str, int], first_reached: Mapping[str, int]) -> dict[str, ActionCount]:
    """Per action, in the order of ``transitions``: the steps it took and the states it reached first."""
    return {name: ActionCount(count, first_reached.get(name, 0)) for name, count in transitions.items()}


def rebuild(spec: Spec[S], fps: list[int], view: Callable[[S], Any] | None) -> tuple[TraceStep[S], ...]:
    """The behaviour through the states with these fingerprints (of their ``view``, when the search used one),
    found again from Init: at each step the first successor, in the spec's action order, with the next
    fingerprint (the step the search took)."""
    state = next(s for s in spec.init_states() if fingerprint(view(s) if view else s) == fps[0])
    steps: list[TraceStep[S]] = [TraceStep(INIT, state)]
    for fp in fps[1:]:
        for act, args, nxt in spec.successors(state):
            if fingerprint(view(nxt) if view else nxt) == fp:
                steps.append(TraceStep(spec.step(act, args), nxt))
                state = nxt
                break
        else:
            raise RuntimeError(
                f"spec {spec.name}: no successor of a state on the counterexample has the fingerprint the "
                "search recorded; the spec is not deterministic (does an action read a clock or a random value?)"
            )
    return tuple(steps)
