"""The models of a spec that are checked, and what checking them must find: the Python side of a TLA+ ``MC`` module.

Each spec lists its models beside it (``spec/<name>/<name>_models.py``, a
module-level ``MODELS``) and the catalogue names them, so that every spec
gets the same checks by being listed:

- :class:`CheckedModel`: constants under which TLC and the Python explorer
  must reach the very same states with no violation (and, where the spec
  says so, generate the same number of successors); the count of distinct
  states is pinned, so that a change to either text shows at once
  (tlaplus Examples keep such counts in a manifest beside the specs); a
  ``larger`` one is checked by both engines only in the longer runs
  (``--run-slow``, tox -e tlc), and the models checked in every run must
  then take every action of the spec between them;
- :class:`SeededBug`: a seeded bug (the spec's ``Bug`` constant) that both
  engines must report as the same broken property, with counterexamples of
  the same, pinned, length (both search breadth-first);
- explored models: small models explored whole, also under every seeded
  bug, on whose every state a trace mapping's explanations must agree with
  the actions (an explanation names a failing guard exactly when the
  action instance is disabled);
- presets: checked models a user runs by name (``model-check SPEC --preset
  faults``), each small and taking every action of the spec at least once,
  fault actions included, so that no step of the spec goes unchecked; beside
  them ``defaults``, the spec's own defaults, which promise no such thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["DEFAULTS", "CheckedModel", "SeededBug", "SpecModels"]

#: the preset every spec has: its constants' defaults
DEFAULTS = "defaults"


@attrs.frozen
class CheckedModel:
    """Constants under which both engines reach the same states, and how many there are."""

    constants: Mapping[str, Any]
    distinct_states: int
    why: str = ""  # what the model exercises
    larger: bool = False  # TLC's side checked only in the longer runs (--run-slow)
    #: actions its constants switch off by design (a mode of the spec the model is not in): never taken, and taken
    #: by other checked models
    off: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.constants.items()) or "defaults"


@attrs.frozen
class SeededBug:
    """A seeded bug both engines must find: the property it breaks and the length of the shortest counterexample."""

    bug: str
    invariant: str  # the invariant or action property reported broken
    length: int  # states of the counterexample, the initial one included
    constants: Mapping[str, Any] = attrs.field(factory=dict)
    #: the invariants and action properties checked; None: all of them
    checked: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return self.bug + (f"-{self.checked[0]}" if self.checked else "")


@attrs.frozen
class SpecModels:
    """What the checks of one spec run on."""

    checked: tuple[CheckedModel, ...]
    seeded_bugs: tuple[SeededBug, ...]
    #: the TLA+ guards are written so that TLC generates each successor once, as the explorer does: both engines
    #: also count the same states generated
    same_steps: bool = False
    #: small models, by name, explored whole (and under each seeded bug when ``explored_with_bugs``) to check the
    #: trace mapping's explanations; empty for a spec without a trace mapping
    explored: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    explored_with_bugs: bool = True
    #: the explorer's bound on states kept for an explored model
    explored_max_states: int | None = None
    #: checked models by the name a user runs them by, each taking every action of the spec (the parity tests
    #: hold both engines to that); ``defaults`` is not among them, it is every spec's own
    presets: Mapping[str, CheckedModel] = attrs.field(factory=dict)

    @presets.validator
    def _presets_are_checked(self, _attribute: attrs.Attribute[Any], presets: Mapping[str, CheckedModel]) -> None:
        if DEFAULTS in presets:
            raise ValueError(f"the preset {DEFAULTS!r} is every spec's defaults: name the model otherwise")
        unchecked = [name for name, model in presets.items() if model not in self.checked]
        if unchecked:
            # a preset's promise (its pinned count, every action taken) holds only where the parity tests look
            raise ValueError(f"presets {', '.join(unchecked)} must be among the checked models")

    @property
    def preset_names(self) -> tuple[str, ...]:
        return (DEFAULTS, *self.presets)

    def preset(self, name: str) -> Mapping[str, Any]:
        """The constants of the preset ``name``; :class:`KeyError` naming the presets there are."""
        if name == DEFAULTS:
            return {}
        if name not in self.presets:
            raise KeyError(f"unknown preset {name!r}; presets: {', '.join(self.preset_names)}")
        return self.presets[name].constants
