"""``ledgerspec model-check SPEC``: explore a spec with the Python explorer, TLC, or both."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledgerspec.spec import catalog
from ledgerspec.spec.models import CheckedModel
from ledgerspec.spec.values import format_value
from ledgerspec.tools.cli.commands.base import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    parse_constants,
    runs_progress,
)
from ledgerspec.tools.model_checking.explorer.frontier import resident_bytes
from ledgerspec.tools.model_checking.model_check import (
    Comparison,
    EngineResult,
    ModelCheck,
    compare,
    run_python,
    run_tlc,
    scale_of,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["parse_size", "register"]


def register(commands: Any) -> None:
    mc = commands.add_parser("model-check", help="explore a spec with the Python explorer, TLC, or both")
    mc.add_argument("spec", help="spec name: " + ", ".join(catalog.SPECS))
    mc.add_argument("--engine", choices=("python", "tlc", "both"), default="both")
    mc.add_argument(
        "--preset",
        metavar="NAME",
        help="start from a spec's named constants: defaults, or faults, small and taking every action of the spec "
        "(`ledgerspec specs` lists them); --const then sets single constants on top",
    )
    mc.add_argument("--const", action="append", default=[], metavar="NAME=VALUE", help="set a constant (repeatable)")
    mc.add_argument("--json", action="store_true", help="print one JSON object")
    mc.add_argument(
        "--workers",
        type=int,
        default=None,
        help="explorer processes (when states are not compared one by one) and TLC worker threads; by default the "
        "explorer takes every core and TLC one thread, so that its counterexamples are the shortest",
    )
    mc.add_argument("--deadlock", action="store_true", help="report states with no enabled action, as TLC does")
    mc.add_argument("--liveness", action="store_true", help="also check the spec's liveness properties (TLC)")
    mc.add_argument("--no-state-compare", action="store_true", help="with both engines, compare counts only")
    mc.add_argument(
        "--no-coverage",
        action="store_true",
        help="leave out TLC's count of the actions it took, which makes it up to half as slow again (the explorer "
        "counts them at no cost worth naming)",
    )
    mc.add_argument(
        "--symmetry",
        action="store_true",
        help="reduce by the spec's symmetry: one state per orbit (TLC: the spec's orbit as VIEW); the engines then "
        "compare counts",
    )
    mc.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="stop the Python explorer once it holds more memory than this (512M, 4G): the run is then incomplete",
    )
    mc.add_argument(
        "--keep-work",
        metavar="DIR",
        help="keep TLC's config, its output (tlc.log) and its state dump in DIR; by default they go to a temporary "
        "directory that is removed when the command ends",
    )
    mc.add_argument(
        "--force",
        action="store_true",
        help="run constants far beyond the models known to finish here (more than twice their largest value)",
    )
    mc.set_defaults(run=_model_check)


def _model_check(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        entry = catalog.find(args.spec)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    args.spec = entry.name  # (managed-ledger is managed_ledger)
    try:
        preset = entry.models.preset(args.preset) if args.preset is not None else {}
    except KeyError as exc:
        raise UsageError(f"spec {args.spec}: {exc.args[0]}") from None
    try:
        model = ModelCheck(
            args.spec,
            {**preset, **parse_constants(args.const)},
            check_deadlock=args.deadlock,
            liveness=args.liveness,
            symmetry=args.symmetry,
        )
    except ValueError as exc:
        raise UsageError(f"--symmetry: {exc}") from None
    if args.liveness and args.engine != "tlc":
        raise UsageError("--liveness needs --engine tlc: the Python explorer checks safety only")
    model.build()  # validate the constants before anything starts
    scale = scale_of(model)
    if scale.far_beyond and not args.force:
        raise UsageError(
            f"{scale.reason(args.spec)}. Add --force to run it anyway (with --max-memory to bound the explorer)"
        )
    if scale.beyond and not args.json:
        err.print(
            "note: "
            + ", ".join(f"{n}={v:,}" for n, v, _ in scale.beyond)
            + f" is beyond every model of {args.spec} checked here: its size is not known in advance",
            highlight=False,
            soft_wrap=True,
        )
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    python_workers = args.workers or os.cpu_count() or 1
    tlc_workers = args.workers or 1
    max_memory = parse_size(args.max_memory) if args.max_memory is not None else None
    keep_work = _keep_work(args.keep_work, args.engine)
    engines = ["python", "tlc"] if args.engine == "both" else [args.engine]
    # Under a view each engine keeps the first state of each orbit it finds: the orbits compare, the states not.
    compare_states = args.engine == "both" and not args.no_state_compare and not args.symmetry
    results: dict[str, EngineResult] = {}
    for engine in engines:
        if engine == "python":
            results["python"] = _with_progress(
                model, compare_states, quiet=args.json, err=err, max_memory=max_memory, workers=python_workers
            )
        else:
            results["tlc"] = _tlc_with_progress(
                model,
                compare_states,
                quiet=args.json,
                err=err,
                workers=tlc_workers,
                work_dir=keep_work,
                coverage=not args.no_coverage,
            )
            if keep_work is not None and not args.json:
                kept = "config, output and state dump" if compare_states else "config and output"
                err.print(f"TLC's {kept} are kept in {keep_work}", highlight=False)
    comparison = compare(results["python"], results["tlc"]) if len(results) == 2 else None
    if args.json:
        data: dict[str, Any] = {"spec": args.spec, "preset": args.preset, "constants": model.build().values}
        data.update({name: result.to_json() for name, result in results.items()})
        if comparison is not None:
            data["agree"] = comparison.agree
            data["states_compared"] = comparison.states_compared
            data["actions_compared"] = comparison.actions_compared
            if comparison.reasons:
                data["disagreements"] = list(comparison.reasons)
        print(json.dumps(data, indent=2))
    else:
        _print_results(out, model, args.preset, results)
        _print_actions(out, entry.models.presets, args.preset, results)
        if comparison is not None:
            _print_comparison(out, comparison)
    failed = any(r.violations for r in results.values()) or (comparison is not None and not comparison.agree)
    if failed:
        return EXIT_VIOLATION
    return EXIT_INCONCLUSIVE if any(r.stopped for r in results.values()) else EXIT_OK


def _keep_work(raw: str | None, engine: str) -> Path | None:
    """``--keep-work DIR``: a directory that exists or can be made; only TLC writes files to keep."""
    if raw is None:
        return None
    if engine == "python":
        raise UsageError("--keep-work keeps TLC's files: it needs --engine tlc or both")
    path = Path(raw)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--keep-work {raw}: not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--keep-work {raw}: cannot make the directory: {exc.strerror or exc}") from None
    return path.resolve()


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """``512M``, ``4G``, ``1024``: bytes; :class:`UsageError` for anything else."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in _UNITS else ""
    number = value[: len(value) - len(unit)]
    try:
        size = float(number) * _UNITS[unit]
    except ValueError:
        raise UsageError(f"--max-memory expects a size such as 512M or 4G, got {text!r}") from None
    if size < 2**20:
        raise UsageError(f"--max-memory {text} is below 1M: too small to hold one level of any search")
    return int(size)


