"""Model-check a spec with the Python explorer, with TLC, or with both, and compare them.

Both engines get the same constants and check the same invariants and action
properties, named in the Python spec. TLC's configuration file is written
from them, so the two can never check different things by accident. When
both run, they *agree* when they report the same violated properties and,
on a complete run, the same number of distinct states, the same actions taken
(an action neither takes is checked by neither: the run is vacuous for it),
and, when states are compared, the very same states.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.models import CheckedModel
from ledgerspec.spec.values import format_value, to_json
from ledgerspec.tools.model_checking.explorer.exploration import ActionCount
from ledgerspec.tools.model_checking.explorer.explorer import Explorer
from ledgerspec.tools.model_checking.explorer.parallel import ParallelExplorer

__all__ = [
    "ActionCount",
    "Comparison",
    "EngineResult",
    "ModelCheck",
    "Scale",
    "compare",
    "run_python",
    "run_tlc",
    "scale_of",
    "write_tlc_config",
]


@attrs.frozen
class ViolationReport:
    """One broken property, as either engine reports it."""

    kind: str  # invariant, property, deadlock or liveness
    invariant: str
    message: str
    trace: tuple[Mapping[str, Any], ...]  # each: {"action": ..., "state": {var: value}}

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "invariant": self.invariant,
            "message": self.message,
            "trace": [
                {
                    "action": step["action"],
                    **({"params": step["params"]} if "params" in step else {}),
                    "state": {k: to_json(v) for k, v in step["state"].items()},
                }
                for step in self.trace
            ],
        }


@attrs.frozen
class EngineResult:
    engine: str  # python or tlc
    distinct_states: int
    states_generated: int
    depth: int | None
    seconds: float
    violations: tuple[ViolationReport, ...]
    complete: bool
    states: frozenset[frozenset[tuple[str, Any]]] | None = None  # normal-form states, for comparison
    log_path: Path | None = None  # TLC's output, when its work directory was kept
    collision_probability: float | None = None  # of a fingerprint collision (TLC's optimistic estimate)
    stopped: str | None = None  # why the search stopped before the end (a memory bound)
    #: per action of the spec, in its order, how often the engine took it; None when not counted
    actions: Mapping[str, ActionCount] | None = None
    #: actions TLC counted that name no single action of the Python spec (their counts are in no action's)
    unmatched_actions: tuple[str, ...] = ()

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else float("inf")

    @property
    def taken(self) -> frozenset[str]:
        """The actions the engine took at least once (none when it did not count them)."""
        return frozenset(name for name, count in (self.actions or {}).items() if count.taken)

    @property
    def never_taken(self) -> tuple[str, ...]:
        """The actions the engine never took, in the spec's order: the run checked none of their steps."""
        return tuple(name for name, count in (self.actions or {}).items() if not count.taken)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "distinct_states": self.distinct_states,
            "states_generated": self.states_generated,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "violations": [v.to_json() for v in self.violations],
        }
        if self.log_path is not None:
            data["log"] = str(self.log_path)
        if self.collision_probability is not None:
            data["collision_probability"] = self.collision_probability
        if self.stopped is not None:
            data["stopped"] = self.stopped
        if self.actions is not None:
            data["actions"] = {
                name: {"transitions": count.transitions, "distinct_states": count.distinct_states}
                for name, count in self.actions.items()
            }
            data["never_taken"] = list(self.never_taken)
        if self.unmatched_actions:
            data["unmatched_actions"] = list(self.unmatched_actions)
        return data


@attrs.frozen
class Comparison:
    agree: bool
    reasons: tuple[str, ...]  # why they disagree; empty when they agree
    states_compared: bool
    actions_compared: bool = False  # whether the actions each took were (both counted them, over a whole search)


