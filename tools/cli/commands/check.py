"""``ledgerspec check PATH...``: check an implementation's traces against a spec (the conformance oracle).

In this process by default, streaming; with ``--spark`` on Spark
(:mod:`ledgerspec.conformance.spark`), which also writes the verdicts as a
Parquet table and the summary as JSON.

Exit status: 0 every trace conforms; 1 a trace violates the spec; 2 bad
input (a line that cannot be read, an unknown event, out-of-order sequence
numbers; the other traces are still checked and counted); 4 a trace is
inconclusive (a search bound was hit). The first that applies, in that order
of precedence: 1, 2, 4.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.checker import DEFAULT_HIDDEN_STEPS, REDUCED_REACH, Bounds, TraceChecker
from ledgerspec.conformance.coverage import coverage_summary
from ledgerspec.conformance.manifest import CheckInputs, find_inputs
from ledgerspec.conformance.reader import DEFAULT_MAX_BAD_LINES, DEFAULT_MAX_LINE_BYTES, TraceFileError, TraceInput
from ledgerspec.conformance.run import CheckRun, check_files
from ledgerspec.conformance.verdict import Failure, Verdict
from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.tracing import mapping_for
from ledgerspec.spec.values import format_value
from ledgerspec.tools.cli.commands.base import (
    EXIT_INCONCLUSIVE,
    EXIT_MISSING_TOOL,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATION,
    UsageError,
    parse_constants,
    runs_progress,
)
from ledgerspec.tools.console import StageSteps
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["exit_status", "register"]

SHOWN_IN_FULL = 10  # violations printed with their explanation and path; the rest one line each
PATH_TAIL = 15  # steps of the spec path printed


_DEFAULT = Bounds()


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="check an implementation's traces (NDJSON, Parquet) against a spec",
        description="Check traces (NDJSON, one event per line, or Parquet; docs/trace-format.md) against a spec.",
    )
    check.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="trace files (NDJSON, Parquet: *.parquet, ITF: *.itf.json, TLC -dumpTrace json: *.tlc.json), "
        "or directories of them",
    )
    check.add_argument(
        "--spec",
        help="spec name: " + ", ".join(catalog.SPECS) + " (default: the traces' manifest.json says, else ledger)",
    )
    check.add_argument(
        "--mode",
        help="observation mode of the traces: full or client (default: the traces' manifest.json says, else full)",
    )
    check.add_argument(
        "--const",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a constant (repeatable); traces with a manifest.json are checked under its constants, which a "
        "--const may add to but not contradict",
    )
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument(
        "--max-hidden-steps", type=int, default=None, metavar="N",
        help="hidden steps allowed in a row between two events (default: the observation mode's own, else "
        f"{DEFAULT_HIDDEN_STEPS})",
    )  # fmt: skip
    check.add_argument(
        "--max-candidates", type=int, default=_DEFAULT.max_candidates, metavar="N",
        help=f"candidate states kept at once (default {_DEFAULT.max_candidates:,})",
    )  # fmt: skip
    check.add_argument(
        "--max-reduced-closure", type=int, default=None, metavar="N",
        help="states the reduced search, tried when the quicker ones find no behaviour, may reach before one event "
        f"(default {REDUCED_REACH} times --max-candidates)",
    )  # fmt: skip
    check.add_argument(
        "--max-divergences", type=int, default=_DEFAULT.max_divergences, metavar="N",
        help=f"divergences of one trace told, the check going on from the state each reports "
        f"(default {_DEFAULT.max_divergences})",
    )  # fmt: skip
    check.add_argument(
        "--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES, metavar="N",
        help=f"longest line read (default {DEFAULT_MAX_LINE_BYTES:,})",
    )  # fmt: skip
    check.add_argument(
        "--max-bad-lines", type=int, metavar="N",
        help=f"bad lines of one file read before the rest of the file is given up, and the traces it leaves "
        f"unfinished are inconclusive (default {DEFAULT_MAX_BAD_LINES}; in this process, not with --spark)",
    )  # fmt: skip
    _add_report_option(check)
    _add_spark_options(check)
    check.set_defaults(run=_check)


def _add_report_option(check: Any) -> None:
    check.add_argument(
        "--report", metavar="FILE.html",
        help="also write an HTML report: violations drawn as sequence diagrams, candidate states, coverage",
    )  # fmt: skip


def _check_report_path(args: argparse.Namespace) -> None:
    """Fail before the check, not after it, when the report cannot be written there."""
    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise UsageError(f"cannot write the report {args.report}: no directory {Path(args.report).parent}")


def _write_report(
    args: argparse.Namespace, checker: TraceChecker, run: CheckRun, files: list[str], inputs: CheckInputs
) -> None:
    """``--report``: the HTML report, from the run and the violating traces read again."""
    if not args.report:
        return
    from ledgerspec.conformance.report import write_report  # jinja2, only when a report is asked for

    try:
        write_report(
            args.report, run, checker, files, max_line_bytes=args.max_line_bytes, seeded_bug_of=inputs.seeded_bug_of
        )
    except TraceFileError as exc:  # a file went away after the check
        raise UsageError(f"cannot write the report {args.report}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write the report {args.report}: {exc.strerror or exc}") from None


def _print_candidates(out: Console, checker: TraceChecker, run: CheckRun) -> None:
    """In a mode that hides steps: the traces with the largest candidate sets, against the bound, largest first."""
    if not checker.mode.hidden or not run.largest_candidates:
        return
    shown = run.largest_candidates
    more = run.traces - len(shown)
    out.print(
        f"\nlargest candidate set per trace (bound {checker.bounds.max_candidates:,}): "
        + ", ".join(f"{escape(trace)} {peak:,}" for trace, peak in shown)
        + (f"; {more:,} more trace(s), none larger (max_candidates in the verdict table)" if more > 0 else ""),
        highlight=False,
        soft_wrap=True,
    )


def _print_coverage(out: Console, checker: TraceChecker, run: CheckRun) -> None:
    """One line each: the actions no trace took, and the guards that never held."""
    if run.coverage is None or not run.traces:
        return
    summary = coverage_summary(run.coverage, checker.spec, checker.mapping)
    idle = [a for a, n in summary["actions"].items() if not n["steps"] and not n["hidden_steps"]]
    unheld = [f"{p} ({g})" for p, c in summary["properties"].items() for g, n in c["guards"].items() if not n]
    out.print(
        f"\ncoverage: {len(summary['actions']) - len(idle)} of {len(summary['actions'])} actions taken"
        + (f"; never taken: {', '.join(idle)}" if idle else ""),
        highlight=False,
        soft_wrap=True,
    )
    if unheld:
        out.print(f"guards that never held: {escape(', '.join(unheld))}", highlight=False, soft_wrap=True)


def _add_spark_options(check: argparse.ArgumentParser) -> None:
    spark = check.add_argument_group("Spark", "check on Spark (NDJSON and Parquet input; docs/conformance.md)")
    spark.add_argument("--spark", action="store_true", help="check on Spark, partitioned by trace")
    spark.add_argument("--master", metavar="URL", help="Spark master URL (default local[*])")
    spark.add_argument(
        "--out", metavar="DIR", help="where to write verdicts.parquet and summary.json (default ledgerspec-check)"
    )


@attrs.define
class _Checkers:
    """The checker of each trace: the one of the command's constants, or of those its manifest names."""

    default: TraceChecker
    inputs: CheckInputs
    given: dict[str, Any]  # the --const values, parsed
    _by_constants: dict[tuple[tuple[str, Any], ...], TraceChecker] = attrs.Factory(dict)
    _by_named: dict[tuple[tuple[str, Any], ...], TraceChecker] = attrs.Factory(dict)  # by the constants named
    _used: dict[int, TraceChecker] = attrs.Factory(dict)  # the checkers that checked a trace here, by first use

    def for_constants(self, constants: dict[str, Any] | None) -> TraceChecker:
        if constants is None:
            return self.default
        named = tuple(constants.items())
        found = self._by_named.get(named)  # each trace comes here: a lookup, not a spec built again
        if found is None:
            found = self._by_named[named] = self._checker_of(constants)
        return found

    def _checker_of(self, constants: dict[str, Any]) -> TraceChecker:
        merged = self.default.spec.__class__(**{**constants, **self.given})
        key = tuple(merged.values.items())
        if key == tuple(self.default.spec.values.items()):
            return self.default
        found = self._by_constants.get(key)
        if found is None:
            d = self.default
            found = self._by_constants[key] = TraceChecker(merged, d.mode, d.bounds, mapping=d.mapping)
        return found

    def pick(self, item: TraceInput) -> TraceChecker:
        first = item.events[0].file if item.events else item.errors[0].file if item.errors else ""
        chosen = self.for_constants(self.inputs.constants_of(item.trace, first))
        self._used.setdefault(id(chosen), chosen)
        return chosen

    @property
    def sets(self) -> list[TraceChecker]:
        """The checker of each set of constants the traces were checked under: those that checked a trace in
        this process; else (on Spark) the command's own (``--const`` and the defaults) where a file has no
        manifest, and each that a manifest names."""
        if self._used:
            return list(self._used.values())
        inputs = self.inputs
        named = [self.for_constants(c) for m in inputs.manifests for c in m.constant_sets()]
        unnamed = [self.default] if any(inputs.manifest_of(f) is None for f in inputs.files) else []
        return list({id(c): c for c in [*unnamed, *named]}.values())


