"""``ledgerspec simulate ledger|managed-ledger|topic|autorecovery``: random runs of the reference engine, as traces.

``ledger``: each run is a :class:`~ledgerspec.reference.ledger.simulation.LedgerSimulation`
of ``--steps`` steps chosen by a generator seeded with the run's number and
``--seed``: the same arguments write the same files, byte for byte. The
model's sizes and fault bounds are the ledger spec's constants (``--const``),
so ``ledgerspec check DIR``, which reads them from the ``manifest.json``
written beside the traces (docs/trace-format.md), must find every trace of
the correct engine conforming, and a mutant's (``--mutant``) violating.

``managed-ledger``: each run is a topic and its durable cursor on a broker
that crashes (also at each persistence step of the cursor) and restarts,
with failed BookKeeper calls, failed cursor-znode writes and lost cursor
ledgers (:mod:`ledgerspec.reference.managed_ledger.simulation`), checked against the
cursor spec (``--spec cursor``). Its sizes are the cursor spec's constants
``MaxEntriesPerLedger``, ``MetadataMaxEntriesPerLedger`` and ``BatchSize``;
its mutants the managed ledger's.

``topic``: each run is a topic partition, its producers (with deduplication)
and durable subscriptions on a broker that crashes (also before an add is
written and after) and restarts, with dropped producer connections, failed
ledger creations, rollovers by size and age, and the skip and trim of
consumed ledgers (:mod:`ledgerspec.reference.managed_ledger.topic_simulation`),
checked against the managed-ledger spec (``--spec managed_ledger``), in full
observation or as its producers and consumers see it (``--mode client``). Its
sizes and bounds are the managed-ledger spec's constants that a topic run
sets, and ``MaxCrashes``; its mutants the managed ledger's trimming and the
topic's deduplication.

``autorecovery``: each run is one closed ledger on bookies that stop, come
back and lose their disks, with an auditor and replication workers that may
crash (:mod:`ledgerspec.reference.autorecovery.trace`), checked against the
autorecovery spec (``--spec autorecovery``, modes ``full`` and ``metadata``).
Its sizes and bounds are the autorecovery spec's constants; its mutants the
auditor's and the workers'.

Exit status: 0 the runs were written; 1 a reader read, up to the LAC, an
entry other than the one written; 2 bad options.
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.manifest import manifest_json, write_manifest
from ledgerspec.reference.autorecovery import MUTANTS as AUTORECOVERY_MUTANTS
from ledgerspec.reference.autorecovery import SPEC_CONSTANTS as AUTORECOVERY_CONSTANTS
from ledgerspec.reference.autorecovery import RunConfig as AutorecoveryConfig
from ledgerspec.reference.autorecovery.trace import simulate_autorecovery_traces
from ledgerspec.reference.ledger import FAULTS, MUTANTS, SimulationConfig
from ledgerspec.reference.ledger import SPEC_CONSTANTS as LEDGER_CONSTANTS
from ledgerspec.reference.ledger.trace import simulate_traces
from ledgerspec.reference.managed_ledger import MUTANTS as ML_MUTANTS
from ledgerspec.reference.managed_ledger import RunConfig
from ledgerspec.reference.managed_ledger.refinement import spec_for_config
from ledgerspec.reference.managed_ledger.run import SPEC_CONSTANTS as CURSOR_CONSTANTS
from ledgerspec.reference.managed_ledger.simulation import simulate_cursor_traces
from ledgerspec.reference.managed_ledger.topic_run import SPEC_CONSTANTS as TOPIC_CONSTANTS
from ledgerspec.reference.managed_ledger.topic_run import TopicRunConfig
from ledgerspec.reference.managed_ledger.topic_simulation import MUTANTS as TOPIC_MUTANTS
from ledgerspec.reference.managed_ledger.topic_simulation import simulate_topic_traces, spec_for, with_mutant
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger_trace import TRACE as TOPIC_TRACE
from ledgerspec.spec.values import format_value
from ledgerspec.spec.vocabulary import ndjson
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_VIOLATION, UsageError, parse_constants, runs_progress
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["autorecovery_run_config", "cursor_run_config", "register", "simulation_config", "topic_run_config"]

# Steps per run allowed without --force: a ledger run of 4,000 steps took 2.8 s, of 20,000 steps 37 s (its
# cost per step grows with the run's history), so 100,000 would take many minutes without a word.
MAX_STEPS = 10_000

SIMULATIONS = ("ledger", "managed-ledger", "topic", "autorecovery")
# The observation modes each simulation records, by the names of its spec's trace mapping.
MODES = {
    "ledger": ("full", "client"),
    "managed-ledger": ("full", "client"),
    "topic": ("full", "client"),
    "autorecovery": ("full", "metadata"),
}


def register(commands: Any) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="random runs of the reference engine, written as NDJSON traces",
        description="Run the reference engine on an in-process cluster with seeded random steps and faults; "
        "write each run as a trace (docs/trace-format.md) for `ledgerspec check`.",
    )
    simulate.add_argument("spec", metavar="SPEC", help="what to simulate: " + ", ".join(SIMULATIONS))
    simulate.add_argument("--seed", type=int, default=0, help="seed of the runs (default 0)")
    simulate.add_argument(
        "--steps",
        type=int,
        default=200,
        help=f"steps per run (default 200; more than {MAX_STEPS:,} only with --force: a ledger run's time grows "
        "faster than its steps)",
    )
    simulate.add_argument("--force", action="store_true", help=f"allow more than {MAX_STEPS:,} steps per run")
    simulate.add_argument("--traces", type=int, default=1, help="runs, one trace each (default 1)")
    simulate.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"ledger: faults allowed, comma-separated (default all: {','.join(FAULTS)})",
    )
    simulate.add_argument(
        "--mode",
        default="full",
        help="observation mode of the traces: full (default), or client (ledger, managed-ledger, topic) or metadata "
        "(autorecovery)",
    )
    simulate.add_argument(
        "--mutant",
        help="a seeded bug: of the client (ledger: "
        + ", ".join(MUTANTS)
        + ") or of the managed ledger (managed-ledger: "
        + ", ".join(ML_MUTANTS)
        + ") or of the topic (topic: "
        + ", ".join(TOPIC_MUTANTS)
        + ") or of autorecovery (autorecovery: "
        + ", ".join(AUTORECOVERY_MUTANTS)
        + ")",
    )
    simulate.add_argument("--const", action="append", default=[], metavar="NAME=VALUE", help="a spec constant")
    simulate.add_argument("--out", required=True, metavar="DIR", help="directory for the traces and manifest.json")
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.set_defaults(run=_simulate)


def simulation_config(constants: dict[str, str], faults: str, mutant: str | None) -> SimulationConfig:
    """The simulation's configuration from ``--const``, ``--faults`` and ``--mutant``; :class:`UsageError` if bad."""
    if "Bug" in constants:
        raise UsageError("the engine takes no Bug constant: a seeded bug of the engine is a --mutant")
    spec_values = LedgerSpec(**constants).values  # unknown names, bad types and impossible quorums fail here
    chosen = [f.strip() for f in faults.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in FAULTS]
    if unknown:
        raise UsageError(f"unknown fault {', '.join(unknown)}; faults: {', '.join(FAULTS)}")
    if mutant is not None and mutant not in MUTANTS:
        raise UsageError(f"unknown mutant {mutant!r}; mutants: {', '.join(MUTANTS)}")
    config = SimulationConfig(faults=frozenset(chosen), mutant=mutant)
    return LEDGER_CONSTANTS.configure(config, {name: spec_values[name] for name in constants})


