"""``ledgerspec serve bookies``: reference bookies on TCP ports, for BookKeeper clients, until interrupted.

Starts ``--count`` reference bookies, each on its own directory under
``--dir`` (a directory it served before is replayed, as a bookie restart
replays its journal) and its own port, speaking BookKeeper's v3 and v2 protocols
(:mod:`ledgerspec.reference.wire`). With ``--zookeeper`` each registers in
that ZooKeeper under ``--ledgers-root`` as BookKeeper's bookie does, so a
BookKeeper client whose ``metadataServiceUri`` names the same ZooKeeper and
root writes its ledgers on them; the cluster must have been formatted
first (``bookkeeper shell initnewcluster``). Prints each bookie's id, then
serves until SIGINT or SIGTERM, and stops the bookies the clean way (exit
status 0). With ``--trace FILE``, the bookies record every request they
serve, and at the stop write it to ``FILE`` as ledger-spec traces in the
``bookies`` observation mode, one per ledger, with a ``manifest.json``
beside it, for ``ledgerspec check FILE``. ``--faults PLAN`` (a JSON list of
fault commands) and ``--control PORT`` (one JSON fault command a line, on
loopback) make the bookies crash, restart, drop or delay answers, fsync
slowly or turn read-only (:mod:`ledgerspec.reference.wire.faults`). With
``--metadata-proxy PORT`` (0: any free one) it also listens for ZooKeeper
clients and passes them to ``--zookeeper``, recording each write ZooKeeper
accepted (:mod:`ledgerspec.reference.wire.zookeeper_proxy`): a client that
connects there has its ledgers' metadata writes in the trace too. Exit
status 2 for bad options, a bad fault plan, or a cluster it cannot register
in.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from typing import Any

from ledgerspec.reference.wire import RegistrationError, ServedBookies
from ledgerspec.reference.wire.faults import FaultError, read_plan
from ledgerspec.tools.cli.commands.base import EXIT_OK, UsageError
from rich.console import Console

__all__ = ["register"]

SERVED = ("bookies",)


def register(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve reference bookies over TCP with BookKeeper's v3 and v2 protocols")
    serve.add_argument("what", help="what to serve: " + ", ".join(SERVED))
    serve.add_argument("-n", "--count", type=int, default=3, help="how many bookies (default: 3)")
    serve.add_argument("--dir", default="ledgerspec-bookies", help="their data directories' parent (bookie-N in it)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on and register (default: loopback)")
    serve.add_argument(
        "--port", type=int, action="append", metavar="PORT", help="each bookie's port, in order (default: any free)"
    )
    serve.add_argument("--zookeeper", metavar="HOST:PORT", help="register the bookies in this ZooKeeper")
    serve.add_argument("--ledgers-root", default="/ledgers", help="the cluster's root znode (default: /ledgers)")
    serve.add_argument("--json", action="store_true", help="print the bookies as one JSON object once they serve")
    serve.add_argument(
        "--trace",
        metavar="FILE",
        help="record what the bookies serve; at the stop write it to FILE as traces (manifest.json beside it)",
    )
    serve.add_argument("--faults", metavar="PLAN", help="a fault plan: a JSON list of fault commands")
    serve.add_argument(
        "--control", type=int, metavar="PORT", help="take fault commands on this loopback port (0: any free one)"
    )
    serve.add_argument(
        "--metadata-proxy",
        type=int,
        metavar="PORT",
        help="listen for ZooKeeper clients on this port (0: any free one), pass them to --zookeeper and record "
        "their metadata writes in the trace",
    )
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.what not in SERVED:
        raise UsageError(f"unknown thing to serve {args.what!r}; it serves: {', '.join(SERVED)}")
    if args.count < 1:
        raise UsageError(f"--count must be at least 1, got {args.count}")
    if args.metadata_proxy is not None and args.zookeeper is None:
        raise UsageError("--metadata-proxy passes clients to a ZooKeeper: give it with --zookeeper")
    if args.port is not None and len(args.port) != args.count:
        raise UsageError(f"{len(args.port)} --port given for {args.count} bookies: give one for each, or none")
    try:
        plan = read_plan(Path(args.faults), args.count) if args.faults else []
    except FaultError as exc:
        raise UsageError(str(exc)) from None
    served = ServedBookies(
        Path(args.dir),
        args.count,
        host=args.host,
        ports=args.port,
        zookeeper=args.zookeeper,
        ledgers_root=args.ledgers_root,
        trace=Path(args.trace) if args.trace else None,
        plan=plan,
        control=args.control,
        metadata_proxy=args.metadata_proxy,
    )
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            served.start()
        except (RegistrationError, OSError) as exc:
            served.stop()
            raise UsageError(str(exc)) from None
        _report(served, args, out)
        stop.wait()
        served.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    err.print("stopped: the bookies' files are flushed", highlight=False)
    if served.trace is not None:
        ledgers = len(served.trace.ledgers())
        written = f"traces of {ledgers} ledgers written to {args.trace}" if ledgers else "no ledger served: no trace"
        err.print(written, highlight=False)
        for trace, why in served.trace.metadata_not_recorded.items():
            err.print(f"{trace}: its metadata writes are left out of the trace: {why}", highlight=False)
    return EXIT_OK


def _report(served: ServedBookies, args: argparse.Namespace, out: Console) -> None:
    bookies = [{"id": b.bookie_id, "dir": str(b.directory)} for b in served.bookies]
    if args.json:
        print(
            json.dumps(
                {
                    "bookies": bookies,
                    "zookeeper": args.zookeeper,
                    "ledgers_root": args.ledgers_root,
                    "control_port": served.control_port,
                    "metadata_proxy": served.metadata_address,
                }
            )
        )
    else:
        for bookie in bookies:
            out.print(f"bookie {bookie['id']} serving, files in {bookie['dir']}", highlight=False)
        where = f"registered in {args.zookeeper}{args.ledgers_root}" if args.zookeeper else "not registered anywhere"
        out.print(f"{len(bookies)} bookies {where}; Ctrl-C stops them", highlight=False)
        if served.control_port is not None:
            out.print(f"fault commands on 127.0.0.1:{served.control_port}, one JSON object a line", highlight=False)
        if served.metadata_address is not None:
            out.print(
                f"ZooKeeper for clients at {served.metadata_address}: their metadata writes are recorded",
                highlight=False,
            )
    out.file.flush()
