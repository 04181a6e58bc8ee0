"""Seen states as 64-bit fingerprints, each with its predecessor, the way TLC keeps them.

An explorer that keeps every whole state it has seen (1 to 2 KB each for the
ledger spec) runs out of memory long before TLC does. TLC keeps a 64-bit
fingerprint per distinct state in memory and, on disk, a record of which
state each one was first reached from, from which it rebuilds a
counterexample by running the spec again from Init. :class:`FingerprintStore`
does the same:

- a state's fingerprint is its value hash, 64 bits (:func:`fingerprint`):
  equal states have equal fingerprints; the spec's states are immutable
  values that compute it once (``attrs.frozen(cache_hash=True)``). Strings
  hash with the process's seed, so fingerprints differ from one run to the
  next; within a run (and in the processes it forks) they are fixed;
- the set of fingerprints seen: sorted ``int64`` arrays, 8 bytes a state.
  States come in batches (a part of a breadth-first level), so a batch is
  looked up with one binary search per array, and its new fingerprints
  become one more sorted array; arrays of like size are merged, so there are
  never more than about log2(states) of them;
- a record per distinct state, numbered in the order they were found: its
  fingerprint and the record of its predecessor, 16 bytes written to a file
  (:class:`RecordFile`), read back only to rebuild a counterexample;
- :meth:`FingerprintStore.path`: the fingerprints from an initial state to a
  given record, which the explorer follows from Init, choosing at each step
  the first successor (in the spec's action order) with the next fingerprint:
  the same step the search took, so the same shortest behaviour.

Two distinct states with one fingerprint would make the search skip the
second: TLC's estimate of that probability, "calculated (optimistic)", is
``distinct × (generated − distinct) / 2^64``
(:func:`collision_probability`); each run reports it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["NO_RECORD", "FingerprintStore", "RecordFile", "collision_probability", "fingerprint"]

NO_RECORD = -1  # the predecessor of an initial state
NOT_NEW = -2  # what :meth:`FingerprintStore.admit` gives a candidate that is no new state


def fingerprint(state: Any) -> int:
    """The state's 64-bit fingerprint: its value hash."""
    return hash(state)


def collision_probability(distinct: int, generated: int) -> float:
    """TLC's optimistic estimate of the probability that two distinct states shared a fingerprint."""
    return distinct * max(generated - distinct, 0) / 2.0**64


class RecordFile:
    """Each record's (fingerprint, predecessor record), appended in record order to an unnamed temporary file."""

    _ROW = 16  # two int64

    def __init__(self, directory: str | None = None) -> None:
        self._file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - closed by close()
        self._count = 0
        self._buffer: list[np.ndarray] = []
        self._buffered = 0

    def __len__(self) -> int:
        return self._count

    def append(self, fps: np.ndarray, parents: np.ndarray) -> None:
        rows = np.empty((len(fps), 2), dtype=np.int64)
        rows[:, 0] = fps
        rows[:, 1] = parents
        self._buffer.append(rows)
        self._buffered += len(fps)
        self._count += len(fps)
        if self._buffered >= 1 << 16:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._file.seek(0, os.SEEK_END)
            for rows in self._buffer:
                self._file.write(rows.tobytes())
            self._buffer, self._buffered = [], 0

    def read(self, record: int) -> tuple[int, int]:
        """(fingerprint, predecessor record) of ``record``."""
        if not 0 <= record < self._count:
            raise IndexError(f"no record {record}: {self._count} recorded")
        self._flush()
        self._file.seek(record * self._ROW)
        fp, parent = np.frombuffer(self._file.read(self._ROW), dtype=np.int64)
        return int(fp), int(parent)

    def close(self) -> None:
        self._file.close()


class FingerprintStore:
    """The fingerprints of the distinct states found, and the record each was first reached from."""

    def __init__(self, directory: str | None = None) -> None:
        self._runs: list[np.ndarray] = []  # sorted, of decreasing size
        self._records = RecordFile(directory)

    def __len__(self) -> int:
        return len(self._records)

    def __enter__(self) -> FingerprintStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._records.close()

    def __contains__(self, fp: int) -> bool:
        return bool(self._seen(np.array([fp], dtype=np.int64))[0])

    def admit(self, fps: Sequence[int], parents: Sequence[int], limit: int | None = None) -> list[int]:
        """Record, in order, each candidate state whose fingerprint was not seen before (nor earlier in the
        batch), first reached from record ``parents[i]`` (``NO_RECORD``: initial); per candidate, its new record
        or ``NOT_NEW``. With ``limit``, at most that many are recorded: the later ones are ``NOT_NEW`` too."""
        n = len(fps)
        if n == 0:
            return []
        batch = np.fromiter(fps, dtype=np.int64, count=n)
        first = np.zeros(n, dtype=bool)
        first[np.unique(batch, return_index=True)[1]] = True  # the first of each fingerprint in the batch
        new = first & ~self._seen(batch)
        positions = np.flatnonzero(new)
        if limit is not None and len(positions) > limit:
            new[positions[limit:]] = False
            positions = positions[:limit]
        records = np.full(n, NOT_NEW, dtype=np.int64)
        records[positions] = np.arange(len(self), len(self) + len(positions), dtype=np.int64)
        if len(positions):
            added = batch[positions]
            self._records.append(added, np.fromiter(parents, dtype=np.int64, count=n)[positions])
            self._add_run(np.sort(added))
        result: list[int] = records.tolist()
        return result

    def add(self, fp: int, parent: int) -> int | None:
        """One candidate (see :meth:`admit`): its new record, or None when its fingerprint was seen already."""
        [record] = self.admit([fp], [parent])
        return None if record == NOT_NEW else record

    def _seen(self, batch: np.ndarray) -> np.ndarray:
        seen = np.zeros(len(batch), dtype=bool)
        for run in self._runs:
            at = np.searchsorted(run, batch)
            at[at == len(run)] = 0
            seen |= run[at] == batch
        return seen

    def _add_run(self, run: np.ndarray) -> None:
        """Keep the runs of decreasing size, each at least twice the next: merging like sizes keeps them few
        and moves each fingerprint about log2(states) times in all."""
        runs = self._runs
        runs.append(run)
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            last = runs.pop()
            merged = np.concatenate((runs.pop(), last))
            merged.sort(kind="stable")  # two sorted runs: the merge is linear
            runs.append(merged)

    def path(self, record: int) -> list[int]:
        """The fingerprints of the states from an initial state to ``record``, in order."""
        fps = []
        while record != NO_RECORD:
            fp, record = self._records.read(record)
            fps.append(fp)
        fps.reverse()
        return fps

    def nbytes(self) -> int:
        """Bytes held in memory by the fingerprint set (the records are on disk)."""
        return sum(run.nbytes for run in self._runs)