def _recorded_as(inputs: CheckInputs, what: str, given: str | None, normal: Any) -> str | None:
    """The spec or mode the manifests say (``normal`` gives a name's usual spelling), checked against ``given``."""
    said = {normal(getattr(m, what)): m.path for m in inputs.manifests}
    if len(said) > 1:
        listed = "; ".join(f"{name} ({path})" for name, path in said.items())
        raise UsageError(f"these traces were recorded under different {what}s: {listed}; check them apart")
    if said and given is not None and normal(given) not in said:
        [(name, path)] = said.items()
        raise UsageError(f"--{what} {given} contradicts {path}, which says the traces were recorded under {name}")
    return next(iter(said), None)


def _checkers(args: argparse.Namespace) -> _Checkers:
    try:
        inputs = find_inputs(args.paths)
        spec_name = _recorded_as(inputs, "spec", args.spec, lambda n: catalog.find(n).name) or args.spec or "ledger"
        entry = catalog.find(spec_name)
        mapping = mapping_for(entry.name)
        mode_name = _recorded_as(inputs, "mode", args.mode, lambda n: mapping.mode(n).name) or args.mode or "full"
        mode = mapping.mode(mode_name)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    given_text = parse_constants(args.const)
    spec = entry.python(**given_text)
    given = {name: spec.values[name] for name in given_text}
    try:
        bounds = Bounds(
            args.max_hidden_steps,
            args.max_candidates,
            args.max_divergences,
            max_reduced_closure=args.max_reduced_closure,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.max_line_bytes < 64:
        raise UsageError(f"--max-line-bytes must be at least 64, got {args.max_line_bytes}")
    if args.max_bad_lines is not None and args.max_bad_lines < 0:
        raise UsageError(f"--max-bad-lines must be at least 0, got {args.max_bad_lines}")
    checkers = _Checkers(TraceChecker(spec, mode, bounds, mapping=mapping), inputs, given)
    for manifest in inputs.manifests:  # every set of constants named, checked before any trace is read
        for trace in ("", *manifest.trace_constants):
            named = manifest.constants_of(trace)  # what the manifest says; the defaults do not count
            try:
                recorded = {n: v for n, v in entry.python(**named).values.items() if n in named}
            except ConstantError as exc:
                raise UsageError(f"{manifest.path}: {exc}") from None
            clash = [f"{n}={format_value(v)}" for n, v in given.items() if n in recorded and recorded[n] != v]
            if clash:
                whose = f"trace {trace} was" if trace else "the traces were"
                raise UsageError(
                    f"--const {', '.join(clash)} contradicts {manifest.path}: {whose} recorded under "
                    + ", ".join(f"{n}={format_value(recorded[n])}" for n in given if n in recorded)
                )
    return checkers


def exit_status(run: CheckRun) -> int:
    if run.violations:
        return EXIT_VIOLATION
    if run.input_errors:
        return EXIT_USAGE
    if run.inconclusive:
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _check(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.spark or args.master or args.out:
        return _check_on_spark(args, out, err)
    checkers = _checkers(args)
    checker = checkers.default
    _check_report_path(args)
    if args.report and len(checkers.sets) > 1:
        raise UsageError(
            f"--report draws traces of one set of constants; these were recorded under {len(checkers.sets)}: "
            "check each manifest's directory apart"
        )
    files = list(checkers.inputs.files)
    try:
        max_bad_lines = DEFAULT_MAX_BAD_LINES if args.max_bad_lines is None else args.max_bad_lines
        run = check_files(
            files, checker, max_line_bytes=args.max_line_bytes, max_bad_lines=max_bad_lines, pick=checkers.pick
        )
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(_to_json(checkers, run), indent=2))
    else:
        _print(out, checkers, run)
        _print_candidates(out, checker, run)
        _print_coverage(out, checker, run)
    _write_report(args, checker, run, files, checkers.inputs)
    return exit_status(run)


def _check_on_spark(args: argparse.Namespace, out: Console, err: Console) -> int:
    if not args.spark:
        raise UsageError("--master and --out go with --spark")
    if args.report:
        raise UsageError("--report is written by runs in this process (without --spark): Spark gathers no coverage")
    if args.max_bad_lines is not None:
        raise UsageError("--max-bad-lines bounds runs in this process (without --spark): Spark reports every bad line")
    checkers = _checkers(args)
    checker = checkers.default
    from ledgerspec.conformance.spark import DEFAULT_MASTER, SparkUnavailable, check_on_spark, spark_session
    from ledgerspec.conformance.spark_tasks import SparkCheck

    spec, inputs = checker.spec, checkers.inputs
    manifests = list(inputs.manifests)
    job = SparkCheck(
        spec.name,
        tuple(spec.values.items()),
        checker.mode.name,
        checker.bounds,
        args.max_line_bytes,
        manifests=tuple(
            (tuple(m.constants.items()), tuple((t, tuple(c.items())) for t, c in m.trace_constants.items()))
            for m in manifests
        ),
        file_manifests=tuple((f, manifests.index(m)) for f in inputs.files if (m := inputs.manifest_of(f)) is not None),
        given=tuple(checkers.given.items()),
    )
    try:
        # Spark's stages are shown with --json too: they go to standard error, the JSON to standard output.
        with runs_progress(err, quiet=False, transient=True) as progress:
            progress.step("starting Spark")
            with spark_session(args.master or DEFAULT_MASTER) as spark:
                progress.step(None)
                result = check_on_spark(
                    spark, inputs.files, job, args.out or "ledgerspec-check", progress=StageSteps(progress),
                    summary=lambda run: _to_json(checkers, run),
                )  # fmt: skip
                progress.step("stopping Spark")
    except SparkUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_MISSING_TOOL
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({**_to_json(checkers, result.run), "verdict_table": result.verdicts}, indent=2))
    else:
        _print(out, checkers, result.run)
        out.print(f"\nverdicts: {escape(result.verdicts)}\nsummary: {escape(result.summary)}", highlight=False)
    return exit_status(result.run)


