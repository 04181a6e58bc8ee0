"""Benchmark: the Python explorer against TLC on the same model, one worker each, in one run.

Prints each engine's distinct states per second and the ratio explorer / TLC.
TLC's time includes parsing the spec but not starting the JVM (a warm-up run
starts it first). Both engines must find the same number of states, or the
figures compare different work and the benchmark fails.

    python -m ledgerspec.tools.bench [--const NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ledgerspec.tools.model_check import ModelCheck, run_python, run_tlc
from rich.console import Console
from rich.table import Table

# Large enough that TLC's start-up costs little next to its search.
DEFAULT_MODEL = {"MaxEntries": "2", "MaxLoss": "1"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench", description=__doc__)
    parser.add_argument("--spec", default="ledger")
    parser.add_argument("--const", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    constants = dict(DEFAULT_MODEL)
    constants.update(item.split("=", 1) for item in args.const)
    model = ModelCheck(args.spec, constants)
    console = Console()
    console.print(f"model: {args.spec} " + " ".join(f"{k}={v}" for k, v in model.build().values.items()))

    run_tlc(ModelCheck(args.spec, {**constants, "MaxEntries": "1", "MaxLoss": "0"}))  # start the JVM, warm up
    tlc = run_tlc(model, workers=1)
    python = run_python(model)

    table = Table("engine", "distinct states", "seconds", "distinct states / s")
    for r in (python, tlc):
        table.add_row(r.engine, f"{r.distinct_states:,}", f"{r.seconds:.2f}", f"{r.states_per_second:,.0f}")
    console.print(table)
    ratio = python.states_per_second / tlc.states_per_second
    console.print(f"explorer / TLC rate: [bold]{ratio:.2f}x[/bold]")
    if python.distinct_states != tlc.distinct_states:
        console.print(
            f"[red]the engines found different state counts: {python.distinct_states} vs {tlc.distinct_states}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