def _with_progress(
    model: ModelCheck, keep_states: bool, *, quiet: bool, err: Console, max_memory: int | None, workers: int
) -> EngineResult:
    with runs_progress(err, quiet=quiet, transient=True) as progress:
        task = progress.add_task("python explorer", total=None)
        started = time.perf_counter()

        def report(distinct: int, generated: int, depth: int, queue: int) -> None:
            rate = distinct / max(time.perf_counter() - started, 1e-9)
            progress.update(
                task,
                description=f"python explorer: {distinct:,} distinct states ({rate:,.0f}/s), {generated:,} "
                f"generated, depth {depth}, {queue:,} queued, {resident_bytes() / 2**20:,.0f} MiB",
            )

        return run_python(
            model,
            keep_states=keep_states,
            progress=None if quiet else report,
            max_memory=max_memory,
            workers=workers,
        )


def _tlc_with_progress(
    model: ModelCheck,
    keep_states: bool,
    *,
    quiet: bool,
    err: Console,
    workers: int,
    work_dir: Path | None,
    coverage: bool,
) -> EngineResult:
    """TLC's run, with its progress: TLC reports its counts once a minute."""
    with runs_progress(err, quiet=quiet, transient=True) as progress:
        task = progress.add_task(f"TLC: checking {model.spec_name} ({workers} worker(s))", total=None)

        def report(distinct: int, generated: int, depth: int, queue: int) -> None:
            progress.update(
                task,
                description=f"TLC: {distinct:,} distinct states, {generated:,} generated, depth {depth}, "
                f"{queue:,} queued",
            )

        return run_tlc(
            model,
            keep_states=keep_states,
            workers=workers,
            work_dir=work_dir,
            progress=None if quiet else report,
            coverage=coverage,
        )


