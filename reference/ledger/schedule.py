"""Where entries go and when enough bookies answered: BookKeeper's ``RoundRobinDistributionSchedule``.

Entry ids and ensemble indices start at 0, as in BookKeeper: entry ``e``
goes to the bookies at ensemble indices ``(e + i) % E`` for ``i < Qw`` (its
*write set*). With E=4, Qw=3: entry 0 -> indices 0, 1, 2; entry 2 -> 2, 3, 0.

Two quorum rules, both from the same schedule:

- an add completes on ``Qa`` acks from its write set;
- a fencing read (and a plain read of the LAC) is complete when every one of
  the ``E`` write sets has ``Qw - Qa + 1`` replies (``RRQuorumCoverageSet``):
  then no write set has ``Qa`` bookies left that could still ack the old
  writer. The same number of NoSuchEntry replies from one entry's write set
  shows that the entry cannot have reached ``Qa`` acks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

__all__ = ["RoundRobinSchedule"]


@attrs.frozen
class RoundRobinSchedule:
    """The striping of one ledger: ensemble size, write quorum and ack quorum."""

    ensemble_size: int  # E
    write_quorum: int  # Qw
    ack_quorum: int  # Qa

    def __attrs_post_init__(self) -> None:
        e, qw, qa = self.ensemble_size, self.write_quorum, self.ack_quorum
        if not e >= qw >= qa >= 1:
            raise ValueError(f"quorums must satisfy E >= Qw >= Qa >= 1, got E={e}, Qw={qw}, Qa={qa}")

    def write_set_indices(self, entry_id: int) -> tuple[int, ...]:
        """Ensemble indices entry ``entry_id`` is written to."""
        return tuple((entry_id + i) % self.ensemble_size for i in range(self.write_quorum))

    def write_set(self, ensemble: Sequence[str], entry_id: int) -> tuple[str, ...]:
        """Bookies of ``ensemble`` entry ``entry_id`` is written to, in write-set order."""
        return tuple(ensemble[i] for i in self.write_set_indices(entry_id))

    @property
    def missing_quorum(self) -> int:
        """Qw - Qa + 1: replies from one write set that leave fewer than Qa bookies to ack."""
        return self.write_quorum - self.ack_quorum + 1

    def covers(self, ensemble: Sequence[str], replied: Collection[str]) -> bool:
        """Every write set of ``ensemble`` has ``Qw - Qa + 1`` bookies among ``replied`` (RRQuorumCoverageSet)."""
        needed = self.missing_quorum
        return all(
            sum(1 for i in self.write_set_indices(start) if ensemble[i] in replied) >= needed
            for start in range(self.ensemble_size)
        )
