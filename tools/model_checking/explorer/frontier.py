"""One level of a breadth-first search: its states, in record order, in memory and past a bound on disk.

The frontier of a breadth-first search is a good part of all its states. A
:class:`Frontier` holds each as a whole Python state while its process holds
less than ``spill_above`` bytes; past that, the states that follow are packed
(:class:`~.packing.StatePacker`, a few hundred bytes each) and appended to an
unnamed temporary file, as TLC keeps its queue on disk. The states come back
in the order they were added: those in memory, then those on disk.
Expanding a state needs it whole anyway, so a frontier that fits in memory
costs nothing to pack.
"""

from __future__ import annotations

import heapq
import os
import struct
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ledgerspec.tools.model_checking.explorer.packing import StatePacker

__all__ = ["Frontier", "resident_bytes"]

Item = tuple[Any, int]  # (state, its record)

_HEADER = struct.Struct("<qI")  # record, packed length
_CHECK_EVERY = 1024  # states added between two looks at the resident memory


def resident_bytes(pid: int | None = None) -> int:
    """The bytes a process (this one by default) holds in memory now: its resident set, from /proc; 0 where
    there is none."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


class Frontier:
    """States with their records, added in record order (see the module docstring)."""

    def __init__(self, packer: StatePacker, spill_above: int | None, directory: str | None = None) -> None:
        self.packer = packer
        self.spill_above = spill_above
        self.directory = directory
        self._memory: list[Item] = []
        self._disk: IO[bytes] | None = None
        self._on_disk = 0
        self._until_check = 1  # look at the first state added, then every _CHECK_EVERY

    def __len__(self) -> int:
        return len(self._memory) + self._on_disk

    @property
    def spilled(self) -> int:
        """How many of the states are on disk."""
        return self._on_disk

    def append(self, state: Any, record: int) -> None:
        if self._disk is None:
            self._memory.append((state, record))
            self._until_check -= 1
            if self._until_check <= 0:
                self._until_check = _CHECK_EVERY
                if self.spill_above is not None and resident_bytes() > self.spill_above:
                    self._disk = tempfile.TemporaryFile(dir=self.directory)  # noqa: SIM115 - closed by close()
            return
        packed = self.packer.pack(state)
        self._disk.write(_HEADER.pack(record, len(packed)))
        self._disk.write(packed)
        self._on_disk += 1

    def extend(self, items: Iterable[Item]) -> None:
        for state, record in items:
            self.append(state, record)

    def __iter__(self) -> Iterator[Item]:
        yield from self._memory
        if self._disk is not None and self._on_disk:
            self._disk.flush()
            self._disk.seek(0)
            read, unpack, header = self._disk.read, self.packer.unpack, _HEADER.size
            for _ in range(self._on_disk):
                record, size = _HEADER.unpack(read(header))
                yield unpack(read(size)), record
            self._disk.seek(0, os.SEEK_END)

    def take_evenly(self, count: int) -> list[Item]:
        """Remove ``count`` states spread evenly over the frontier and return them, in order: a worker that
        takes them then holds its share of every stretch of records, which the search expands a chunk at a
        time."""
        total = len(self)
        rest = self._empty()
        given: list[Item] = []
        for position, (state, record) in enumerate(self):
            if (position + 1) * count // total > position * count // total:
                given.append((state, record))
            else:
                rest.append(state, record)
        self._become(rest)
        return given

    def merge(self, items: list[Item]) -> None:
        """Add states from elsewhere, each put in its place by record."""
        merged = self._empty()
        for state, record in heapq.merge(self, items, key=lambda item: item[1]):
            merged.append(state, record)
        self._become(merged)

    def close(self) -> None:
        """Let go of every state: the file on disk is removed."""
        if self._disk is not None:
            self._disk.close()
        self._memory, self._disk, self._on_disk = [], None, 0
        self._until_check = 1

    def _empty(self) -> Frontier:
        return Frontier(self.packer, self.spill_above, self.directory)

    def _become(self, other: Frontier) -> None:
        if self._disk is not None:
            self._disk.close()
        self._memory, self._disk, self._on_disk = other._memory, other._disk, other._on_disk
        self._until_check = other._until_check
