"""Refinement, step by step: an :class:`~.run.AutorecoveryRun` moves only as the autorecovery spec allows.

After each step of the run, :class:`AutorecoveryRefinement` takes the
events the step logged and the abstraction of the run's state
(:func:`~.abstraction.abstract_state`) and checks them with the shared
:class:`~ledgerspec.reference.refinement.SpecSteps`: each event is an
enabled action, the state is the one the events lead to (no event: the
same state), and every invariant holds. The spec runs without a seeded
bug, so an engine mutant shows as the step where it leaves the spec.
"""

from __future__ import annotations

from ledgerspec.reference.autorecovery.abstraction import abstract_state
from ledgerspec.reference.autorecovery.run import AutorecoveryRun
from ledgerspec.reference.refinement import RefinementError, SpecSteps
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec, AutorecoveryState

__all__ = ["AutorecoveryRefinement", "RefinementError"]


class AutorecoveryRefinement:
    """Checks each step of one run against the autorecovery spec (module docstring)."""

    def __init__(self, run: AutorecoveryRun, spec: AutorecoverySpec | None = None) -> None:
        self.run = run
        self.spec = spec or AutorecoverySpec(**run.config.spec_constants())
        self.spec_steps: SpecSteps[AutorecoveryState] = SpecSteps(self.spec, abstract_state(run))
        self.seen = len(run.events)  # Init is the first state, not a step
        self.steps = 0
        run.observers.append(self.check)

    @property
    def state(self) -> AutorecoveryState:
        return self.spec_steps.state

    def check(self, what: str) -> None:
        """The run took a step, or refused one (``what``, for the message): check what it logged and where it
        is now."""
        self.steps += 1
        events = self.run.events[self.seen :]
        self.seen = len(self.run.events)
        self.spec_steps.step(events, abstract_state(self.run), f"step {self.steps} ({what})")
