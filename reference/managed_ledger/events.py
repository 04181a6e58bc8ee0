"""The managed ledger's log, in the cursor spec's words: one event per step, named by the spec action it takes.

The managed ledger and its cursors report their own steps as they take them
(``spec/cursor/cursor.py`` names them): ``EntryPublished``, ``LedgerRollsOver``,
``ManagedLedgerOpens``, ``TrimConsumedLedgers``; ``ConsumerAcks(l, e, i)``,
``CursorCreatesLedger``, ``CursorSwitchesLedger``,
``CursorLedgerCreationFails``, ``CursorPersistsToLedger``,
``CursorLedgerWriteFails``, ``CursorLedgerSwitchFails``,
``CursorZnodeWriteFails``, ``CursorDeletesOldLedger(l)``, ``CursorCloses``,
``CursorRecovers``, ``CursorSkipsConsumedLedger``. Whoever drives the broker
logs what happens to it from outside: ``BrokerCrashes`` and
``CursorLedgerLost(l)``. Events are :class:`~ledgerspec.reference.ledger.EngineEvent`
values, the ledger engine's, with the broker as the process that took them.
"""

from __future__ import annotations

from collections.abc import Callable

from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["BROKER", "ManagedLedgerLog"]

BROKER = "broker"


class ManagedLedgerLog:
    """Collects the events of a managed ledger and its cursors, across broker restarts."""

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []
        self.listeners: list[Callable[[EngineEvent], None]] = []

    def emit(self, action: str, *args: int | tuple[int, int], process: str = BROKER) -> None:
        event = EngineEvent(action, args, process, process)
        self.events.append(event)
        for listener in self.listeners:
            listener(event)

    def actions(self) -> list[str]:
        return [event.action for event in self.events]
