"""The spec kernel: how a Python spec is written so that it reads like its TLA+ twin.

A spec is a subclass of :class:`Spec` with

- a frozen attrs *state* class whose fields are the TLA+ ``VARIABLES``, with
  the same names, in values that :func:`ledgerspec.spec.values.normalize`
  maps to TLA+ values;
- *constants* (the TLA+ ``CONSTANTS``), validated when the spec is built;
- ``init_states()``, the TLA+ ``Init``;
- methods decorated with :func:`action`: ``Name(self, s, *params)`` returns the
  successor state or ``None`` when the guard is false. The parameters come
  from the ``params`` function, which plays the part of the ``\\E x \\in S``
  in front of a TLA+ action;
- methods decorated with :func:`invariant` (state predicates),
  :func:`action_property` (predicates of a step, TLA+'s ``[][A]_vars``) and
  :func:`reachable` (the "sometimes" that shows an "always" is not vacuous).
  An invariant or an action property returns ``None`` when it holds and a
  sentence naming the values that break it otherwise.

What is left out: liveness is declared (``fairness=`` on an action, the
``liveness`` class attribute) so that the two texts say the same thing, but it
is checked by TLC only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import attrs
from ledgerspec.spec.values import format_value, normalize

__all__ = [
    "TLC_INT_MAX",
    "TLC_INT_MIN",
    "Action",
    "ActionProperty",
    "Constant",
    "ConstantError",
    "Invariant",
    "Reachable",
    "Spec",
    "Step",
    "action",
    "action_property",
    "evolve",
    "int_constant",
    "invariant",
    "reachable",
]

S = TypeVar("S")


_EVOLVERS: dict[type, Callable[[Any, dict[str, Any]], Any]] = {}


def evolve(state: S, **changes: Any) -> S:
    """A copy of a frozen attrs ``state`` with some fields changed: TLA+'s primed variables.

    Same result as ``attrs.evolve``, at a fraction of its cost on the explorer's hot path: each state class
    gets a function of its own that reads the unchanged fields directly.
    """
    cls: Any = type(state)
    evolver = _EVOLVERS.get(cls)
    if evolver is None:
        evolver = _EVOLVERS[cls] = _evolver(cls)
    new: S = evolver(state, changes)
    return new


def _evolver(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    """``lambda s, c: cls(c["a"] if "a" in c else s.a, ...)`` for the fields of ``cls``, checked to be names."""
    names = [f.name for f in attrs.fields(cls)]
    if not all(name.isidentifier() for name in names):  # attrs fields are identifiers; say so if not
        raise TypeError(f"{cls.__name__} has a field that is not a Python name: {names}")
    fields = ", ".join(f"c[{n!r}] if {n!r} in c else s.{n}" for n in names)
    namespace: dict[str, Any] = {"cls": cls}
    exec(f"def evolve(s, c):\n    return cls({fields})\n", namespace)
    evolver: Callable[[Any, dict[str, Any]], Any] = namespace["evolve"]
    return evolver


# TLC's integers are 32-bit signed: an integer constant both engines can take lies in this range.
TLC_INT_MIN, TLC_INT_MAX = -(2**31), 2**31 - 1


class ConstantError(ValueError):
    """A constant is unknown, has the wrong type, or breaks a rule between constants."""


@attrs.frozen
class Constant:
    """A TLA+ ``CONSTANT``: its type, default and what it means."""

    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None

    def parse(self, raw: Any) -> Any:
        """Turn a value given on the command line (or in Python) into the constant's type."""
        value = raw
        if isinstance(raw, str) and self.type is int:
            try:
                value = int(raw)
            except ValueError:
                raise ConstantError(f"constant {self.name} must be an integer, got {raw!r}") from None
        elif isinstance(raw, str) and self.type is bool:
            if raw.upper() not in ("TRUE", "FALSE"):
                raise ConstantError(f"constant {self.name} must be TRUE or FALSE, got {raw!r}")
            value = raw.upper() == "TRUE"
        elif isinstance(raw, str) and self.type is str:
            value = raw.strip('"')
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise ConstantError(f"constant {self.name} must be of type {self.type.__name__}, got {raw!r}")
        if isinstance(value, int) and not TLC_INT_MIN <= value <= TLC_INT_MAX:
            raise ConstantError(
                f"constant {self.name} must lie between {TLC_INT_MIN:,} and {TLC_INT_MAX:,} (TLC's integers are "
                f"32-bit), got {raw!r}"
            )
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise ConstantError(f"constant {self.name} must be one of {allowed}, got {raw!r}")
        return value