@attrs.frozen
class ModelCheck:
    """A model: a spec, its constants, and what to check."""

    spec_name: str
    constants: Mapping[str, Any] = attrs.field(factory=dict)
    check_deadlock: bool = False
    liveness: bool = False
    #: names of the invariants and action properties to check; None for all of them
    invariants: tuple[str, ...] | None = None
    #: reduce by the spec's symmetry: the explorer fingerprints ``spec.symmetry``, TLC takes ``tla_view`` as VIEW
    symmetry: bool = False

    def __attrs_post_init__(self) -> None:
        if self.symmetry:
            spec_type = catalog.find(self.spec_name).python
            if spec_type.tla_view is None:
                raise ValueError(f"spec {self.spec_name} declares no symmetry: its processes are not interchangeable")

    def build(self) -> Spec[Any]:
        return catalog.find(self.spec_name).python(**self.constants)

    def checked(self, spec: Spec[Any]) -> tuple[list[str], list[str]]:
        """The invariants and the action properties this model checks, in the spec's order."""
        invariants = [inv.name for inv in spec.invariants]
        properties = [p.name for p in spec.action_properties]
        if self.invariants is None:
            return invariants, properties
        unknown = sorted(set(self.invariants) - set(invariants) - set(properties))
        if unknown:
            raise KeyError(f"spec {spec.name} has no invariant or property {', '.join(unknown)}")
        return [n for n in invariants if n in self.invariants], [n for n in properties if n in self.invariants]


def _freeze(state: Mapping[str, Any]) -> frozenset[tuple[str, Any]]:
    return frozenset(state.items())


def run_python(
    model: ModelCheck,
    *,
    keep_states: bool = False,
    progress: Callable[[int, int, int, int], None] | None = None,
    symmetry: bool = False,
    max_memory: int | None = None,
    workers: int = 1,
    spill_above: int | None = None,
) -> EngineResult:
    """Explore the model with the Python explorer (``max_memory``: stop past that many bytes; ``workers``:
    processes, when whole states are not kept; ``spill_above``: the resident bytes past which a process's
    frontier goes to disk, by default half its share of the memory)."""
    spec = model.build()
    invariants, properties = model.checked(spec)
    options: dict[str, Any] = {
        "check_deadlock": model.check_deadlock,
        "keep_states": keep_states,
        "progress": progress,
        "symmetry": symmetry or model.symmetry,
        "invariants": invariants + properties,
        "max_memory": max_memory,
        "spill_above": spill_above,
    }
    if workers > 1 and not keep_states:
        result = ParallelExplorer(spec, workers=workers, **options).run()
    else:
        result = Explorer(spec, **options).run()
    violations = tuple(
        ViolationReport(
            v.kind,
            v.name,
            v.message,
            tuple(
                {
                    "action": step.step.action,
                    "params": {k: _param(v) for k, v in step.step.params},
                    "state": spec.to_tla(step.state),
                }
                for step in v.trace
            ),
        )
        for v in result.violations
    )
    states = frozenset(_freeze(spec.to_tla(s)) for s in result.states) if result.states is not None else None
    return EngineResult(
        "python",
        result.distinct_states,
        result.states_generated,
        result.depth,
        result.seconds,
        violations,
        result.complete,
        states,
        collision_probability=None if keep_states else result.collision_probability,
        stopped=result.stopped,
        actions=result.actions,
    )


def _param(value: Any) -> Any:
    if attrs.has(type(value)):
        return {f.name: getattr(value, f.name) for f in attrs.fields(type(value))}
    return value


def write_tlc_config(model: ModelCheck, path: Path) -> Path:
    """Write TLC's .cfg for the model: its constants, invariants and properties."""
    spec = model.build()
    lines = ["\\* Written by ledgerspec from the Python spec's constants and properties.", "CONSTANTS"]
    for name, value in spec.values.items():
        lines.append(f"    {name} = {format_value(value)}")
    lines.append("SPECIFICATION " + ("LiveSpec" if model.liveness else "Spec"))
    invariants, properties = model.checked(spec)
    if invariants:
        lines.append("INVARIANTS")
        lines += [f"    {name}" for name in invariants]
    properties += list(spec.liveness) if model.liveness else []
    if properties:
        lines.append("PROPERTIES")
        lines += [f"    {name}" for name in properties]
    if model.symmetry:
        lines.append(f"VIEW {spec.tla_view}")
    path.write_text("\n".join(lines) + "\n")
    return path


