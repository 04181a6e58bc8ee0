"""New ledger ids from the metadata store, as BookKeeper's hierarchical ledger manager draws them.

BookKeeper (``HierarchicalLedgerManagerFactory.newLedgerIdGenerator``) uses
ZooKeeper's sequential nodes as a counter:

1. ``ZkLedgerIdGenerator``: create the ephemeral sequential node
   ``<root>/idgen/ID-`` (parents made as needed); the 10-digit suffix
   ZooKeeper appends is the new id; delete the node again. The counter is
   the number of children ``idgen`` has ever had, so ids go 0, 1, 2, ...
   An id at or above 2^31 - 1 (or negative: the counter is a Java int)
   is an overflow.
2. ``LongZkLedgerIdGenerator``, once ``<root>/idgen-long`` exists (the first
   overflow creates it): the high 32 bits come from the largest
   ``<root>/idgen-long/HOB-<%010d>`` directory (starting at 1), the low bits
   from a sequential ``ID-`` node under it as in 1; when the low bits
   overflow, the next HOB directory is created. All but the newest three HOB
   directories are deleted as they accumulate.

Ids are unique, not gap-free: a failed create after the draw loses its id.
BookKeeper caches the list of HOB directories; this allocator lists them on
every draw of a long id, which gives the same ids.
"""

from __future__ import annotations

import contextlib

from ledgerspec.reference.metadata.ledger_paths import (
    DEFAULT_LEDGERS_ROOT,
    IDGEN_LONG_NODE,
    IDGEN_NODE,
    LONG_LAYOUT_FIRST_ID,
)
from ledgerspec.reference.metadata.store import (
    ANY_VERSION,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
)

__all__ = ["ID_PREFIX", "LedgerIdAllocator"]

ID_PREFIX = "ID-"  # ZkLedgerIdGenerator.LEDGER_ID_GEN_PREFIX
_HOB_PREFIX = "HOB-"
_KEPT_HOB_DIRECTORIES = 3


class LedgerIdAllocator:
    """Draws ledger ids under ``root`` (``/ledgers``) of a metadata store."""

    def __init__(self, store: MetadataStore, root: str = DEFAULT_LEDGERS_ROOT) -> None:
        self.store = store
        self.root = root

    def _draw(self, directory: str) -> int | None:
        """One id from a sequential node under ``directory``; None on overflow."""
        prefix = f"{directory}/{ID_PREFIX}"
        created = self.store.create(prefix, ephemeral=True, sequential=True, make_parents=True)
        self.store.delete(created, version=ANY_VERSION)
        drawn = int(created[len(prefix) :])
        return drawn if 0 <= drawn < LONG_LAYOUT_FIRST_ID else None

    def next_id(self) -> int:
        """A ledger id no earlier call on this store has returned."""
        long_directory = f"{self.root}/{IDGEN_LONG_NODE}"
        if self.store.exists(long_directory) is None:
            drawn = self._draw(f"{self.root}/{IDGEN_NODE}")
            if drawn is not None:
                return drawn
            with contextlib.suppress(NodeExistsError):
                self.store.create(long_directory, make_parents=True)
        return self._next_long_id(long_directory)

    def _next_long_id(self, long_directory: str) -> int:
        while True:
            high_bits = sorted(
                int(name[len(_HOB_PREFIX) :])
                for name in self.store.children(long_directory)
                if name.startswith(_HOB_PREFIX) and name[len(_HOB_PREFIX) :].isdigit()
            )
            if not high_bits:
                self._make_hob_directory(long_directory, 1)
                continue
            low_bits = self._draw(f"{long_directory}/{_HOB_PREFIX}{high_bits[-1]:010d}")
            self._collect_old_hob_directories(long_directory, high_bits)
            if low_bits is not None:
                return high_bits[-1] << 32 | low_bits
            self._make_hob_directory(long_directory, high_bits[-1] + 1)

    def _make_hob_directory(self, long_directory: str, high_bits: int) -> None:
        with contextlib.suppress(NodeExistsError):  # another client made it first
            self.store.create(f"{long_directory}/{_HOB_PREFIX}{high_bits:010d}")

    def _collect_old_hob_directories(self, long_directory: str, high_bits: list[int]) -> None:
        for old in high_bits[:-_KEPT_HOB_DIRECTORIES]:
            # BookKeeper deletes with version 0 and ignores failures (a directory still in use, say).
            with contextlib.suppress(MetadataStoreError):
                self.store.delete(f"{long_directory}/{_HOB_PREFIX}{old:010d}", version=0)