def int_constant(name: str, default: int, doc: str) -> Constant:
    """An integer ``CONSTANT``: the common case, a bound or a size of the model."""
    return Constant(name, int, default, doc)


@attrs.frozen
class Action:
    """A named action: the TLA+ action ``Name(params)``."""

    name: str
    fn: Callable[..., Any]
    params: Callable[[Any, Any], Iterable[tuple[Any, ...]]] | None
    param_names: tuple[str, ...]
    fairness: str | None
    doc: str


@attrs.frozen
class Invariant:
    name: str
    fn: Callable[[Any, Any], str | None]
    doc: str


@attrs.frozen
class ActionProperty:
    name: str
    fn: Callable[[Any, Any, Any], str | None]
    doc: str


@attrs.frozen
class Reachable:
    name: str
    fn: Callable[[Any, Any], bool]
    doc: str


@attrs.frozen
class Step:
    """One labelled step of a behaviour: which action, with which parameters."""

    action: str
    params: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        if not self.params:
            return self.action
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.params)
        return f"{self.action}({args})"


def _short(value: Any) -> str:
    if attrs.has(type(value)):
        return repr(value)
    return format_value(normalize(value))


def _doc(fn: Callable[..., Any]) -> str:
    return " ".join((fn.__doc__ or "").split())


def action(
    params: Callable[[Any, Any], Iterable[tuple[Any, ...]]] | None = None,
    *,
    fairness: str | None = None,
) -> Callable[[Callable[..., S | None]], Callable[..., S | None]]:
    """Mark a method as a spec action.

    ``params(spec, state)`` yields one tuple of arguments per instance of the
    action (the existential quantifier in front of the TLA+ action);
    ``fairness`` is ``"weak"`` or ``"strong"`` when the TLA+ spec asks for it.
    """
    if fairness not in (None, "weak", "strong"):
        raise ValueError(f"fairness must be 'weak' or 'strong', not {fairness!r}")

    def mark(fn: Callable[..., S | None]) -> Callable[..., S | None]:
        fn.__spec_action__ = (params, fairness)  # type: ignore[attr-defined]
        return fn

    return mark


def invariant(fn: Callable[[Any, S], str | None]) -> Callable[[Any, S], str | None]:
    """Mark a method as an invariant: ``None`` when it holds, else why not."""
    fn.__spec_invariant__ = True  # type: ignore[attr-defined]
    return fn


def action_property(fn: Callable[[Any, S, S], str | None]) -> Callable[[Any, S, S], str | None]:
    """Mark a method as a property of every step (TLA+ ``[][A]_vars``)."""
    fn.__spec_action_property__ = True  # type: ignore[attr-defined]
    return fn


def reachable(fn: Callable[[Any, S], bool]) -> Callable[[Any, S], bool]:
    """Mark a method as a predicate some reachable state should satisfy."""
    fn.__spec_reachable__ = True  # type: ignore[attr-defined]
    return fn