def _violation_json(v: Verdict) -> dict[str, Any]:
    f = v.failure
    assert f is not None
    return {
        "trace": v.trace,
        "event_index": f.event_index,
        "event": f.event_type,
        "process": f.process,
        "seq": f.seq,
        "file": f.file,
        "line": f.line,
        "reason": v.reason,
        "explanation": f.explanation,
        "path": list(f.path),
        "finding": v.finding,
        "promises": sorted({b.name for b in v.broken_promises}),
        "broken": [b.to_json() for b in f.broken],
        "undecided": list(f.undecided),
        "further": [
            {
                "event_index": g.event_index,
                "event": g.event_type,
                "file": g.file,
                "line": g.line,
                "kind": g.kind,
                "reason": g.reason,
                "broken": [b.to_json() for b in g.broken],
                "undecided": list(g.undecided),
            }
            for g in v.further
        ],
        "stopped": v.stopped,
        # a search bound hit before the first divergence: it is in doubt, the promises broken are not
        "bound": v.bound.to_json() if v.bound is not None else None,
    }


def _inconclusive_json(v: Verdict) -> dict[str, Any]:
    data: dict[str, Any] = {"trace": v.trace, "reason": v.reason, "checked": v.checked, "events": v.events}
    if v.bound is not None:
        data["bound"] = v.bound.to_json()
    if v.failure is not None:
        data["event_index"] = v.failure.event_index
        data["explanation"] = v.failure.explanation
    if v.input_errors:
        data["input_errors"] = [e.to_json() for e in v.input_errors]
    return data


