"""Benchmark: adds per second from the released BookKeeper 4.17.2 Java client to three reference bookies served over
TCP, against the same client to three real bookies, side by side in one run, fsync on in both.

- ``real``: a :class:`~ledgerspec.conformance.adapters.cluster.BookKeeperCluster`
  of three bookies (``org.apache.bookkeeper.server.Main``, the default
  ledger storage). BookKeeper acknowledges an add once its journal has
  fsynced it (``journalSyncData``, on by default), fsyncing the adds that
  arrived meanwhile together (the journal's group commit);
- ``reference``: the same cluster with no bookie of its own, and three
  reference bookies (:class:`~ledgerspec.reference.wire.ServedBookies`)
  registered in its ZooKeeper, each change fsynced before its answer.

On each, the client harness JVM times ``--adds`` adds of ``--size`` bytes to a
new ledger (E, Qw, Qa as given), at most ``--window`` in flight, on a
BookKeeper client of its own (``timed-adds``: nothing the harness records is
in the way); a first round warms the JIT up and is not counted. The row gives
the median of ``--rounds`` rounds, and the ratio to the real bookies.

    python -m ledgerspec.tools.bench.wire [--adds N] [--size BYTES] [--window N] [--rounds N] [--quorums E,Qw,Qa]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, ClusterError, Harness
from ledgerspec.conformance.adapters.jars import JavaSetupError, ensure_jars
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.tools.console import output_console
from rich.table import Table

BOOKIES = 3


@attrs.frozen
class Rate:
    bookies: str
    adds: int
    seconds: tuple[float, ...]  # each round's

    @property
    def per_second(self) -> float:
        return self.adds / statistics.median(self.seconds)


@attrs.frozen
class Settings:
    adds: int
    size: int
    window: int
    rounds: int
    quorums: tuple[int, int, int]


def timed_adds(harness: Harness, settings: Settings, adds: int) -> float:
    """Seconds the harness took for ``adds`` adds; every one must have succeeded."""
    ensemble, write, ack = settings.quorums
    reply = harness.call(
        "timed-adds", count=adds, size=settings.size, window=settings.window, ensemble=ensemble, write=write, ack=ack
    )
    if reply["failed"] or reply["last_add_confirmed"] != adds - 1:
        raise RuntimeError(f"{reply['failed']} of {adds} adds failed; the LAC reached {reply['last_add_confirmed']}")
    return float(reply["seconds"])


def measure(name: str, harness: Harness, settings: Settings) -> Rate:
    timed_adds(harness, settings, min(settings.adds, 1000))  # the JIT's warm-up
    return Rate(
        name, settings.adds, tuple(timed_adds(harness, settings, settings.adds) for _ in range(settings.rounds))
    )


def bench(root: Path, settings: Settings) -> list[Rate]:
    jars = ensure_jars()
    with BookKeeperCluster(jars, root / "real", bookies=BOOKIES) as real:
        assert real.harness is not None
        rates = [measure("real (bookkeeper-server 4.17.2)", real.harness, settings)]
    with (
        BookKeeperCluster(jars, root / "reference", bookies=0) as cluster,
        ServedBookies(root / "served", BOOKIES, zookeeper=f"127.0.0.1:{cluster.zk_port}"),
    ):
        cluster.wait_for_bookies(BOOKIES)
        assert cluster.harness is not None
        rates.append(measure("reference, served over TCP", cluster.harness, settings))
    return rates


def _quorums(text: str) -> tuple[int, int, int]:
    try:
        ensemble, write, ack = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected E,Qw,Qa (three integers), got {text!r}") from None
    if not BOOKIES >= ensemble >= write >= ack >= 1:
        raise argparse.ArgumentTypeError(f"need {BOOKIES} >= E >= Qw >= Qa >= 1, got {text}")
    return ensemble, write, ack


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench.wire", description=__doc__.split("\n")[0])
    parser.add_argument("--adds", type=int, default=5000, help="adds per round (default 5000)")
    parser.add_argument("--size", type=int, default=1024, help="bytes per entry (default 1024)")
    parser.add_argument("--window", type=int, default=100, help="adds in flight at most (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the median is reported (default 3)")
    parser.add_argument("--quorums", type=_quorums, default=(3, 3, 2), help="E,Qw,Qa (default 3,3,2)")
    args = parser.parse_args(argv)
    for option in ("adds", "size", "window", "rounds"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1")
    settings = Settings(args.adds, args.size, args.window, args.rounds, args.quorums)
    out = output_console()
    try:
        with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-wire-") as root:
            rates = bench(Path(root), settings)
    except JavaSetupError as exc:
        print(f"the benchmark runs the released Java client: {exc}", file=sys.stderr)
        return 3
    except ClusterError as exc:
        print(f"the benchmark's cluster failed: {exc}", file=sys.stderr)
        return 1
    ensemble, write, ack = settings.quorums
    table = Table(
        title=f"The BookKeeper 4.17.2 Java client's adds on {BOOKIES} bookies: E={ensemble} Qw={write} Qa={ack}, "
        f"{settings.size}-byte entries, at most {settings.window} in flight, fsync on; "
        f"the median of {settings.rounds} rounds of {settings.adds}"
    )
    for column in ("bookies", "adds/s", "seconds per round", "ratio to real"):
        table.add_column(column, justify="left" if column == "bookies" else "right")
    for rate in rates:
        table.add_row(
            rate.bookies,
            f"{rate.per_second:,.0f}",
            " ".join(f"{s:.2f}" for s in rate.seconds),
            f"{rate.per_second / rates[0].per_second:.2f}",
        )
    out.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