def _simulate(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.spec.replace("_", "-") in SIMULATIONS:  # (managed_ledger, as model-check spells it, is managed-ledger)
        args.spec = args.spec.replace("_", "-")
    if args.spec not in SIMULATIONS:
        raise UsageError(f"no simulation of spec {args.spec!r}; simulations: {', '.join(SIMULATIONS)}")
    if args.mode not in MODES[args.spec]:
        raise UsageError(f"unknown mode {args.mode!r} for {args.spec}; modes: {', '.join(MODES[args.spec])}")
    for name in ("steps", "traces"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.steps > MAX_STEPS and not args.force:
        raise UsageError(
            f"--steps {args.steps:,} is more than {MAX_STEPS:,}: a run's time grows faster than its steps (a ledger "
            f"run of 4,000 steps takes about 3 s, of 20,000 about 40 s, of 100,000 many minutes); more runs "
            "(--traces) explore more than longer ones; add --force to run it anyway"
        )
    if args.spec == "managed-ledger":
        return _simulate_managed_ledger(args, out, err)
    if args.spec == "autorecovery":
        return _simulate_autorecovery(args, out, err)
    if args.spec == "topic":
        return _simulate_topic(args, out, err)
    config = simulation_config(parse_constants(args.const), args.faults, args.mutant)
    directory = Path(args.out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write to {directory}: {exc.strerror}") from None
    constants = config.spec_constants()
    runs: list[dict[str, Any]] = []
    with runs_progress(err, quiet=args.json) as progress:
        task = progress.add_task("ledger runs", total=args.traces)
        for trace_id, lines, sim in simulate_traces(
            config, seed=args.seed, steps=args.steps, traces=args.traces, mode=args.mode
        ):
            path = directory / f"{trace_id}.ndjson"
            path.write_bytes(ndjson(lines))
            runs.append(
                {
                    "trace": trace_id,
                    "file": path.name,
                    "events": len(lines),
                    "engine_events": len(sim.events),
                    "adds_acknowledged": len(sim.acknowledged),
                    "ledger": sim.ledgers.read(sim.ledger_id).metadata.state.name,
                    "reads": sim.reads,
                    "read_problems": list(sim.read_problems),
                }
            )
            progress.advance(task)
    manifest = manifest_json(
        spec="ledger",
        mode=args.mode,
        constants=constants,
        files=[run["file"] for run in runs],
        traces=runs,
        seed=args.seed,
        steps=args.steps,
        faults=sorted(config.faults),
        mutant=config.mutant,
        check=shlex.join(["ledgerspec", "check", str(directory)]),
    )
    write_manifest(directory, manifest)
    problems = [p for run in runs for p in run["read_problems"]]
    if args.json:
        print(json.dumps(manifest, indent=2))
    else:
        _print(out, manifest)
    return EXIT_VIOLATION if problems else EXIT_OK


def _print(out: Console, manifest: dict[str, Any]) -> None:
    constants = " ".join(f"{k}={format_value(v)}" for k, v in manifest["constants"].items())
    mutant = f", mutant {manifest['mutant']}" if manifest["mutant"] else ""
    out.print(
        f"[bold]ledger[/bold] ({manifest['mode']} mode, seed {manifest['seed']}, faults "
        f"{','.join(manifest['faults']) or 'none'}{mutant}) {escape(constants)}",
        highlight=False,
    )
    table = Table("trace", "events", "adds acked", "ledger", "reads", "read problems")
    for run in manifest["traces"]:
        bad = len(run["read_problems"])
        table.add_row(
            escape(run["trace"]),
            f"{run['events']:,}",
            str(run["adds_acknowledged"]),
            run["ledger"],
            str(run["reads"]),
            f"[red]{bad}[/red]" if bad else "0",
        )
    out.print(table)
    for run in manifest["traces"]:
        for problem in run["read_problems"]:
            out.print(f"[red]{escape(run['trace'])}:[/red] {escape(problem)}", highlight=False)
    out.print(f"check them with: {escape(manifest['check'])}", highlight=False, soft_wrap=True)


def cursor_run_config(constants: dict[str, str], mutant: str | None) -> RunConfig:
    """A managed-ledger run's configuration from ``--const`` and ``--mutant``; :class:`UsageError` if bad."""
    unknown = sorted(set(constants) - set(CURSOR_CONSTANTS.names))
    if unknown:
        raise UsageError(
            f"a managed-ledger run takes the constants {', '.join(CURSOR_CONSTANTS.names)}; not {', '.join(unknown)}"
        )
    values = spec_for_config(RunConfig(), **constants).values  # bad types and values fail here
    if mutant is not None and mutant not in ML_MUTANTS:
        raise UsageError(f"unknown managed-ledger mutant {mutant!r}; mutants: {', '.join(ML_MUTANTS)}")
    return CURSOR_CONSTANTS.configure(RunConfig(mutant=mutant), {name: values[name] for name in constants})


def _simulate_managed_ledger(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.faults != ",".join(FAULTS):
        raise UsageError("--faults is for ledger runs: a managed-ledger run takes every fault of the cursor spec")
    config = cursor_run_config(parse_constants(args.const), args.mutant)
    constants = {name: value for name, value in spec_for_config(config).values.items() if name != "Bug"}
    spent = {"MaxFaults": 0, "MaxLedgerLoss": 0}  # the check's bounds on faults no client sees: the most a run spent

    def runs(scratch: str) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]]]]:
        for run in simulate_cursor_traces(
            config, scratch, seed=args.seed, steps=args.steps, traces=args.traces, modes=(args.mode,)
        ):
            for name in spent:
                spent[name] = max(spent[name], run.bounds[name])
            yield run.trace_id, run.lines
        constants.update(spent)  # before the manifest is written, after the last run

    return _write_runs(
        args,
        out,
        err,
        SpecRuns(
            "cursor",
            "managed ledger",
            constants,
            config.mutant,
            {
                "acks": "ConsumerAcks",
                "crashes": "BrokerCrashes",
                "restores": "CursorRecovers",
                "trims": "TrimConsumedLedgers",
            },
        ),
        runs,
    )