def _inputs_json(checkers: _Checkers) -> dict[str, Any]:
    inputs = checkers.inputs
    data: dict[str, Any] = {}
    if inputs.manifests:
        data["manifests"] = [str(m.path) for m in inputs.manifests]
        data["constant_sets"] = [c.spec.values for c in checkers.sets]
    if inputs.not_read:
        data["not_read"] = [{"file": str(path), "why": why} for path, why in inputs.not_read]
    return data


def _to_json(checkers: _Checkers, run: CheckRun) -> dict[str, Any]:
    checker = checkers.default
    sets = checkers.sets
    return {
        "spec": checker.spec.name,
        "mode": checker.mode.name,
        "constants": (sets[0] if len(sets) == 1 else checker).spec.values,
        **_inputs_json(checkers),
        "traces": run.traces,
        "events": run.events,
        "conforms": run.conforms,
        "violations": [_violation_json(v) for v in run.violations],
        "inconclusive": [_inconclusive_json(v) for v in run.inconclusive],
        "input_errors": [e.to_json() for e in run.input_errors],
        "coverage": None if run.coverage is None else coverage_summary(run.coverage, checker.spec, checker.mapping),
        "seconds": round(run.seconds, 3),
        "largest_candidates": [{"trace": trace, "max_candidates": peak} for trace, peak in run.largest_candidates],
    }