class Spec(Generic[S]):
    """Base class of the Python specs; see the module docstring.

    Subclasses set ``name``, ``state_type`` and ``constants`` and may override
    :meth:`check_constants` for rules between constants and :meth:`symmetry`
    for symmetry reduction.
    """

    name: ClassVar[str]
    state_type: ClassVar[type]
    constants: ClassVar[tuple[Constant, ...]]
    #: TLA+ text of the temporal properties TLC checks, by name.
    liveness: ClassVar[Mapping[str, str]] = {}
    #: The TLA+ operator TLC takes as its VIEW for the reduction ``symmetry`` makes; None: the spec has none.
    tla_view: ClassVar[str | None] = None

    actions: ClassVar[tuple[Action, ...]]
    invariants: ClassVar[tuple[Invariant, ...]]
    action_properties: ClassVar[tuple[ActionProperty, ...]]
    reachables: ClassVar[tuple[Reachable, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        actions, invariants, properties, reachables = [], [], [], []
        # Definition order, as in the TLA+ text, so that paths replay the same way.
        for attr_name, member in cls.__dict__.items():
            if hasattr(member, "__spec_action__"):
                params, fairness = member.__spec_action__
                names = member.__code__.co_varnames[2 : member.__code__.co_argcount]
                actions.append(Action(attr_name, member, params, tuple(names), fairness, _doc(member)))
            elif hasattr(member, "__spec_invariant__"):
                invariants.append(Invariant(attr_name, member, _doc(member)))
            elif hasattr(member, "__spec_action_property__"):
                properties.append(ActionProperty(attr_name, member, _doc(member)))
            elif hasattr(member, "__spec_reachable__"):
                reachables.append(Reachable(attr_name, member, _doc(member)))

        def inherited(attr: str) -> tuple[Any, ...]:
            return tuple(getattr(cls, attr, ()))

        cls.actions = tuple(inherited("actions")) + tuple(actions)
        cls.invariants = tuple(inherited("invariants")) + tuple(invariants)
        cls.action_properties = tuple(inherited("action_properties")) + tuple(properties)
        cls.reachables = tuple(inherited("reachables")) + tuple(reachables)

    def __init__(self, **values: Any) -> None:
        known = {c.name: c for c in self.constants}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConstantError(
                f"unknown constant{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for spec {self.name}; "
                f"known: {', '.join(known)}"
            )
        self.values: dict[str, Any] = {}
        for c in self.constants:
            self.values[c.name] = c.parse(values[c.name]) if c.name in values else c.default
        for name, value in self.values.items():
            setattr(self, name, value)
        self.check_constants()

    def check_constants(self) -> None:
        """Raise :class:`ConstantError` when the constants do not make a valid model."""

    # -- the parts a subclass provides -------------------------------------------------
    def init_states(self) -> Iterable[S]:
        raise NotImplementedError

    def symmetry(self, state: S) -> Any:
        """What tells ``state`` apart under the spec's symmetries: a value equal for states that are renamings
        of one another (a canonical representative, or the orbit). With ``symmetry=True`` the explorer
        fingerprints it and keeps the first state found with it, as TLC does with a VIEW (``tla_view``)."""
        return state

    # -- derived -----------------------------------------------------------------------
    def successors(self, state: S) -> Iterator[tuple[Action, tuple[Any, ...], S]]:
        """Every step enabled in ``state``: (action, arguments, next state)."""
        for act in self.actions:
            if act.params is None:
                nxt = act.fn(self, state)
                if nxt is not None:
                    yield act, (), nxt
            else:
                for args in act.params(self, state):
                    nxt = act.fn(self, state, *args)
                    if nxt is not None:
                        yield act, args, nxt

    def invariant_failures(self, state: S) -> list[tuple[str, str]]:
        """Every invariant ``state`` breaks, as (name, message), in definition order; empty when none."""
        failures = []
        for inv in self.invariants:
            message = inv.fn(self, state)
            if message is not None:
                failures.append((inv.name, message))
        return failures

    def property_failures(self, before: S, after: S) -> list[tuple[str, str]]:
        """Every action property the step ``before`` -> ``after`` breaks, as (name, message)."""
        failures = []
        for prop in self.action_properties:
            message = prop.fn(self, before, after)
            if message is not None:
                failures.append((prop.name, message))
        return failures

    def step(self, act: Action, args: tuple[Any, ...]) -> Step:
        return Step(act.name, tuple(zip(act.param_names, args, strict=True)))

    def to_tla(self, state: S) -> dict[str, Any]:
        """The state as TLA+ values, variable by variable (what TLC would print)."""
        state_type: Any = type(state)
        return {f.name: normalize(getattr(state, f.name)) for f in attrs.fields(state_type)}

    def variables(self) -> tuple[str, ...]:
        return tuple(f.name for f in attrs.fields(self.state_type))

    def find_action(self, name: str) -> Action:
        for act in self.actions:
            if act.name == name:
                return act
        raise KeyError(f"spec {self.name} has no action {name}; actions: {', '.join(a.name for a in self.actions)}")