@attrs.frozen
class SpecRuns:
    """What a simulation of runs checked against ``spec`` writes: its manifest and the events it counts per run."""

    spec: str
    title: str
    constants: dict[str, Any]  # the spec constants the check command passes
    mutant: str | None
    counts: dict[str, str]  # column of the manifest and the table -> the event type it counts


def _write_runs(
    args: argparse.Namespace,
    out: Console,
    err: Console,
    what: SpecRuns,
    simulate: Callable[[str], Iterable[tuple[str, dict[str, list[dict[str, Any]]]]]],
) -> int:
    """Run ``simulate`` with a scratch directory for the bookies' files; write each trace of ``args.mode``, the
    manifest (with the ``ledgerspec check`` command that judges them), and print it."""
    directory = Path(args.out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write to {directory}: {exc.strerror}") from None
    recorded: list[tuple[str, dict[str, list[dict[str, Any]]]]] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"ledgerspec-{what.spec}-") as scratch,
        runs_progress(err, quiet=args.json) as progress,
    ):
        task = progress.add_task(f"{what.title} runs", total=args.traces)
        for one in simulate(scratch):
            recorded.append(one)
            progress.advance(task)
    runs: list[dict[str, Any]] = []
    for trace_id, lines in recorded:
        path = directory / f"{trace_id}.ndjson"
        path.write_bytes(ndjson(lines[args.mode]))
        kinds = [line["type"] for line in lines[args.mode]]
        counts = {column: kinds.count(kind) for column, kind in what.counts.items()}
        runs.append({"trace": trace_id, "file": path.name, "events": len(kinds), **counts})
    manifest = manifest_json(
        spec=what.spec,
        mode=args.mode,
        constants=what.constants,
        files=[run["file"] for run in runs],
        traces=runs,
        seed=args.seed,
        steps=args.steps,
        mutant=what.mutant,
        check=shlex.join(["ledgerspec", "check", str(directory)]),
    )
    write_manifest(directory, manifest)
    if args.json:
        print(json.dumps(manifest, indent=2))
        return EXIT_OK
    mutant = f", mutant {what.mutant}" if what.mutant else ""
    out.print(f"[bold]{what.title}[/bold] ({args.mode} mode, seed {args.seed}{mutant})", highlight=False)
    columns = ("events", *what.counts)
    table = Table("trace", *(c.replace("_", " ") for c in columns))
    for run in runs:
        table.add_row(escape(run["trace"]), *(f"{run[k]:,}" for k in columns))
    out.print(table)
    out.print(f"check them with: {escape(manifest['check'])}", highlight=False, soft_wrap=True)
    return EXIT_OK


