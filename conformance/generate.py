"""Traces from random walks of a Python spec, in the trace format: test input for the checker.

A walk starts in an initial state and takes, at each step, one of the
enabled steps chosen by a seeded ``random.Random`` (the spec's action order
is deterministic, so a seed gives the same walk on every machine). It is
written in an observation mode of the spec's trace mapping: steps the mode
hides are left out, each event is logged by the process the mode names, and
it reports the observable values the step changed (``observe="changed"``),
all of them (``"all"``), or none. Traces of a spec built with a seeded
``Bug`` are how tests show that the checker catches that bug.

Ordering: each process numbers its own events (``seq``). With
``clocks=True`` each event also carries a vector clock; without, ``seq``
is a Lamport clock, so the merge restores the walk's order either way. The
clocks say each event depends on every earlier one: a walk is one
interleaving and the spec does not say which steps commute.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.spec.codecs import canonical_bytes
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import INIT, ObservationMode, TraceMapping, mapping_for
from ledgerspec.spec.vocabulary import trace_line

__all__ = ["Walk", "WalkStep", "random_walk", "trace_events", "write_ndjson"]


@attrs.frozen
class WalkStep:
    action: str  # Init for the first step
    args: tuple[Any, ...]
    state: Any  # the state after the step


Walk = tuple[WalkStep, ...]


def random_walk(
    spec: Spec[Any], rng: random.Random, max_steps: int = 40, *, weights: Mapping[str, float] | None = None
) -> Walk:
    """A behaviour of the spec: up to ``max_steps`` steps, each chosen at random among those enabled.

    ``weights`` make some actions likelier or rarer than the others (weight 1); a low weight on the
    steps that end a run (closing the ledger) gives longer walks.
    """
    inits = list(spec.init_states())
    state = inits[rng.randrange(len(inits))]
    steps = [WalkStep(INIT, (), state)]
    for _ in range(max_steps):
        options = list(spec.successors(state))
        if not options:
            break
        if weights:
            chosen = rng.choices(options, [weights.get(act.name, 1.0) for act, _, _ in options])[0]
        else:
            chosen = options[rng.randrange(len(options))]
        act, args, state = chosen
        steps.append(WalkStep(act.name, args, state))
    return tuple(steps)


def trace_events(
    spec: Spec[Any],
    walk: Walk,
    mode: str | ObservationMode,
    trace: str,
    *,
    mapping: TraceMapping | None = None,
    observe: str = "changed",
    clocks: bool = False,
    only: Collection[str] | None = None,
    omit: float = 0.0,
    rng: random.Random | None = None,
) -> list[dict[str, Any]]:
    """The events an observer in ``mode`` logs for the walk, as JSON objects (one per line).

    ``only``: report only these of the mode's observable names. ``omit``: probability that each
    observed value is left out (a log line without the LAC), drawn from ``rng``. Whatever these say, an event
    reports what the mapping requires of its action (``TraceMapping.requires``), as the format asks.
    """
    if observe not in ("changed", "all", "none"):
        raise ValueError(f"observe must be changed, all or none, not {observe!r}")
    mapping = mapping or mapping_for(spec.name)
    obs_mode = mode if isinstance(mode, ObservationMode) else mapping.mode(mode)
    names = sorted(obs_mode.observes)
    chosen = obs_mode.observes if only is None else obs_mode.observes & set(only)
    chance = rng or random.Random(0)
    events: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    previous: dict[str, bytes] = {}
    for step in walk:
        values = {n: canonical_bytes(mapping.codecs[n], mapping.observe(spec, step.state, n)) for n in names}
        if step.action != INIT and obs_mode.hides(step.action, step.args):
            continue  # a hidden step: "changed" then reports against the last logged values
        required = mapping.required(step.action, obs_mode) if step.action != INIT else frozenset()
        if observe == "all":
            shown = [n for n in names if n in chosen]
        elif observe == "changed":
            shown = [n for n in names if n in chosen and values[n] != previous.get(n)]
        else:
            shown = []
        previous = values
        process = obs_mode.logged_by(step.action, step.args)
        counts[process] = counts.get(process, 0) + 1
        params = (
            (mapping.encode_params(step.action, step.args, obs_mode) or None)
            if step.action != INIT and step.args
            else None
        )
        kept = [n for n in shown if n not in required and not (omit and chance.random() < omit)]
        observed = {n: orjson.loads(values[n]) for n in sorted({*kept, *required})}
        seq = counts[process] if clocks else len(events) + 1
        event = trace_line(trace, process, seq, step.action, params, observed)
        if clocks:
            event["clock"] = dict(counts)
        events.append(event)
    return events


def write_ndjson(path: Path, traces: Iterator[list[dict[str, Any]]] | list[list[dict[str, Any]]]) -> int:
    """Write traces, one event per line; the number of events written."""
    count = 0
    with open(path, "wb") as f:
        for events in traces:
            for event in events:
                f.write(orjson.dumps(event))
                f.write(b"\n")
                count += 1
    return count
