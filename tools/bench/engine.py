"""Benchmark: the reference ledger engine's adds per second in process, and the model tests' steps per second.

Measured side by side in one run:

- ``engine``: a writer adds entries of ``--size`` bytes to a ledger (E=3,
  Qw=2, Qa=2) on an in-process cluster of three reference bookies, a
  window of ``--window`` adds at a time; every request is served, and its
  reply delivered, one step each, oldest first. Each bookie step journals
  and fsyncs what it served: ``fsync on`` passes the fsyncs to the disk,
  ``fsync off`` only models them (``FaultyFileSystem(sync_to_disk=False)``,
  as the model tests run);
- ``engine, checked``: a seeded random simulation with faults
  (``LedgerSimulation``), each step followed by the abstraction and the
  check against the ledger spec, as the model tests do;
- ``Hypothesis``: the model tests' state machine (the same engine
  and check under Hypothesis), its engine steps and rules per second.

The last column compares each with the first row's engine steps per second.

    python -m ledgerspec.tools.bench.engine [--entries N] [--window W] [--size BYTES] [--examples E]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

import attrs
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from ledgerspec.reference.ledger import (
    BookKeeperClient,
    ClientConfig,
    InProcessCluster,
    LedgerSimulation,
    OrderedPlacement,
    SimulationConfig,
)
from ledgerspec.reference.ledger.refinement import RefinementCheck
from ledgerspec.reference.ledger.stateful import LedgerMachine
from ledgerspec.reference.metadata import EmbeddedMetadataStore, LedgerMetadataStore
from ledgerspec.tools.console import output_console
from rich.table import Table

MODEL = SimulationConfig(
    bookies=4, ensemble=3, write_quorum=2, ack_quorum=2, recoverers=2, max_entries=4, max_crashes=2, max_loss=2
)


@attrs.frozen
class Rate:
    name: str
    unit: str
    count: int
    seconds: float
    steps: int  # engine steps taken

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds


def bench_adds(entries: int, window: int, size: int, *, sync_to_disk: bool) -> Rate:
    """Adds per second of one writer over the in-process cluster, ``window`` adds in flight at a time."""
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as root:
        cluster = InProcessCluster(root, 3, sync_to_disk=sync_to_disk)
        ledgers = LedgerMetadataStore(EmbeddedMetadataStore())
        config = ClientConfig(explicit_lac=False)
        writer = cluster.attach(BookKeeperClient(0, ledgers, cluster, config=config, placement=OrderedPlacement()))
        handle = writer.create_ledger(3, 2, 2)
        payload = b"x" * size
        steps = 0
        started = time.perf_counter()
        for first in range(0, entries, window):
            futures = [handle.add_entry(payload) for _ in range(min(window, entries - first))]
            steps += len(futures) + cluster.run_until(lambda fs=futures: all(f.done() for f in fs))  # type: ignore[misc]
        elapsed = time.perf_counter() - started
        assert handle.last_add_confirmed == entries - 1
    mode = "on" if sync_to_disk else "off"
    return Rate(f"engine, fsync {mode}", "adds", entries, elapsed, steps)


def bench_refinement(runs: int, steps: int) -> Rate:
    """Steps per second of seeded random simulations, each step checked against the spec."""
    taken = 0
    started = time.perf_counter()
    for seed in range(runs):
        sim = LedgerSimulation(MODEL, seed=seed)
        try:
            RefinementCheck(sim).attach()
            taken += sim.run(steps)
        finally:
            sim.close()
    elapsed = time.perf_counter() - started
    return Rate("engine, checked", "steps", taken, elapsed, taken)


def bench_hypothesis(examples: int, steps: int) -> tuple[Rate, Rate]:
    """Engine steps and rules per second of the model tests' state machine."""
    counts = {"engine": 0, "rules": 0}

    class Counted(LedgerMachine):
        config = MODEL

        def __init__(self) -> None:
            super().__init__()
            self.sim.observers.append(lambda step, events: counts.__setitem__("engine", counts["engine"] + 1))

        def _take(self, step: object) -> None:
            counts["rules"] += 1
            super()._take(step)  # type: ignore[arg-type]

    run_settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    started = time.perf_counter()
    run_state_machine_as_test(Counted, settings=run_settings)
    elapsed = time.perf_counter() - started
    return (
        Rate("Hypothesis", "engine steps", counts["engine"], elapsed, counts["engine"]),
        Rate("Hypothesis", "rules", counts["rules"], elapsed, counts["engine"]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ledgerspec.tools.bench.engine",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--entries", type=int, default=5000, help="adds per engine measurement (default 5000)")
    parser.add_argument("--window", type=int, default=50, help="adds in flight at a time (default 50)")
    parser.add_argument("--size", type=int, default=1024, help="payload bytes (default 1024)")
    parser.add_argument("--synced-entries", type=int, default=500, help="adds with fsync on (default 500)")
    parser.add_argument("--runs", type=int, default=40, help="simulations checked step by step (default 40)")
    parser.add_argument("--examples", type=int, default=100, help="Hypothesis examples (default 100)")
    args = parser.parse_args(argv)
    console = output_console()
    console.print(
        f"ledger E=3 Qw=2 Qa=2 on 3 in-process bookies, {args.size}-byte entries, {args.window} adds in flight; "
        f"model runs on {MODEL.bookies} bookies, MaxEntries={MODEL.max_entries}"
    )
    rates = [
        bench_adds(args.entries, args.window, args.size, sync_to_disk=False),
        bench_adds(args.synced_entries, args.window, args.size, sync_to_disk=True),
        bench_refinement(args.runs, 200),
        *bench_hypothesis(args.examples, 50),
    ]
    base = rates[0].steps_per_second
    table = Table("measurement", "counted", "count", "seconds", "per second", "engine steps/s", "vs engine")
    for rate in rates:
        table.add_row(
            rate.name,
            rate.unit,
            f"{rate.count:,}",
            f"{rate.seconds:.2f}",
            f"{rate.per_second:,.0f}",
            f"{rate.steps_per_second:,.0f}",
            f"{rate.steps_per_second / base:.3f}",
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
