"""Benchmark of the conformance oracle, every figure in one run, side by side.

1. The in-process checker on one core, by kind of trace: fully observed
   traces and client-only traces, end to end and check only
   (:mod:`ledgerspec.tools.bench.check`; the aim: 200,000 events/s or more on
   fully observed traces).
2. Spark ``local[2]`` against the in-process checker on the same 10 million
   events, end to end (the aim: 1.6 times the one-core rate or better), and
   one small trace validated by TLC through JPype against the Python checker
   (:mod:`ledgerspec.tools.bench.spark`).

    python -m ledgerspec.tools.bench.oracle [--traces N] [--events N] [--master URL] [--cache DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ledgerspec.tools.bench import check as bench_check
from ledgerspec.tools.bench import spark as bench_spark


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench.oracle", description=__doc__)
    parser.add_argument("--traces", type=int, default=3000, help="traces per kind in part 1 (default 3000)")
    parser.add_argument("--events", type=int, default=10_000_000, help="events on Spark (default 10,000,000)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--cache", type=Path, default=bench_spark.DEFAULT_CACHE, help="where the Spark files are kept")
    args = parser.parse_args(argv)
    failed = bench_check.main(["--traces", str(args.traces)])
    failed |= bench_spark.main(["--events", str(args.events), "--master", args.master, "--cache", str(args.cache)])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