def run_tlc(
    model: ModelCheck,
    *,
    keep_states: bool = False,
    workers: int = 1,
    work_dir: Path | None = None,
    progress: Callable[[int, int, int, int], None] | None = None,
    coverage: bool = True,
) -> EngineResult:
    """Check the model with TLC, in this process through JPype.

    TLC's config, its output (``tlc.log``) and, with ``keep_states``, its dump of the states go to
    ``work_dir``, which is kept and named by the result's ``log_path``; by default they go to a
    temporary directory that is removed before this returns, whatever the outcome, and the result
    names no log. ``progress(distinct, generated, depth, queue)`` is called with TLC's counts as it reports
    them, once a minute. With ``coverage`` TLC counts how often it took each action (and runs up to half as
    slow again), read as the spec's actions (:mod:`~ledgerspec.tools.model_checking.tlc.coverage`).
    """
    from ledgerspec.tools.model_checking.tlc import runner as tlc  # JPype is loaded only when TLC runs
    from ledgerspec.tools.model_checking.tlc.coverage import spec_action_coverage
    from ledgerspec.tools.model_checking.tlc.output import TlcSpecError

    entry = catalog.find(model.spec_name)
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"ledgerspec-{model.spec_name}-")))
        else:
            directory = Path(work_dir)
            directory.mkdir(parents=True, exist_ok=True)
        cfg = write_tlc_config(model, directory / f"MC{entry.tla_module}.cfg")
        started = time.perf_counter()
        try:
            result = tlc.run_tlc(
                entry.tla_path,
                cfg,
                workers=workers,
                check_deadlock=model.check_deadlock,
                dump_states=keep_states,
                log_path=directory / "tlc.log",
                library=[catalog.tla_library()],
                progress=progress,
                coverage=coverage,
            )
        except TlcSpecError as exc:
            if work_dir is not None:
                raise
            # The config and the log named in the message are about to go: name the spec and what TLC said.
            raise TlcSpecError(
                f"TLC reported an error in {entry.tla_path.name}:\n{exc.tlc_output}\n"
                f"(spec: {entry.tla_path}; TLC's config and output were in a temporary directory, now removed)",
                spec=exc.spec,
                cfg=exc.cfg,
                tlc_output=exc.tlc_output,
                log_path=None,
            ) from None
        seconds = time.perf_counter() - started
        states = frozenset(_freeze(s) for s in result.states()) if keep_states else None
    spec = model.build()
    liveness = list(spec.liveness) if model.liveness else []
    actions: dict[str, ActionCount] | None = None
    unmatched: tuple[str, ...] = ()
    if result.coverage:
        counted = spec_action_coverage(
            result.coverage, [a.name for a in spec.actions], [entry.tla_path.parent, catalog.tla_library()]
        )
        actions = {name: ActionCount(steps, first) for name, (steps, first) in counted.counts.items()}
        unmatched = counted.unmatched
    violations = tuple(
        ViolationReport(
            v.kind,
            # TLC does not say which temporal property failed; with one checked, it is that one.
            v.name or (liveness[0] if v.kind == "liveness" and len(liveness) == 1 else v.kind),
            v.message,
            tuple({"action": step.action, "state": dict(step.state)} for step in v.trace),
        )
        for v in result.violations
    )
    return EngineResult(
        "tlc",
        result.distinct_states,
        result.states_generated,
        result.depth,
        seconds,
        violations,
        not violations,
        states,
        result.log_path if work_dir is not None else None,
        collision_probability=result.collision_probability,
        actions=actions,
        unmatched_actions=unmatched,
    )


