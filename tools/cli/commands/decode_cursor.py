"""``ledgerspec decode-cursor``: Pulsar's cursor and ledger-list bytes as readable JSON.

Reads the bytes of a ``ManagedCursorInfo`` (a cursor's znode), a
``PositionInfo`` (a record of a cursor ledger) or a ``ManagedLedgerInfo`` (a
topic's ledger list) from a file, or from a znode of a ZooKeeper server
(``--zookeeper HOST:PORT PATH``), and prints them as JSON (positions as
``"ledger:entry"``; see ``reference/metadata/managed_ledger_format.py``).

Which message the bytes hold: ``--type``, else the path of a znode under
``/managed-ledgers`` (a topic's znode holds a ``ManagedLedgerInfo``, its
children ``ManagedCursorInfo``), else the first of cursor-info,
position-info, ledger-info whose required fields the bytes have
(a ``ManagedCursorInfo`` needs fields 1, 2 and 3; a ``PositionInfo`` 1 and 2;
a ``ManagedLedgerInfo`` parses from a list of ledgers).

Exit status: 0 decoded; 2 bad input (no such file or znode, bytes that are
none of the three), with a message naming the file or path and the problem.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledgerspec.reference.metadata.managed_ledger_format import (
    ManagedLedgerFormatError,
    decode_managed_cursor_info,
    decode_managed_ledger_info,
    decode_position_info,
    to_json,
)
from ledgerspec.reference.metadata.managed_ledger_paths import split_path
from ledgerspec.tools.cli.commands.base import EXIT_OK, UsageError
from rich.console import Console

__all__ = ["DECODERS", "decode", "register"]

DECODERS: dict[str, Callable[[bytes], Any]] = {
    "cursor-info": decode_managed_cursor_info,
    "position-info": decode_position_info,
    "ledger-info": decode_managed_ledger_info,
}


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "decode-cursor", help="decode ManagedCursorInfo, PositionInfo or ManagedLedgerInfo bytes into JSON"
    )
    parser.add_argument("source", metavar="FILE|PATH", help="a file, or with --zookeeper a znode path")
    parser.add_argument("--zookeeper", metavar="HOST:PORT", help="read the znode PATH from this ZooKeeper server")
    parser.add_argument("--type", choices=tuple(DECODERS), help="the message the bytes hold (default: detected)")
    parser.set_defaults(run=_decode)


def decode(data: bytes, kind: str | None, where: str) -> dict[str, Any]:
    """The bytes as JSON; :class:`UsageError` naming ``where`` when they are not the message asked for."""
    kinds = [kind] if kind is not None else list(DECODERS)
    problems = []
    for name in kinds:
        try:
            return to_json(DECODERS[name](data))
        except ManagedLedgerFormatError as e:
            problems.append(f"not a {name}: {e}")
    raise UsageError(f"{where} ({len(data)} bytes): " + "; ".join(problems))


def _kind_of_path(path: str) -> str | None:
    try:
        _, cursor = split_path(path)
    except ValueError:
        return None
    return "ledger-info" if cursor is None else "cursor-info"


def _decode(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.zookeeper:
        data = _read_znode(args.zookeeper, args.source)
        kind = args.type or _kind_of_path(args.source)
        where = f"znode {args.source} on {args.zookeeper}"
    else:
        try:
            data = Path(args.source).read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read {args.source}: {e.strerror}") from None
        kind, where = args.type, args.source
    print(json.dumps(decode(data, kind, where), indent=2))
    return EXIT_OK


def _read_znode(hosts: str, path: str) -> bytes:
    from ledgerspec.reference.metadata import MetadataStoreError, NoNodeError
    from ledgerspec.reference.metadata.zookeeper import ZooKeeperMetadataStore

    try:
        store = ZooKeeperMetadataStore(hosts, timeout=5.0)
    except MetadataStoreError as e:
        raise UsageError(f"cannot reach ZooKeeper at {hosts}: {e}") from None
    try:
        return store.get(path).value
    except NoNodeError:
        raise UsageError(f"no znode {path} on {hosts}") from None
    except (MetadataStoreError, ValueError) as e:
        raise UsageError(f"cannot read znode {path} on {hosts}: {e}") from None
    finally:
        store.close()
