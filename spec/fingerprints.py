"""Seen states as 64-bit fingerprints, each with its predecessor, the way TLC keeps them.

An explorer that keeps every whole state it has seen (1 to 2 KB each for the
ledger spec) runs out of memory long before TLC does. TLC keeps a 64-bit
fingerprint per distinct state instead, and, apart, a record of which state
each one was first reached from, from which it rebuilds a counterexample by
running the spec again from Init. :class:`FingerprintStore` does the same:

- a state's fingerprint is its value hash, 64 bits (:func:`fingerprint`):
  equal states have equal fingerprints; the spec's states are immutable
  values that compute it once (``attrs.frozen(cache_hash=True)``). Strings
  hash with the process's seed, so fingerprints differ from one run to the
  next; within a run (and in the processes it forks) they are fixed;
- a record per distinct state, in the order they were found: its fingerprint
  and the record of its predecessor, 16 bytes in two ``array`` columns;
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

from array import array
from typing import Any

__all__ = ["NO_RECORD", "FingerprintStore", "collision_probability", "fingerprint"]

NO_RECORD = -1  # the predecessor of an initial state


def fingerprint(state: Any) -> int:
    """The state's 64-bit fingerprint: its value hash."""
    return hash(state)


def collision_probability(distinct: int, generated: int) -> float:
    """TLC's optimistic estimate of the probability that two distinct states shared a fingerprint."""
    return distinct * max(generated - distinct, 0) / 2.0**64


class FingerprintStore:
    """The fingerprints of the distinct states found, and the record each was first reached from."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._fingerprints = array("q")
        self._parents = array("q")

    def __len__(self) -> int:
        return len(self._fingerprints)

    def add(self, fp: int, parent: int) -> int | None:
        """Record a state first reached from record ``parent`` (``NO_RECORD``: initial); its record, or None
        when a state with this fingerprint was seen already."""
        if fp in self._seen:
            return None
        self._seen.add(fp)
        self._fingerprints.append(fp)
        self._parents.append(parent)
        return len(self._fingerprints) - 1

    def path(self, record: int) -> list[int]:
        """The fingerprints of the states from an initial state to ``record``, in order."""
        fps = []
        while record != NO_RECORD:
            fps.append(self._fingerprints[record])
            record = self._parents[record]
        fps.reverse()
        return fps

    def nbytes(self) -> int:
        """Bytes held by the two record columns (the seen set not counted: it is Python's)."""
        return self._fingerprints.itemsize * len(self._fingerprints) * 2