def _print_results(
    out: Console,
    model: ModelCheck,
    preset: str | None,
    results: dict[str, EngineResult],
) -> None:
    spec = model.build()
    out.print(
        f"[bold]{model.spec_name}[/bold] "
        + (f"(preset {escape(preset)}) " if preset is not None else "")
        + escape(" ".join(f"{k}={format_value(v)}" for k, v in spec.values.items()))
    )
    table = Table("engine", "distinct states", "generated", "depth", "seconds", "states/s", "verdict")
    for name, r in results.items():
        verdict = "[green]no violation[/green]" if not r.violations else f"[red]{r.violations[0].invariant}[/red]"
        if r.stopped is not None and not r.violations:
            verdict = "[yellow]incomplete[/yellow]"
        table.add_row(
            name,
            f"{r.distinct_states:,}",
            f"{r.states_generated:,}",
            str(r.depth),
            f"{r.seconds:.2f}",
            f"{r.states_per_second:,.0f}",
            verdict,
        )
    out.print(table)
    for name, r in results.items():
        if r.stopped is not None:
            out.print(f"[yellow]{name}: {escape(r.stopped)}[/yellow]", highlight=False)
        if r.collision_probability is not None:
            out.print(
                f"{name}: states kept as 64-bit fingerprints; the probability of a fingerprint collision is "
                f"estimated as {r.collision_probability:.1e} (TLC's optimistic calculation)",
                highlight=False,
            )
        elif r.states is not None and name == "python":
            out.print(f"{name}: whole states kept, to compare them with TLC's: none can collide", highlight=False)
    for name, r in results.items():
        for v in r.violations:
            out.print(f"\n[red bold]{name}: {v.kind} {v.invariant} violated[/red bold]: {escape(v.message)}")
            previous: dict[str, Any] = {}
            for i, step in enumerate(v.trace):
                params = step.get("params") or {}
                args = ", ".join(f"{k}={_short(x)}" for k, x in params.items())
                out.print(f"  [bold]{i}. {step['action']}{escape(f'({args})') if args else ''}[/bold]")
                for var, value in step["state"].items():
                    if previous.get(var) != value:
                        out.print(f"       {var} = {escape(format_value(value))}", highlight=False)
                previous = dict(step["state"])


def _print_comparison(out: Console, comparison: Comparison) -> None:
    if comparison.agree:
        how = "the same states" if comparison.states_compared else "the same verdicts and state counts"
        taken = ", the same actions taken" if comparison.actions_compared else ""
        out.print(f"\n[green]The engines agree[/green]: {how}{taken}.")
    else:
        out.print("\n[red]The engines disagree:[/red]")
        for reason in comparison.reasons:
            out.print(f"  - {reason}")


_ENGINE_NAMES = {"python": "the python explorer", "tlc": "TLC"}


def _print_actions(
    out: Console, presets: Mapping[str, CheckedModel], preset: str | None, results: dict[str, EngineResult]
) -> None:
    """Per action, how often each engine took it; a warning for the actions never taken, whose steps the run did
    not check at all."""
    counted = {name: r for name, r in results.items() if r.actions is not None}
    if not counted:
        return
    table = Table(
        "action",
        title="actions taken: steps, and states first reached",
        caption="which states an action reaches first depends on the order an engine tries the actions in",
        title_justify="left",
        caption_justify="left",
    )
    for name in counted:
        table.add_column(f"{name} steps", justify="right")
        table.add_column(f"{name} new states", justify="right")
    actions = next(iter(counted.values())).actions or {}
    for action in actions:
        cells = []
        for r in counted.values():
            count = (r.actions or {})[action]
            if count.taken:
                cells += [f"{count.transitions:,}", f"{count.distinct_states:,}"]
            else:
                cells += ["[yellow bold]never[/yellow bold]", ""]
        table.add_row(action, *cells)
    out.print(table)
    for name, r in counted.items():
        if r.unmatched_actions:
            out.print(
                f"{_ENGINE_NAMES[name]}: counted actions that match no single action of the spec, left out above: "
                + escape(", ".join(r.unmatched_actions)),
                highlight=False,
            )
    off = presets[preset].off if preset is not None and preset in presets else ()
    if off and any(set(off) <= set(r.never_taken) for r in counted.values()):
        out.print(
            f"off under the preset's constants, by design: {escape(', '.join(off))}", highlight=False, soft_wrap=True
        )
    by_never: dict[tuple[str, ...], list[str]] = {}
    for name, r in counted.items():
        never = tuple(a for a in r.never_taken if a not in off)
        if never:
            by_never.setdefault(never, []).append(name)
    hint = f"; --preset {next(iter(presets))} takes every action" if presets and preset not in presets else ""
    for never, engines in by_never.items():
        listed = f"{len(never)} of {len(actions)} actions: {escape(', '.join(never))}"
        if any(not results[e].complete for e in engines):  # a search cut short: no word on the model
            who = "neither engine took" if len(engines) > 1 else f"{_ENGINE_NAMES[engines[0]]} did not take"
            out.print(f"{who} before the search stopped {listed}", highlight=False, soft_wrap=True)
            continue
        who = "neither engine took" if len(engines) > 1 else f"{_ENGINE_NAMES[engines[0]]} never took"
        out.print(
            f"[yellow bold]warning:[/yellow bold] {who} {listed}. The run checked none of their steps{hint}",
            highlight=False,
            soft_wrap=True,
        )


def _short(value: Any) -> str:
    if isinstance(value, dict):  # a message: show the fields that carry information
        return "[" + ", ".join(f"{k}={v}" for k, v in value.items() if v is not False and v != -1) + "]"
    return str(value)
