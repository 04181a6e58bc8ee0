"""Faults served bookies show on command: from a plan given at the start, or from a control port as they run.

Each command names a fault and a bookie (``1 ..``), and what the fault needs:

==================  ===================================================================  ==========================
``fault``           the bookie                                                           in the ledger spec
==================  ===================================================================  ==========================
``crash``           dies: connections cut, files as they are, registration gone          ``BookieCrashes``
``restart``         starts again on its files (its journal replayed), registers again    ``BookieRestarts``
``drop-replies``    serves the next ``count`` requests (of ``operation``, if given) but  a reply lost
                    sends no answer                                                      (``replied = FALSE``)
``delay-replies``   sends each answer (of ``operation``) ``ms`` late                     none: time is not modelled
``slow-fsync``      answers each request that changes it (adds, fencing reads, explicit  none
                    LACs) ``ms`` late, as a journal whose fsync is that slow
``read-only``       refuses normal adds ``EREADONLY`` and registers under                a refused add: the client
                    ``available/readonly`` (a bookie whose disks filled up)              replaces the bookie
``writable``        takes adds again, registered as writable
``heal``            drops no more replies and delays nothing
==================  ===================================================================  ==========================

In a plan (a JSON list of commands), each command may say ``after``: it is
applied once the bookies have answered that many requests in all (0, the
default: at the start). On the control port (a TCP port; one JSON command
a line), each is applied at once, and answered with one JSON line:
``{"ok": true, "applied": ...}``, or ``{"ok": false, "error": ...}`` saying
what is wrong and where; the connection stays open.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb

__all__ = ["FAULTS", "BookieFaults", "FaultCommand", "FaultError", "parse_command", "read_plan"]

FAULTS = ("crash", "restart", "drop-replies", "delay-replies", "slow-fsync", "read-only", "writable", "heal")
# The fields each fault takes besides ``fault``, ``bookie`` and ``after``.
_FIELDS = {
    "crash": (),
    "restart": (),
    "drop-replies": ("count", "operation"),
    "delay-replies": ("ms", "operation"),
    "slow-fsync": ("ms",),
    "read-only": (),
    "writable": (),
    "heal": (),
}


class FaultError(ValueError):
    """A fault command that cannot be applied: the message says what is wrong, and where."""


@attrs.frozen
class FaultCommand:
    fault: str
    bookie: int
    count: int = 1  # drop-replies: how many answers
    ms: int = 0  # delay-replies, slow-fsync
    operation: str | None = None  # drop-replies, delay-replies: only answers to this v3 operation
    after: int = 0  # in a plan: once the bookies answered this many requests in all

    def to_json(self) -> dict[str, Any]:
        fields = {"fault": self.fault, "bookie": self.bookie}
        for name in _FIELDS[self.fault]:
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        if self.after:
            fields["after"] = self.after
        return fields


def parse_command(value: object, where: str, bookies: int) -> FaultCommand:
    """The command in a decoded JSON value; :class:`FaultError` naming ``where`` when it is not a valid one for
    ``bookies`` bookies."""
    if not isinstance(value, Mapping):
        raise FaultError(f"{where}: a command is a JSON object, not {json.dumps(value)}")
    fault = value.get("fault")
    if fault not in _FIELDS:
        raise FaultError(f"{where}: unknown fault {json.dumps(fault)}; faults: {', '.join(FAULTS)}")
    allowed = {"fault", "bookie", "after", *_FIELDS[fault]}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise FaultError(f"{where}: {fault} takes no {', '.join(unknown)}; it takes {', '.join(sorted(allowed))}")
    bookie = value.get("bookie")
    if not isinstance(bookie, int) or isinstance(bookie, bool) or not 1 <= bookie <= bookies:
        raise FaultError(f"{where}: bookie must be a number from 1 to {bookies}, not {json.dumps(bookie)}")
    numbers = {}
    for name, least in (("count", 1), ("ms", 0), ("after", 0)):
        if name in value:
            number = value[name]
            if not isinstance(number, int) or isinstance(number, bool) or number < least:
                raise FaultError(f"{where}: {name} must be a whole number, at least {least}, not {json.dumps(number)}")
            numbers[name] = number
    if fault in ("delay-replies", "slow-fsync") and "ms" not in value:
        raise FaultError(f"{where}: {fault} needs ms, the delay in milliseconds")
    operation = value.get("operation")
    operations = list(pb.OperationType.keys())
    if operation is not None and operation not in operations:
        raise FaultError(f"{where}: unknown operation {json.dumps(operation)}; operations: {', '.join(operations)}")
    return FaultCommand(fault, bookie, operation=operation, **numbers)


def read_plan(path: Path, bookies: int) -> list[FaultCommand]:
    """The commands of a plan file (a JSON list), in the order given; :class:`FaultError` naming the file and the
    command that is wrong."""
    try:
        value = json.loads(path.read_text())
    except OSError as exc:
        raise FaultError(f"{path}: cannot read the fault plan: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise FaultError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(value, list):
        raise FaultError(f"{path}: a fault plan is a JSON list of commands")
    return [parse_command(item, f"{path}: command {i}", bookies) for i, item in enumerate(value, start=1)]


@attrs.define
class BookieFaults:
    """What one served bookie is told to do wrong now (module docstring)."""

    drop: int = 0
    drop_operation: str | None = None
    delay_ms: int = 0
    delay_operation: str | None = None
    fsync_ms: int = 0
    read_only: bool = False

    def apply(self, command: FaultCommand) -> None:
        """Take in a command of the faults kept here (not a crash, a restart, nor the read-only registration)."""
        if command.fault == "drop-replies":
            self.drop, self.drop_operation = command.count, command.operation
        elif command.fault == "delay-replies":
            self.delay_ms, self.delay_operation = command.ms, command.operation
        elif command.fault == "slow-fsync":
            self.fsync_ms = command.ms
        elif command.fault in ("read-only", "writable"):
            self.read_only = command.fault == "read-only"
        elif command.fault == "heal":
            self.drop, self.delay_ms, self.fsync_ms = 0, 0, 0

    def answer(self, operation: str, changes: bool) -> tuple[bool, float]:
        """For an answer to ``operation`` (a v3 operation's name; a v2 request's as the v3 one), after a request
        that ``changes`` the bookie (an add, a fencing read, an explicit LAC): whether to send it, and how many
        seconds late."""
        wait = 0.0
        if self.delay_ms and self.delay_operation in (None, operation):
            wait += self.delay_ms / 1000
        if self.fsync_ms and changes:
            wait += self.fsync_ms / 1000
        if self.drop and self.drop_operation in (None, operation):
            self.drop -= 1
            return False, wait
        return True, wait
