"""Benchmark: the Python explorer against TLC on the same model, one worker each, in one run.

Prints each engine's distinct states per second and the ratio explorer / TLC.
TLC's time includes parsing the spec but not starting the JVM (a warm-up run
starts it first). Both engines must find the same number of states, or the
figures compare different work and the benchmark fails.

Then the explorer on two worker processes against one (the same search:
``tools/model_checking/explorer/parallel.py``), and the memory per distinct state of each engine: each
search runs in a process of its own, whose peak resident memory, less that of
a process that builds the spec (for TLC: that checks the smallest model,
MaxEntries=1 without loss), is divided by the distinct states. The explorer
is measured twice: with its frontier in memory (its default while memory
lasts) and on disk.

    python -m ledgerspec.tools.bench.explorer_vs_tlc [--const NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

from ledgerspec.tools.console import output_console
from ledgerspec.tools.model_checking.model_check import ModelCheck, run_python, run_tlc
from rich.table import Table

# Over a million states (1,437,420), so that start-up costs little next to the search.
DEFAULT_MODEL = {"MaxEntries": "2", "MaxLoss": "2"}
TINY_MODEL = {"MaxEntries": "1", "MaxLoss": "0"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench.explorer_vs_tlc", description=__doc__)
    parser.add_argument("--spec", default="ledger")
    parser.add_argument("--const", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    constants = dict(DEFAULT_MODEL)
    constants.update(item.split("=", 1) for item in args.const)
    model = ModelCheck(args.spec, constants)
    console = output_console()
    console.print(f"model: {args.spec} " + " ".join(f"{k}={v}" for k, v in model.build().values.items()))

    # TLC's own rate: without the action coverage it can count, which slows it down
    run_tlc(ModelCheck(args.spec, {**constants, **TINY_MODEL}), coverage=False)  # start the JVM, warm up
    tlc = run_tlc(model, workers=1, coverage=False)
    python = run_python(model)

    table = Table("engine", "distinct states", "seconds", "distinct states / s")
    for r in (python, tlc):
        table.add_row(r.engine, f"{r.distinct_states:,}", f"{r.seconds:.2f}", f"{r.states_per_second:,.0f}")
    console.print(table)
    ratio = python.states_per_second / tlc.states_per_second
    console.print(f"explorer / TLC rate: [bold]{ratio:.2f}x[/bold]")
    two = run_python(model, workers=2)
    console.print(
        f"explorer, 2 workers: {two.distinct_states:,} states in {two.seconds:.2f}s, {two.states_per_second:,.0f}/s; "
        f"2 workers / 1 worker: [bold]{two.states_per_second / python.states_per_second:.2f}x[/bold]"
    )
    memory = Table("engine", "keeps", "peak MiB", "bytes / distinct state")
    per_state = {}
    for name, store in (("explorer", "memory"), ("explorer", "disk"), ("TLC", "tlc")):
        peak, baseline = _peak_rss(args.spec, constants, store), _peak_rss(args.spec, constants, f"{store}-baseline")
        per_state[store] = (peak - baseline) / python.distinct_states
        keeps = {"memory": "frontier in memory", "disk": "frontier on disk", "tlc": "its default"}[store]
        memory.add_row(name, keeps, f"{peak / 2**20:,.0f}", f"{per_state[store]:,.1f}")
    console.print(memory)
    for store in ("memory", "disk"):
        console.print(
            f"explorer ({'frontier ' + ('in memory' if store == 'memory' else 'on disk')}) / TLC, bytes per state: "
            f"[bold]{per_state[store] / per_state['tlc']:.2f}x[/bold]"
        )
    if not python.distinct_states == tlc.distinct_states == two.distinct_states:
        console.print(
            f"[red]the engines found different state counts: {python.distinct_states} (2 workers: "
            f"{two.distinct_states}) vs {tlc.distinct_states}"
        )
        return 1
    return 0


# The child reads its own peak (VmHWM): getrusage's ru_maxrss would keep the parent's from before the exec.
_MEASURE = """
import sys
from ledgerspec.tools.model_checking.model_check import ModelCheck, run_python, run_tlc
spec, store, constants = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
if store == "tlc-baseline":
    constants.update(MaxEntries="1", MaxLoss="0")
model = ModelCheck(spec, constants)
model.build()
if store in ("tlc", "tlc-baseline"):
    run_tlc(model, workers=1, coverage=False)
elif store in ("memory", "disk"):
    run_python(model, spill_above=0 if store == "disk" else 2**62)
status = open("/proc/self/status").read()
print(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024)
"""


def _peak_rss(spec: str, constants: dict[str, str], store: str) -> int:
    """Peak resident bytes of a process that checks the model with ``store``: ``memory`` or ``disk`` (the
    explorer, its frontier kept there), ``tlc``; with ``-baseline``, of one that builds the spec only (for TLC:
    that checks the smallest model)."""
    argv = [sys.executable, "-c", _MEASURE, spec, store, *(f"{k}={v}" for k, v in constants.items())]
    return int(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    sys.exit(main())
