"""Where a ledger's metadata lives: BookKeeper's hierarchical znode paths.

BookKeeper's default ledger manager (``HierarchicalLedgerManager``, through
``StringUtils.getHybridHierarchicalLedgerPath``) names a ledger's znode after
its id, so that no znode gets too many children:

- ids below ``Integer.MAX_VALUE`` (2^31 - 1): the id as ``%010d``, split
  2-4-4, the last part prefixed with ``L``: ledger 1 is
  ``/ledgers/00/0000/L0001`` (the legacy layout, kept for compatibility);
- larger ids (up to 2^63 - 1): the id as ``%019d``, split 3-4-4-4-4:
  ledger 2^32 is ``/ledgers/000/0000/0042/9496/L7296``
  (``LongHierarchicalLedgerManager``).

So the split depends on 2^31 - 1, not on whether the id fits ten digits.
The top-level directories are told apart by their width: two digits for the
legacy layout, three for the long one.
"""

from __future__ import annotations

import re

__all__ = [
    "DEFAULT_LEDGERS_ROOT",
    "IDGEN_LONG_NODE",
    "IDGEN_NODE",
    "LONG_LAYOUT_FIRST_ID",
    "MAX_LEDGER_ID",
    "ledger_id_from_path",
    "ledger_path",
]

DEFAULT_LEDGERS_ROOT = "/ledgers"  # zkLedgersRootPath
LONG_LAYOUT_FIRST_ID = 2**31 - 1  # Integer.MAX_VALUE: the first id with a long path
MAX_LEDGER_ID = 2**63 - 1
IDGEN_NODE = "idgen"  # LegacyHierarchicalLedgerManager.IDGEN_ZNODE
IDGEN_LONG_NODE = "idgen-long"  # LongHierarchicalLedgerManager.IDGEN_ZNODE

_SHORT = re.compile(r"/(\d{2})/(\d{4})/L(\d{4})")
_LONG = re.compile(r"/(\d{3})/(\d{4})/(\d{4})/(\d{4})/L(\d{4})")


def ledger_path(ledger_id: int, root: str = DEFAULT_LEDGERS_ROOT) -> str:
    """The znode of ledger ``ledger_id`` under ``root``."""
    if not 0 <= ledger_id <= MAX_LEDGER_ID:
        raise ValueError(f"ledger id {ledger_id} is outside 0..2^63-1")
    if ledger_id < LONG_LAYOUT_FIRST_ID:
        digits = f"{ledger_id:010d}"
        return f"{root}/{digits[0:2]}/{digits[2:6]}/L{digits[6:10]}"
    digits = f"{ledger_id:019d}"
    return f"{root}/{digits[0:3]}/{digits[3:7]}/{digits[7:11]}/{digits[11:15]}/L{digits[15:19]}"


def ledger_id_from_path(path: str, root: str = DEFAULT_LEDGERS_ROOT) -> int:
    """The ledger id a znode path names; ValueError if it is not a ledger path under ``root``."""
    if not path.startswith(root + "/"):
        raise ValueError(f"{path} is not under the ledgers root {root}")
    rest = path[len(root) :]
    match = _SHORT.fullmatch(rest) or _LONG.fullmatch(rest)
    if match is None:
        raise ValueError(
            f"{path} is not a ledger path (expected {root}/NN/NNNN/LNNNN or {root}/NNN/NNNN/NNNN/NNNN/LNNNN)"
        )
    ledger_id = int("".join(match.groups()))
    if ledger_path(ledger_id, root) != path:
        layout = "short" if ledger_id >= LONG_LAYOUT_FIRST_ID else "long"
        raise ValueError(f"{path} uses the {layout} layout for ledger {ledger_id}, which BookKeeper does not")
    return ledger_id