def _constants_text(values: dict[str, Any]) -> str:
    return escape(" ".join(f"{k}={format_value(v)}" for k, v in values.items()))


def _say_promises(say: Callable[[str], None], failure: Failure, indent: str) -> None:
    """Each promise a divergence shows broken, with the reports that establish it."""
    for promise in failure.broken:
        say(f"{indent}{escape(promise.name)}: {escape(promise.message)}")
        for evidence in promise.evidence:
            say(f"{indent}  {escape(str(evidence))}")


def _print_findings(out: Console, run: CheckRun) -> None:
    """One line per promise broken, with the traces that break it; then how many traces only diverge."""
    by_promise: dict[str, list[str]] = {}
    differences = 0
    for v in run.violations:
        names = v.promise_names
        differences += not names
        for name in names:
            by_promise.setdefault(name, []).append(v.trace)
    for name, traces in by_promise.items():
        shown = ", ".join(traces[:5]) + (f" and {len(traces) - 5} more" if len(traces) > 5 else "")
        out.print(
            f"[red]bug[/red]: {escape(name)} broken by {len(traces):,} trace(s): {escape(shown)}", highlight=False
        )
    if differences:
        out.print(f"difference: {differences:,} trace(s) leave the spec with no promise shown broken", highlight=False)


def _print(out: Console, checkers: _Checkers, run: CheckRun) -> None:
    checker, inputs = checkers.default, checkers.inputs
    spec = checker.spec
    sets = checkers.sets
    first = sets[0] if len(sets) == 1 else None
    out.print(
        f"[bold]{spec.name}[/bold] ({checker.mode.name} mode) "
        + (_constants_text(first.spec.values) if first is not None else f"under {len(sets)} sets of constants:"),
        highlight=False,
        soft_wrap=True,
    )
    if first is None:
        for other in sets:
            out.print(f"  {_constants_text(other.spec.values)}", highlight=False, soft_wrap=True)
    if inputs.manifests:
        where = ", ".join(str(m.path) for m in inputs.manifests)
        out.print(f"constants from {escape(where)}", highlight=False, soft_wrap=True)
    for path, why in inputs.not_read:
        out.print(f"not read: {escape(str(path))}: {escape(why)}", highlight=False, soft_wrap=True)
    table = Table("traces", "events", "conform", "violate", "inconclusive", "bad lines", "seconds")
    table.add_row(
        f"{run.traces:,}",
        f"{run.events:,}",
        f"[green]{run.conforms:,}[/green]",
        f"[red]{len(run.violations):,}[/red]" if run.violations else "0",
        f"[yellow]{len(run.inconclusive):,}[/yellow]" if run.inconclusive else "0",
        f"[red]{len(run.input_errors):,}[/red]" if run.input_errors else "0",
        f"{run.seconds:.2f}",
    )
    out.print(table)
    _print_findings(out, run)
    for k, v in enumerate(run.violations):
        f = v.failure
        assert f is not None
        say = functools.partial(out.print, highlight=False, soft_wrap=True)
        where = f"at event {f.event_index}[/red bold] ({escape(f.file)}:{f.line}, {escape(f.process)} seq {f.seq})"
        if f.broken:
            lead = f.broken[0]
            promise_name = escape(lead.name)
            say(f"\n[red bold]trace {escape(v.trace)} breaks the promise {promise_name} {where}: {escape(lead.words)}")
            _say_promises(say, f, "  ")
            say(f"  where it leaves the spec: {escape(f.reason)}")
        else:
            say(f"\n[red bold]trace {escape(v.trace)} diverges from the spec {where}: {escape(f.reason)}")
            for undecided in f.undecided:
                say(f"  undecided: {escape(undecided)}")
        for g in v.further:
            say(f"  then {escape(g.headline)} ({escape(g.file)}:{g.line})")
            _say_promises(say, g, "    ")
        if v.stopped is not None:
            say(f"  {escape(v.stopped)}")
        if k < SHOWN_IN_FULL:
            out.print(escape(f.explanation), highlight=False, soft_wrap=True)
            shown = f.path[-PATH_TAIL:]
            skipped = len(f.path) - len(shown)
            out.print(
                f"  shortest spec path to that point ({len(f.path) - 1} steps"
                + (f", the last {len(shown)}" if skipped else "")
                + "):",
                highlight=False,
                soft_wrap=True,
            )
            for i, step in enumerate(shown, skipped):
                out.print(f"    {i}. {escape(step)}", highlight=False, soft_wrap=True)
    for v in run.inconclusive:
        out.print(
            f"\n[yellow bold]trace {escape(v.trace)} is inconclusive[/yellow bold]: {escape(v.reason)}", highlight=False
        )
    if run.input_errors:
        out.print(f"\n[red bold]{len(run.input_errors)} bad line(s)[/red bold]:")
        for e in run.input_errors:
            out.print(f"  {escape(str(e))}", highlight=False, soft_wrap=True)
