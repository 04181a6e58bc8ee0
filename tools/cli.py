"""The ``ledgerspec`` command line.

Every error a user can cause (an unknown spec or constant, an impossible
quorum, no Java, a TLA+ text TLC cannot parse) ends in one clear message and
a non-zero exit status, never in a traceback.

Exit status: 0 all checks passed; 1 a property is violated or the engines
disagree; 2 bad usage or input; 3 a required tool (Java, TLC) is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.values import format_value
from ledgerspec.tools.model_check import Comparison, EngineResult, ModelCheck, compare, run_python, run_tlc
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ledgerspec import __version__

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_MISSING_TOOL = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input from the user: reported as a message, exit status 2."""


def _parse_constants(items: Sequence[str]) -> dict[str, str]:
    constants = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"--const expects NAME=VALUE, got {item!r}")
        constants[name.strip()] = value.strip()
    return constants


def _model_check(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        catalog.find(args.spec)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    model = ModelCheck(args.spec, _parse_constants(args.const), check_deadlock=args.deadlock, liveness=args.liveness)
    if args.liveness and args.engine != "tlc":
        raise UsageError("--liveness needs --engine tlc: the Python explorer checks safety only")
    model.build()  # validate the constants before anything starts
    engines = ["python", "tlc"] if args.engine == "both" else [args.engine]
    compare_states = args.engine == "both" and not args.no_state_compare
    results: dict[str, EngineResult] = {}
    for engine in engines:
        if engine == "python":
            results["python"] = _with_progress(model, compare_states, quiet=args.json, err=err)
        else:
            if not args.json:
                err.print(f"[dim]TLC: checking {args.spec} ({args.workers} worker(s))...[/dim]")
            results["tlc"] = run_tlc(model, keep_states=compare_states, workers=args.workers)
    comparison = compare(results["python"], results["tlc"]) if len(results) == 2 else None
    if args.json:
        data: dict[str, Any] = {"spec": args.spec, "constants": model.build().values}
        data.update({name: result.to_json() for name, result in results.items()})
        if comparison is not None:
            data["agree"] = comparison.agree
            data["states_compared"] = comparison.states_compared
            if comparison.reasons:
                data["disagreements"] = list(comparison.reasons)
        print(json.dumps(data, indent=2))
    else:
        _print_results(out, model, results, comparison)
    failed = any(r.violations for r in results.values()) or (comparison is not None and not comparison.agree)
    return EXIT_VIOLATION if failed else EXIT_OK


def _with_progress(model: ModelCheck, keep_states: bool, *, quiet: bool, err: Console) -> EngineResult:
    if quiet or not err.is_terminal:
        return run_python(model, keep_states=keep_states)
    with err.status("python explorer: starting") as status:

        def report(distinct: int, generated: int, depth: int, queue: int) -> None:
            status.update(
                f"python explorer: {distinct:,} distinct states, {generated:,} generated, depth {depth}, "
                f"{queue:,} queued"
            )

        return run_python(model, keep_states=keep_states, progress=report)


def _print_results(
    out: Console, model: ModelCheck, results: dict[str, EngineResult], comparison: Comparison | None
) -> None:
    spec = model.build()
    out.print(
        f"[bold]{model.spec_name}[/bold] " + escape(" ".join(f"{k}={format_value(v)}" for k, v in spec.values.items()))
    )
    table = Table("engine", "distinct states", "generated", "depth", "seconds", "states/s", "verdict")
    for name, r in results.items():
        verdict = "[green]no violation[/green]" if not r.violations else f"[red]{r.violations[0].invariant}[/red]"
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
    if comparison is not None:
        if comparison.agree:
            how = "the same states" if comparison.states_compared else "the same verdicts"
            out.print(f"\n[green]The engines agree[/green]: {how}.")
        else:
            out.print("\n[red]The engines disagree:[/red]")
            for reason in comparison.reasons:
                out.print(f"  - {reason}")


def _short(value: Any) -> str:
    if isinstance(value, dict):  # a message: show the fields that carry information
        return "[" + ", ".join(f"{k}={v}" for k, v in value.items() if v is not False and v != -1) + "]"
    return str(value)


def _specs(args: argparse.Namespace, out: Console, err: Console) -> int:
    for entry in catalog.SPECS.values():
        out.print(f"[bold]{entry.name}[/bold]: {entry.summary}")
        table = Table("constant", "default", "meaning")
        for c in entry.python.constants:
            table.add_row(c.name, format_value(c.default), c.doc)
        out.print(table)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledgerspec",
        description="Specs, a reference engine and a conformance oracle for BookKeeper and Pulsar storage.",
    )
    parser.add_argument("--version", action="version", version=f"ledgerspec {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    mc = commands.add_parser("model-check", help="explore a spec with the Python explorer, TLC, or both")
    mc.add_argument("spec", help="spec name: " + ", ".join(catalog.SPECS))
    mc.add_argument("--engine", choices=("python", "tlc", "both"), default="both")
    mc.add_argument("--const", action="append", default=[], metavar="NAME=VALUE", help="set a constant (repeatable)")
    mc.add_argument("--json", action="store_true", help="print one JSON object")
    mc.add_argument("--workers", type=int, default=1, help="TLC worker threads (default 1)")
    mc.add_argument("--deadlock", action="store_true", help="report states with no enabled action, as TLC does")
    mc.add_argument("--liveness", action="store_true", help="also check the spec's liveness properties (TLC)")
    mc.add_argument("--no-state-compare", action="store_true", help="with both engines, compare counts only")
    mc.set_defaults(run=_model_check)

    specs = commands.add_parser("specs", help="list the specs and their constants")
    specs.set_defaults(run=_specs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out, err = Console(), Console(stderr=True)
    try:
        return int(args.run(args, out, err))
    except (UsageError, ConstantError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("[red]interrupted[/red]")
        return 130
    except Exception as exc:
        return _tool_error(exc, err)


def _tool_error(exc: Exception, err: Console) -> int:
    """TLC's own errors, reported without a traceback; anything else is a bug and is raised."""
    from ledgerspec.tools import tlc

    if isinstance(exc, tlc.TlcUnavailable):
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_MISSING_TOOL
    if isinstance(exc, tlc.TlcSpecError):
        err.print(f"[red]error: TLC could not check the spec:[/red]\n{exc}", highlight=False)
        return EXIT_USAGE
    raise exc


if __name__ == "__main__":
    sys.exit(main())