def autorecovery_run_config(constants: dict[str, str], mutant: str | None) -> AutorecoveryConfig:
    """An autorecovery run's configuration from ``--const`` and ``--mutant``; :class:`UsageError` if bad."""
    # Not Segments: the simulated ledger is written with one segment.
    settable = [name for name in AUTORECOVERY_CONSTANTS.names if name != "Segments"]
    unknown = sorted(set(constants) - set(settable))
    if unknown:
        raise UsageError(f"an autorecovery run takes the constants {', '.join(settable)}; not {', '.join(unknown)}")
    defaults = AutorecoveryConfig().spec_constants()
    values = AutorecoverySpec(**{**defaults, **constants}).values  # bad types and impossible quorums fail here
    if mutant is not None and mutant not in AUTORECOVERY_MUTANTS:
        raise UsageError(f"unknown autorecovery mutant {mutant!r}; mutants: {', '.join(AUTORECOVERY_MUTANTS)}")
    try:
        return AUTORECOVERY_CONSTANTS.configure(
            AutorecoveryConfig(mutant=mutant), {name: values[name] for name in constants}
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _simulate_autorecovery(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.faults != ",".join(FAULTS):
        raise UsageError("--faults is for ledger runs: an autorecovery run takes every fault of its spec")
    config = autorecovery_run_config(parse_constants(args.const), args.mutant)
    counts = {
        "bookie_stops": "BookieStops",
        "auditor_checks": "AuditorChecksBookies",
        "bookies_replaced": "WorkerUpdatesEnsemble",
        "worker_crashes": "WorkerCrashes",
    }
    return _write_runs(
        args,
        out,
        err,
        SpecRuns("autorecovery", "autorecovery", config.spec_constants(), config.mutant, counts),
        lambda scratch: simulate_autorecovery_traces(
            config, scratch, seed=args.seed, steps=args.steps, traces=args.traces, modes=(args.mode,)
        ),
    )


def topic_run_config(constants: dict[str, str], mutant: str | None) -> tuple[TopicRunConfig, int]:
    """A topic run's configuration and its bound on crashes from ``--const`` and ``--mutant``; :class:`UsageError`
    if bad."""
    settable = [*TOPIC_CONSTANTS.names, "MaxCrashes"]
    unknown = sorted(set(constants) - set(settable))
    if unknown:
        raise UsageError(f"a topic run takes the constants {', '.join(settable)}; not {', '.join(unknown)}")
    defaults = spec_for(TopicRunConfig(), 2)
    values = type(defaults)(**{**defaults.values, **constants}).values  # bad types and values fail here
    if mutant is not None and mutant not in TOPIC_MUTANTS:
        raise UsageError(f"unknown topic mutant {mutant!r}; mutants: {', '.join(TOPIC_MUTANTS)}")
    chosen = {name: values[name] for name in constants if name != "MaxCrashes"}
    return with_mutant(TOPIC_CONSTANTS.configure(TopicRunConfig(), chosen), mutant), values["MaxCrashes"]


def _simulate_topic(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.faults != ",".join(FAULTS):
        raise UsageError("--faults is for ledger runs: a topic run takes every fault of the managed-ledger spec")
    config, max_crashes = topic_run_config(parse_constants(args.const), args.mutant)
    constants = {name: value for name, value in spec_for(config, max_crashes).values.items() if name != "Bug"}
    counts = {
        "acks": "BookKeeperCompletesAdd",
        "rollovers": "LedgerRollsOver",
        "crashes": "BrokerCrashes",
        "trims": "TrimConsumedLedgers",
    }
    mode = TOPIC_TRACE.mode(args.mode)
    counts = {column: action for column, action in counts.items() if action not in mode.hidden}  # none logged
    return _write_runs(
        args,
        out,
        err,
        SpecRuns("managed_ledger", "topic", constants, args.mutant, counts),
        lambda scratch: simulate_topic_traces(
            config,
            scratch,
            seed=args.seed,
            steps=args.steps,
            traces=args.traces,
            max_crashes=max_crashes,
            modes=(args.mode,),
        ),
    )
