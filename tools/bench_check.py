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
- ``client, lossy``: ``MaxLoss=1``, ``MaxCrashes=1``: lost replies and a
  crash may hide anywhere, and the checker keeps every candidate state.

The model: the ledger spec with ``MaxEntries=6``; walks rarely close the
ledger or start a recovery early, so traces are about 25 events long. Rates
are events per CPU second of this process (``time.process_time``), which
other load on the machine disturbs less than wall time.

For each: the end-to-end rate (read, parse, merge, check) with a fresh
checker (cold caches) and again with the same checker (warm caches: the
successors of states seen before are not recomputed); and the rate of the
check alone on events already in memory (warm), with coverage collected
(the default) and without, best of six runs each, each first in turn, and the
ratio of the two. Every trace must conform, or the figures measure
something else and the benchmark fails.

    python -m ledgerspec.tools.bench_check [--traces N] [--seed S]
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

from ledgerspec.conformance.checker import TraceChecker
from ledgerspec.conformance.generate import random_walk, trace_events, write_ndjson
from ledgerspec.conformance.reader import TraceInput, read_traces
from ledgerspec.conformance.run import check_files
from ledgerspec.conformance.verdict import Verdict
from ledgerspec.spec.ledger import LedgerSpec
from ledgerspec.spec.ledger_trace import CLIENT_OBSERVES
from ledgerspec.tools.console import output_console
from rich.table import Table

MODEL = {"MaxEntries": 6}
LOSSY = {**MODEL, "MaxLoss": 1, "MaxCrashes": 1}
KINDS: dict[str, dict[str, Any]] = {
    "full": {"mode": "full", "constants": MODEL, "only": None},
    "full, lean": {"mode": "full", "constants": MODEL, "only": CLIENT_OBSERVES},
    "client": {"mode": "client", "constants": MODEL, "only": None},
    "client, lossy": {"mode": "client", "constants": LOSSY, "only": None},
}
# Rarely end a walk early, so that traces are about 25 events long.
WEIGHTS = {"WriterClosesLedger": 0.02, "RecovererStartsRecovery": 0.02}


def _write(path: Path, kind: dict[str, Any], traces: int, seed: int) -> int:
    spec = LedgerSpec(**kind["constants"])
    rng = random.Random(seed)
    walks = (
        trace_events(spec, random_walk(spec, rng, 60, weights=WEIGHTS), kind["mode"], f"t{i}", only=kind["only"])
        for i in range(traces)
    )
    return write_ndjson(path, walks)


def _rate(events: int, seconds: float) -> str:
    return f"{events / seconds:,.0f}" if seconds > 0 else "-"


def _check_only(checker: TraceChecker, loaded: list[TraceInput]) -> tuple[float, list[Verdict]]:
    """CPU seconds to check traces already in memory, and the verdicts."""
    gc.disable()
    started = time.process_time()
    verdicts = [checker.check(t.events, t.errors) for t in loaded]
    seconds = time.process_time() - started
    gc.enable()
    return seconds, verdicts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench_check", description=__doc__)
    parser.add_argument("--traces", type=int, default=3000, help="traces per kind (default 3000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    console = output_console()
    table = Table(
        "kind", "traces", "events", "bytes / event", "end to end, cold", "end to end, warm", "check only, warm",
        "check only, warm, no coverage", "coverage cost",
        title="events per second, one core",
    )  # fmt: skip
    failed = False
    with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-") as tmp:
        for name, kind in KINDS.items():
            path = Path(tmp) / f"{name.replace(', ', '-')}.ndjson"
            traces = args.traces if kind["constants"] is MODEL else max(1, args.traces // 20)
            events = _write(path, kind, traces, args.seed)
            spec = LedgerSpec(**kind["constants"])
            checker = TraceChecker(spec, kind["mode"])
            cold = check_files([path], checker)
            warm = check_files([path], checker)
            loaded = [t for t in read_traces([path]) if isinstance(t, TraceInput)]
            uncovered = TraceChecker(spec, kind["mode"], coverage=False)
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
            if bad or cold.input_errors:
                console.print(f"[red]{name}: not every trace conforms: {bad[:1] or cold.input_errors[:1]}")
                failed = True
            table.add_row(
                name,
                f"{traces:,}",
                f"{events:,}",
                f"{path.stat().st_size / events:,.0f}",
                _rate(cold.events, cold.cpu_seconds),
                _rate(warm.events, warm.cpu_seconds),
                _rate(events, check_only),
                _rate(events, bare),
                f"{check_only / bare - 1:+.1%}" if bare > 0 else "-",
            )
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
