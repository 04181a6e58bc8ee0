"""Pulsar message ids: ``ledgerId:entryId:partitionIndex:batchIndex``.

A message id names where a message is stored: the entry (a
:class:`~ledgerspec.spec.positions.Position` of the topic partition's managed
ledger), the partition of a partitioned topic (-1 for a topic that is not
partitioned) and the message's index in its entry's batch (-1 for a message
sent without batching: the entry holds that message alone).

Order, as Pulsar's ``MessageIdImpl.compareTo`` and ``BatchMessageIdImpl``
order ids (``MessageIdAdvUtils``): ledger id, then entry id, then partition,
then batch index; so a message without batching (-1) comes before every
message of a batch in the same entry. Ids of one partition increase in the
order the broker acknowledged the messages (the managed-ledger spec's
``MessageIdsIncrease``): entries are added in order and a new ledger's id is
above every earlier one.

Printed as Pulsar's ``toString`` prints a batch message id, with all four
parts; parsed from three parts (``MessageIdImpl``) or four.
"""

from __future__ import annotations

import attrs
from ledgerspec.spec.positions import Position

__all__ = ["MessageId", "MessageIdError"]


class MessageIdError(ValueError):
    """Text that is not a message id; the message says what is wrong with it."""


@attrs.frozen(order=True)
class MessageId:
    """A message's id (module docstring). Compared as Pulsar compares them."""

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1

    def __attrs_post_init__(self) -> None:
        if self.ledger_id < -1 or self.entry_id < -1 or self.partition < -1 or self.batch_index < -1:
            raise MessageIdError(f"{self}: no part of a message id is below -1")

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.partition}:{self.batch_index}"

    @property
    def position(self) -> Position:
        """The entry that holds the message."""
        return (self.ledger_id, self.entry_id)

    @classmethod
    def of(cls, position: Position, *, partition: int = -1, batch_index: int = -1) -> MessageId:
        return cls(position[0], position[1], partition, batch_index)

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """``ledgerId:entryId:partitionIndex[:batchIndex]``."""
        parts = text.strip().split(":")
        if len(parts) not in (3, 4):
            raise MessageIdError(
                f"{text!r} is not a message id: expected ledgerId:entryId:partitionIndex[:batchIndex], "
                f"got {len(parts)} part(s)"
            )
        names = ("ledgerId", "entryId", "partitionIndex", "batchIndex")
        values = []
        for name, part in zip(names, parts, strict=False):
            try:
                values.append(int(part))
            except ValueError:
                raise MessageIdError(f"{text!r} is not a message id: {name} {part!r} is not an integer") from None
        return cls(*values)

    @classmethod
    def batch(cls, position: Position, size: int, *, partition: int = -1) -> list[MessageId]:
        """The ids of the messages of the entry at ``position``: one without batching, else one per index."""
        if size < 1:
            raise MessageIdError(f"a batch holds at least one message, got {size}")
        if size == 1:
            return [cls.of(position, partition=partition)]
        return [cls.of(position, partition=partition, batch_index=i) for i in range(size)]