def compare(python: EngineResult, tlc: EngineResult) -> Comparison:
    """Do the two engines tell the same story about the model?"""
    reasons = []
    py_names = sorted({v.invariant for v in python.violations})
    tlc_names = sorted({v.invariant for v in tlc.violations})
    if py_names != tlc_names:
        reasons.append(f"violations differ: python {py_names or 'none'}, TLC {tlc_names or 'none'}")
    compared = actions_compared = False
    if not py_names and not tlc_names:
        if python.distinct_states != tlc.distinct_states:
            reasons.append(f"distinct states differ: python {python.distinct_states}, TLC {tlc.distinct_states}")
        actions_compared = python.actions is not None and tlc.actions is not None and python.complete and tlc.complete
        if actions_compared:
            reasons += _actions_differ(python, tlc)
        if python.states is not None and tlc.states is not None:
            compared = True
            only_py, only_tlc = python.states - tlc.states, tlc.states - python.states
            if only_py or only_tlc:
                reasons.append(
                    f"{len(only_py)} states only the python explorer reached, {len(only_tlc)} only TLC reached; "
                    f"for example {_example(only_py or only_tlc)}"
                )
    return Comparison(not reasons, tuple(reasons), compared, actions_compared)


def _actions_differ(python: EngineResult, tlc: EngineResult) -> list[str]:
    """Why the sets of actions the engines took differ, if they do. (How often each took an action may differ
    where TLC generates a step twice, and which states an action reached first depends on the order the engines
    try the actions in.)"""
    only_python, only_tlc = python.taken - tlc.taken, tlc.taken - python.taken
    if not only_python and not only_tlc:
        return []
    order = list(python.actions or {})
    parts = [
        f"only {engine} took {', '.join(sorted(names, key=order.index))}"
        for engine, names in (("the python explorer", only_python), ("TLC", only_tlc))
        if names
    ]
    unmatched = f" (TLC also counted actions that match no single spec action: {', '.join(tlc.unmatched_actions)})"
    return ["actions taken differ: " + "; ".join(parts) + (unmatched if tlc.unmatched_actions else "")]


def _example(states: frozenset[frozenset[tuple[str, Any]]]) -> str:
    state = min(states, key=repr)
    return "[" + ", ".join(f"{k} = {format_value(v)}" for k, v in sorted(state)) + "]"


@attrs.frozen
class Scale:
    """How a model's constants compare with the models of its spec known to finish here: those both engines
    check (``spec/<name>/<name>_models.py``), the seeded bugs and the explored models."""

    beyond: tuple[tuple[str, int, int], ...]  # (constant, its value, the largest value among the known models)
    largest: CheckedModel | None  # the known model with the most states

    @property
    def far_beyond(self) -> bool:
        """Some constant is more than twice, plus one, the largest known value: a state space that grows
        exponentially in it is then out of any measure taken here."""
        return any(value > 2 * known + 1 for _, value, known in self.beyond)

    def reason(self, spec_name: str) -> str:
        far = [(n, v, k) for n, v, k in self.beyond if v > 2 * k + 1]
        values = ", ".join(f"{n}={v:,}" for n, v, _ in far)
        known = ", ".join(f"{n} at most {k}" for n, _, k in far)
        largest = (
            f"; the largest has {self.largest.distinct_states:,} states ({self.largest.name})"
            if self.largest is not None
            else ""
        )
        return (
            f"{values} lies far beyond the models of {spec_name} known to finish here ({known}{largest}). The "
            "state space grows exponentially with such constants: this run may not end, or may exhaust the memory"
        )


def scale_of(model: ModelCheck) -> Scale:
    """Compare ``model``'s integer constants with those of the known models of its spec (:class:`Scale`)."""
    entry = catalog.find(model.spec_name)
    spec = model.build()
    known: list[Mapping[str, Any]] = [
        *(m.constants for m in entry.models.checked),
        *(b.constants for b in entry.models.seeded_bugs),
        *entry.models.explored.values(),
    ]
    beyond = []
    for constant in entry.python.constants:
        if constant.type is not int:
            continue
        largest = max([constant.default, *(k[constant.name] for k in known if constant.name in k)])
        value = spec.values[constant.name]
        if value > largest:
            beyond.append((constant.name, value, largest))
    checked = max(entry.models.checked, key=lambda m: m.distinct_states, default=None)
    return Scale(tuple(beyond), checked)
