"""Benchmark: events per second of the in-process conformance checker, by kind of trace, in one run.

Traces are random walks of the ledger spec (seeded), written to NDJSON files
in a temporary directory, then checked in this process on one core:

- ``full``: every step logged with its params and every variable it changed
  (messages in flight included, so lines are long: about 550 bytes);
- ``full, lean``: every step logged with its params, reporting only the
  writer's, recoverers' and metadata values it changed (about 260 bytes);
- ``client``: what clients see, with nothing the spec could hide
  (``MaxLoss=0``, ``MaxCrashes=0``): replay is still deterministic, but the
  checker looks for hidden steps before every event;
- ``client, lossy``: long traces (250 events or more each, ``MaxEntries=90``)
  with ``MaxLoss=2`` and ``MaxCrashes=2``: lost requests and replies, crashes
  and restarts may hide anywhere;
- ``full, lossy walks``: the same walks as ``client, lossy``, every step
  logged: what the hidden-state search costs, against the same behaviours
  seen whole.

The short walks rarely close the ledger or start a recovery early, so their
traces are about 25 events long. Rates are events per CPU second of this
process (``time.process_time``), which other load on the machine disturbs
less than wall time.

For each: the rate of reading and parsing the files alone (``orjson``, line by
line, nothing else); the end-to-end rate (read, parse, merge, check) with a
fresh checker (cold caches), its ratio to the parse rate, and again with the
same checker (warm caches: the successors of states seen before are not
recomputed); the rate of the check alone on events already in memory (warm),
with coverage collected (the default) and without, best of six runs each,
each first in turn, and the ratio of the two; the largest set of candidate
states the check examined for one event, over the traces, and how many
traces a beam decided, how many the reduced breadth-first search decided
(``decided_by_reduced`` in the JSON: no beam did, and putting off the hidden
steps that commute with the next event did), and how many the complete
breadth-first search had to decide. Every
trace must conform, or the figures measure something else and the benchmark
fails. Two ratios close the table: ``client, lossy``
end to end, cold, against ``full`` and against ``full, lossy walks``.

A peer on the same traces: TLC's trace validation (docs/conformance.md,
"Validating a trace with TLC") checks a sample (``--tlc N``, half of them
``full`` traces of the sample above, half walks of the spec with the seeded
bug ``lac_before_qa``, which violate it), each as a TLA+ trace module run in
this process. The table gives both checkers' events per wall-clock second on
the sample (the in-process check with a fresh checker, so cold; TLC without
the writing of the modules) and their ratio, and compares the verdicts
trace by trace: the same status, and the same failing event. A
disagreement fails the benchmark. ``--tlc 0`` leaves TLC (and Java) out.

    python -m ledgerspec.tools.bench.check [--traces N] [--seed S] [--tlc N] [--json]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.checker import BEAM, BREADTH_FIRST, REDUCED, TraceChecker
from ledgerspec.conformance.events import Event, events_from_json
from ledgerspec.conformance.generate import Walk, random_walk, trace_events, write_ndjson
from ledgerspec.conformance.reader import TraceInput, read_traces
from ledgerspec.conformance.run import check_files
from ledgerspec.conformance.verdict import Verdict
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_trace import CLIENT_OBSERVES
from ledgerspec.tools.console import output_console
from rich.table import Table

MODEL = {"MaxEntries": 6}
LONG_LOSSY = {"MaxEntries": 90, "MaxLoss": 2, "MaxCrashes": 2}
LONG_EVENTS = 250  # client events a long trace has at least
# Rarely end a walk early: short walks are then about 25 events long, long ones 250 or more.
SHORT_WEIGHTS = {"WriterClosesLedger": 0.02, "RecovererStartsRecovery": 0.02}
LONG_WEIGHTS = {"WriterClosesLedger": 0.002, "RecovererStartsRecovery": 0.002}


@attrs.frozen
class Kind:
    mode: str
    constants: dict[str, int]
    only: frozenset[str] | None = None
    long: bool = False  # the long lossy walks


KINDS = {
    "full": Kind("full", MODEL),
    "full, lean": Kind("full", MODEL, CLIENT_OBSERVES),
    "client": Kind("client", MODEL),
    "client, lossy": Kind("client", LONG_LOSSY, long=True),
    "full, lossy walks": Kind("full", LONG_LOSSY, long=True),
}


def _short_walks(traces: int, seed: int) -> list[Walk]:
    spec, rng = LedgerSpec(**MODEL), random.Random(seed)
    return [random_walk(spec, rng, 60, weights=SHORT_WEIGHTS) for _ in range(traces)]


def _long_walks(traces: int, seed: int) -> list[Walk]:
    """Walks of the lossy model whose client traces have at least LONG_EVENTS events."""
    spec, rng = LedgerSpec(**LONG_LOSSY), random.Random(seed)
    walks: list[Walk] = []
    while len(walks) < traces:
        walk = random_walk(spec, rng, 2 * LONG_EVENTS, weights=LONG_WEIGHTS)
        if len(trace_events(spec, walk, "client", "")) >= LONG_EVENTS:
            walks.append(walk)
    return walks


def _rate(events: int, seconds: float) -> float:
    return events / seconds if seconds > 0 else 0.0


def _parse_only(path: Path) -> float:
    """CPU seconds to read the file and parse each line with orjson, and nothing else."""
    started = time.process_time()
    with open(path, "rb") as f:
        for line in f:
            orjson.loads(line)
    return time.process_time() - started


def _check_only(checker: TraceChecker, loaded: list[TraceInput]) -> tuple[float, list[Verdict]]:
    """CPU seconds to check traces already in memory, and the verdicts."""
    gc.disable()
    started = time.process_time()
    verdicts = [checker.check(t.events, t.errors) for t in loaded]
    seconds = time.process_time() - started
    gc.enable()
    return seconds, verdicts


def _measure(name: str, kind: Kind, path: Path, traces: int, events: int) -> dict[str, Any]:
    spec = LedgerSpec(**kind.constants)
    parse = min(_parse_only(path) for _ in range(3))
    checker = TraceChecker(spec, kind.mode)
    cold = check_files([path], checker)
    warm = check_files([path], checker)
    loaded = [t for t in read_traces([path]) if isinstance(t, TraceInput)]
    uncovered = TraceChecker(spec, kind.mode, coverage=False)
    _check_only(uncovered, loaded)  # warm its caches as the other's are
    with_coverage, without = [], []
    for turn in range(6):  # each first in turn: the second of two runs tends to be faster
        if turn % 2:
            without.append(_check_only(uncovered, loaded)[0])
        seconds, verdicts = _check_only(checker, loaded)
        with_coverage.append(seconds)
        if not turn % 2:
            without.append(_check_only(uncovered, loaded)[0])
    check_only, bare = min(with_coverage), min(without)
    bad = [v for v in verdicts if v.status != "conforms"] + cold.violations + cold.inconclusive
    return {
        "kind": name,
        "traces": traces,
        "events": events,
        "fewest_events_in_a_trace": min(len(t.events) for t in loaded),
        "bytes_per_event": path.stat().st_size / events,
        "parse_only": _rate(events, parse),
        "end_to_end_cold": _rate(cold.events, cold.cpu_seconds),
        "end_to_end_warm": _rate(warm.events, warm.cpu_seconds),
        "check_only_warm": _rate(events, check_only),
        "check_only_warm_no_coverage": _rate(events, bare),
        "coverage_cost": check_only / bare - 1 if bare > 0 else 0.0,
        "largest_candidate_set": max(v.max_candidates for v in verdicts),
        "decided_by_beam": sum(v.search == BEAM for v in verdicts),
        "decided_by_reduced": sum(v.search == REDUCED for v in verdicts),
        "decided_breadth_first": sum(v.search == BREADTH_FIRST for v in verdicts),
        "not_conforming": [v.reason for v in bad[:1]] + [str(e) for e in cold.input_errors[:1]],
    }


def _tlc_sample(short: list[Walk], count: int, seed: int) -> list[list[Event]]:
    """The traces TLC checks: ``full`` traces of the first short walks, and as many of the spec with a seeded
    bug (each checked against the spec without it)."""
    kind = KINDS["full"]
    spec = LedgerSpec(**kind.constants)
    buggy = LedgerSpec(**kind.constants, Bug="lac_before_qa")
    rng = random.Random(seed)
    violating = [random_walk(buggy, rng, 60, weights=SHORT_WEIGHTS) for _ in range(count - count // 2)]
    traces = [trace_events(spec, w, "full", f"c{i}") for i, w in enumerate(short[: count // 2])]
    traces += [trace_events(buggy, w, "full", f"v{i}") for i, w in enumerate(violating)]
    return [events_from_json(t, f"tlc-sample-{i}") for i, t in enumerate(traces)]


def _against_tlc(sample: list[list[Event]]) -> dict[str, Any]:
    """Both checkers on the sample: events per wall-clock second of each, and where their verdicts differ."""
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc  # JPype, only here

    spec = LedgerSpec(**KINDS["full"].constants)
    checker = TraceChecker(spec, "full")
    events = sum(len(t) for t in sample)
    started = time.perf_counter()
    verdicts = [checker.check(t) for t in sample]
    ours = time.perf_counter() - started
    tlc_seconds, disagreements = 0.0, []
    for trace, verdict in zip(sample, verdicts, strict=True):
        checked = validate_with_tlc(trace, spec)
        tlc_seconds += checked.seconds
        failing = verdict.failure.event_index if verdict.failure is not None else None
        if (checked.outcome.conforms, checked.outcome.event_index) != (verdict.status == "conforms", failing):
            disagreements.append(f"{trace[0].trace}: TLC says {checked.outcome.reason}; the checker: {verdict.reason}")
    return {
        "traces": len(sample),
        "events": events,
        "violating": sum(v.status == "violates" for v in verdicts),
        "checker_events_per_second": _rate(events, ours),
        "tlc_events_per_second": _rate(events, tlc_seconds),
        "checker_over_tlc": (tlc_seconds / ours) if ours > 0 else 0.0,
        "disagreements": disagreements,
    }


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        "kind", "traces", "events", "fewest / trace", "bytes / event", "parse only", "end to end, cold",
        "÷ parse", "end to end, warm", "check only, warm", "no coverage", "coverage cost",
        "most candidates", "beam", "breadth first",
        title="events per second, one core (no coverage: check only, warm, without coverage)",
    )  # fmt: skip
    for r in rows:
        table.add_row(
            r["kind"],
            f"{r['traces']:,}",
            f"{r['events']:,}",
            f"{r['fewest_events_in_a_trace']:,}",
            f"{r['bytes_per_event']:,.0f}",
            f"{r['parse_only']:,.0f}",
            f"{r['end_to_end_cold']:,.0f}",
            f"{r['end_to_end_cold'] / r['parse_only']:.3f}",
            f"{r['end_to_end_warm']:,.0f}",
            f"{r['check_only_warm']:,.0f}",
            f"{r['check_only_warm_no_coverage']:,.0f}",
            f"{r['coverage_cost']:+.1%}",
            f"{r['largest_candidate_set']:,}",
            f"{r['decided_by_beam']:,}",
            f"{r['decided_breadth_first']:,}",
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench.check", description=__doc__)
    parser.add_argument("--traces", type=int, default=3000, help="short traces per kind (default 3000; long: 1/30)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument(
        "--tlc", type=int, default=20, metavar="N",
        help="traces TLC's trace validation checks beside the checker, half of them violating (default 20; 0: none)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.tlc < 0:
        parser.error(f"--tlc must be at least 0, got {args.tlc}")
    console = output_console()
    short, long = _short_walks(args.traces, args.seed), _long_walks(max(1, args.traces // 30), args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-") as tmp:
        for name, kind in KINDS.items():
            spec = LedgerSpec(**kind.constants)
            walks = long if kind.long else short
            path = Path(tmp) / f"{name.replace(', ', '-')}.ndjson"
            events = write_ndjson(
                path, (trace_events(spec, w, kind.mode, f"t{i}", only=kind.only) for i, w in enumerate(walks))
            )
            rows.append(_measure(name, kind, path, len(walks), events))
    by_kind = {r["kind"]: r for r in rows}
    lossy = by_kind["client, lossy"]["end_to_end_cold"]
    ratios = {
        "client_lossy_over_full": lossy / by_kind["full"]["end_to_end_cold"],
        "client_lossy_over_full_lossy_walks": lossy / by_kind["full, lossy walks"]["end_to_end_cold"],
        "full_end_to_end_over_parse": by_kind["full"]["end_to_end_cold"] / by_kind["full"]["parse_only"],
    }
    peer = _against_tlc(_tlc_sample(short, args.tlc, args.seed)) if args.tlc else None
    if args.json:
        figures = {"kinds": rows, "ratios": ratios, "tlc": peer}
        sys.stdout.write(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        console.print(_table(rows))
        console.print(
            f"client, lossy ÷ full, end to end, cold: {ratios['client_lossy_over_full']:.3f} "
            f"(÷ full, lossy walks: {ratios['client_lossy_over_full_lossy_walks']:.3f}); "
            f"full, end to end, cold ÷ parse only: {ratios['full_end_to_end_over_parse']:.3f}"
        )
        if peer is not None:
            console.print(
                f"TLC trace validation on {peer['traces']} full traces ({peer['violating']} violating, "
                f"{peer['events']:,} events): checker {peer['checker_events_per_second']:,.0f} events/s, "
                f"TLC {peer['tlc_events_per_second']:,.0f} events/s (wall clock); checker ÷ TLC "
                f"{peer['checker_over_tlc']:,.1f}; verdicts "
                + ("agree on every trace" if not peer["disagreements"] else f"differ on {len(peer['disagreements'])}")
            )
    failed = [r for r in rows if r["not_conforming"]]
    for r in failed:
        console.print(f"[red]{r['kind']}: not every trace conforms: {r['not_conforming'][0]}")
    for disagreement in peer["disagreements"] if peer is not None else ():
        console.print(f"[red]TLC and the checker disagree: {disagreement}")
    return 1 if failed or (peer is not None and peer["disagreements"]) else 0


if __name__ == "__main__":
    sys.exit(main())
