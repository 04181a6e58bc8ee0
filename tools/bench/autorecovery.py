"""Benchmark: re-replication on the reference engine, and the oracle on autorecovery traces.

Measured side by side in one run:

- **re-replication**: a closed ledger of ``--entries`` entries (E=3, Qw=2,
  on four reference bookies) loses bookie 1; the auditor marks it and one
  replication worker copies bookie 1's fragment (two thirds of the entries)
  to bookie 4 and swaps it into the metadata. Each row is one pairing of a
  metadata store (in memory, or SQLite with an fsync per transaction) with
  the bookies' disks (modelled fsyncs, or real ``fsync`` calls); it gives
  the seconds of the worker's pass and the entries copied per second, and
  its rate as a ratio to the first row's;
- **the oracle**: ``--traces`` seeded random runs
  (:func:`~ledgerspec.reference.autorecovery.trace.simulate_autorecovery_traces`,
  two workers) recorded in both observation modes and checked by one
  :class:`~ledgerspec.conformance.checker.TraceChecker` per mode; events per
  second, and the metadata watcher's rate as a ratio to full observation's
  (its candidate states must cover the steps hidden from it).

    python -m ledgerspec.tools.bench.autorecovery [--entries N] [--traces N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

import attrs
from ledgerspec.conformance import TraceChecker, events_from_json
from ledgerspec.reference.autorecovery import AutorecoveryRun, RunConfig
from ledgerspec.reference.autorecovery.run import embedded_sessions
from ledgerspec.reference.autorecovery.trace import simulate_autorecovery_traces
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.tools.console import output_console
from rich.table import Table

__all__ = ["main"]


@attrs.frozen
class Repair:
    store: str
    disks: str
    entries: int  # copied
    seconds: float

    @property
    def rate(self) -> float:
        return self.entries / self.seconds


def repair(entries: int, *, sqlite: bool, fsync: bool) -> Repair:
    """Lose bookie 1 of a closed ledger and time one worker's pass that repairs it."""
    with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-autorecovery-") as root:
        sessions = embedded_sessions(f"{root}/metadata" if sqlite else None)
        run = AutorecoveryRun(f"{root}/bookies", RunConfig(entries=entries), sessions, sync_to_disk=fsync)
        try:
            run.bookie_stops("bookie-1")
            run.elect_auditor()
            run.auditor_checks()
            worker = run.workers[0]
            start = time.perf_counter()
            steps = worker.run(max_steps=entries + 10)
            seconds = time.perf_counter() - start
            if run.ledgers.read(run.ledger_id).metadata.segments[0].ensemble[0] != "bookie-4":
                raise RuntimeError(f"the worker's pass did not repair the ledger: {steps[:3]} ...")
            copied = steps.count("WorkerCopiesEntry")
        finally:
            run.close()
    return Repair("SQLite" if sqlite else "in memory", "fsync" if fsync else "modelled", copied, seconds)


@attrs.frozen
class OracleRate:
    mode: str
    traces: int
    events: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def oracle(traces: int) -> list[OracleRate]:
    config = RunConfig(workers=2)
    spec = AutorecoverySpec(**config.spec_constants())
    with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-autorecovery-") as root:
        recorded = list(
            simulate_autorecovery_traces(config, root, seed=7, steps=80, traces=traces, modes=("full", "metadata"))
        )
    rates = []
    for mode in ("full", "metadata"):
        parsed = [events_from_json(lines[mode]) for _, lines in recorded]
        checker = TraceChecker(spec, mode, coverage=False)
        start = time.perf_counter()
        verdicts = [checker.check(events) for events in parsed]
        seconds = time.perf_counter() - start
        wrong = [v for v in verdicts if v.status != "conforms"]
        if wrong:
            raise RuntimeError(f"{mode}: trace {wrong[0].trace} does not conform: {wrong[0].reason}")
        rates.append(OracleRate(mode, len(parsed), sum(v.events for v in verdicts), seconds))
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=3_000, help="entries of the closed ledger (default 3000)")
    parser.add_argument("--traces", type=int, default=300, help="random runs checked by the oracle (default 300)")
    args = parser.parse_args(argv)
    if args.entries < 2 or args.traces < 1:
        parser.error("--entries must be at least 2 and --traces at least 1")
    console = output_console()
    repairs = [
        repair(args.entries, sqlite=sqlite, fsync=fsync)
        for sqlite, fsync in ((False, False), (True, False), (True, True))
    ]
    table = Table("metadata store", "bookie disks", "entries copied", "seconds", "entries / s", "ratio", title=(
        f"re-replication of a lost bookie's fragment, ledger of {args.entries:,} entries, E=3 Qw=2"
    ))  # fmt: skip
    for r in repairs:
        table.add_row(
            r.store, r.disks, f"{r.entries:,}", f"{r.seconds:.2f}", f"{r.rate:,.0f}", f"{r.rate / repairs[0].rate:.2f}x"
        )
    console.print(table)
    rates = oracle(args.traces)
    table = Table(
        "mode", "traces", "events", "seconds", "events / s", "ratio", title="the oracle on autorecovery traces"
    )
    for o in rates:
        table.add_row(
            o.mode,
            str(o.traces),
            f"{o.events:,}",
            f"{o.seconds:.2f}",
            f"{o.rate:,.0f}",
            f"{o.rate / rates[0].rate:.2f}x",
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
