"""Benchmark: the reference managed ledger's publishes and cursor acks per second, and its cursor restore time.

Measured side by side in one run, on an in-process cluster of two reference
bookies (E=Qw=Qa=2) with modelled fsyncs and an embedded metadata store:

- ``publish``: ``ManagedLedger.add_entry`` of ``--size``-byte entries, one at
  a time (each add waits for its quorum), rolling over every
  ``--entries-per-ledger`` entries;
- ``ack, in order``: a cursor acknowledges every entry in order (its
  mark-delete moves at each ack), in memory;
- ``ack, every other``: it acknowledges every other entry (each ack adds an
  individually acknowledged range);
- ``ack + flush``: each in-order ack followed by a persist, a
  ``PositionInfo`` appended to the cursor ledger (rolled over every
  ``--cursor-records`` records).

Then the restore: a cursor with ``n`` unacknowledged gaps (it acknowledged
every other entry of the first ``2n``), flushed to its cursor ledger, then
the broker crashes and ``ManagedLedger.open`` restores it from that ledger's
last record; and the same cursor closed first, so that the restore reads its
znode (``cursorsLedgerId = -1``). Each row gives the median seconds of three
opens of the same stored state, the bytes of the record or znode, and the
ratio to the first row.

Pulsar persists at most ``managedLedgerMaxUnackedRangesToPersist`` (10,000)
ranges; the reference engine persists them all, which is what lets the rows
past 10,000 measure the format and the restore rather than a cap.

    python -m ledgerspec.tools.bench.managed_ledger [--entries N] [--ranges 1,10,...] [--size BYTES]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

import attrs
from ledgerspec.reference.ledger import InProcessCluster
from ledgerspec.reference.managed_ledger import (
    BookKeeperLedgers,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerStore,
)
from ledgerspec.reference.metadata import EmbeddedMetadataStore, LedgerMetadataStore
from ledgerspec.tools.console import output_console
from rich.table import Table

TOPIC = "public/default/persistent/bench"
RESTARTS = 3  # opens timed per row


@attrs.frozen
class Rate:
    name: str
    count: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds


@attrs.frozen
class Restore:
    gaps: int
    source: str  # "cursor ledger" or "znode"
    seconds: float
    stored_bytes: int


class Broker:
    """A topic on an in-process cluster; ``restart()`` drops the managed ledger and opens it again."""

    def __init__(self, root: str, config: ManagedLedgerConfig) -> None:
        self.cluster = InProcessCluster(root, bookies=2, sync_to_disk=False)
        self.metadata = EmbeddedMetadataStore()
        self.ledgers = LedgerMetadataStore(self.metadata)
        self.store = ManagedLedgerStore(self.metadata)
        self.config = config
        self.ml = self.open()

    def open(self) -> ManagedLedger:
        return ManagedLedger.open(TOPIC, self.store, BookKeeperLedgers(self.cluster, self.ledgers), self.config)

    def restart(self) -> float:
        """Crash (drop everything in memory) and open again; the seconds the open took."""
        del self.ml
        started = time.perf_counter()
        self.ml = self.open()
        return time.perf_counter() - started


def _config(entries_per_ledger: int, cursor_records: int) -> ManagedLedgerConfig:
    return ManagedLedgerConfig(
        max_entries_per_ledger=entries_per_ledger,
        minimum_rollover_ms=0,
        maximum_rollover_ms=0,
        metadata_max_entries_per_ledger=cursor_records,
    )


def bench_rates(root: str, entries: int, size: int, entries_per_ledger: int, cursor_records: int) -> list[Rate]:
    broker = Broker(root, _config(entries_per_ledger, cursor_records))
    ml, payload = broker.ml, b"x" * size
    started = time.perf_counter()
    positions = [ml.add_entry(payload) for _ in range(entries)]
    rates = [Rate("publish", entries, time.perf_counter() - started)]

    def timed(name: str, cursor: ManagedCursor, chosen: Sequence[tuple[int, int]], flush: bool = False) -> Rate:
        started = time.perf_counter()
        for position in chosen:
            cursor.ack(position)
            if flush:
                cursor.flush()
        return Rate(name, len(chosen), time.perf_counter() - started)

    rates.append(timed("ack, in order", ml.open_cursor("in-order", earliest=True), positions))
    rates.append(timed("ack, every other", ml.open_cursor("every-other", earliest=True), positions[1::2]))
    flushed = positions[: max(1, entries // 5)]
    rates.append(timed("ack + flush", ml.open_cursor("flushed", earliest=True), flushed, flush=True))
    return rates


def bench_restores(root: str, gaps: Sequence[int], size: int) -> list[Restore]:
    """Restore times of a cursor with each number of gaps, from its ledger and from its znode."""
    most = max(gaps)
    broker = Broker(root, _config(2 * most + 1, 1_000_000))
    positions = [broker.ml.add_entry(b"x" * size) for _ in range(2 * most)]
    restores = []
    for n in gaps:
        for source in ("cursor ledger", "znode"):
            name = f"gaps-{n}-{source.replace(' ', '-')}"
            cursor = broker.ml.open_cursor(name, earliest=True)
            for position in positions[1 : 2 * n : 2]:
                cursor.ack(position)
            cursor.flush()
            stored = len(broker.store.encode_position_info(cursor.snapshot()))
            if source == "znode":
                cursor.close()
                stored = len(broker.metadata.get(f"/managed-ledgers/{TOPIC}/{name}").value)
            times = []
            for _ in range(RESTARTS):  # the same stored state restored again: the median of the opens
                times.append(broker.restart())
                restored = broker.ml.cursors[name]
                assert len(restored.acked) == n and restored.mark_delete == (positions[0][0], -1), (n, source)
            restores.append(Restore(n, source, statistics.median(times), stored))
            broker.ml.delete_cursor(name)  # the next rows restore their own cursor alone
    return restores


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ledgerspec.tools.bench.managed_ledger",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--entries", type=int, default=5000, help="entries published and acked (default 5000)")
    parser.add_argument("--size", type=int, default=1024, help="payload bytes (default 1024)")
    parser.add_argument("--entries-per-ledger", type=int, default=1000, help="rollover (default 1000)")
    parser.add_argument("--cursor-records", type=int, default=1000, help="records per cursor ledger (default 1000)")
    parser.add_argument(
        "--ranges", default="1,10,100,1000,10000,100000", help="gaps in the restored cursors (default 1 .. 100,000)"
    )
    args = parser.parse_args(argv)
    gaps = [int(x) for x in args.ranges.split(",")]
    console = output_console()
    console.print(
        f"managed ledger on 2 in-process bookies (E=Qw=Qa=2, fsyncs modelled), {args.size}-byte entries, "
        f"rollover every {args.entries_per_ledger} entries"
    )
    with tempfile.TemporaryDirectory(prefix="bench-ml-") as root:
        rates = bench_rates(f"{root}/rates", args.entries, args.size, args.entries_per_ledger, args.cursor_records)
        restores = bench_restores(f"{root}/restores", gaps, 16)
    base = rates[0].per_second
    table = Table("measurement", "count", "seconds", "per second", "vs publish")
    for rate in rates:
        ratio = rate.per_second / base
        table.add_row(rate.name, f"{rate.count:,}", f"{rate.seconds:.2f}", f"{rate.per_second:,.0f}", f"{ratio:.2f}")
    console.print(table)
    first = {r.source: r.seconds for r in restores if r.gaps == gaps[0]}
    table = Table("unacked gaps", "restored from", "stored bytes", "open seconds", "vs first row")
    for r in restores:
        table.add_row(
            f"{r.gaps:,}", r.source, f"{r.stored_bytes:,}", f"{r.seconds:.4f}", f"{r.seconds / first[r.source]:.1f}"
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
