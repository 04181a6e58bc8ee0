"""The specs ledgerspec knows, by the name the command line uses."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import attrs
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.autorecovery.autorecovery_models import MODELS as AUTORECOVERY_MODELS
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.spec.bookie.bookie_models import MODELS as BOOKIE_MODELS
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.spec.cursor.cursor_models import MODELS as CURSOR_MODELS
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_models import MODELS as LEDGER_MODELS
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger_models import MODELS as MANAGED_LEDGER_MODELS
from ledgerspec.spec.models import SpecModels

__all__ = ["SPECS", "SpecEntry", "find", "tla_library"]


@attrs.frozen
class SpecEntry:
    name: str
    python: type[Spec]  # type: ignore[type-arg]
    tla_module: str  # module name of the TLA+ twin, in the spec's own folder
    summary: str
    models: SpecModels  # the models checked on both engines, the seeded bugs, the models explored

    @property
    def tla_path(self) -> Path:
        return Path(str(files(f"ledgerspec.spec.{self.name}") / f"{self.tla_module}.tla"))


def tla_library() -> Path:
    """The folder of the TLA+ modules the specs share (``positions.tla``): TLC looks there after a spec's own."""
    return Path(str(files("ledgerspec.spec")))


SPECS: dict[str, SpecEntry] = {
    entry.name: entry
    for entry in (
        SpecEntry(
            "ledger",
            LedgerSpec,
            "ledger",
            "ledger append with striping, LAC, ensemble change, fencing and recovery",
            LEDGER_MODELS,
        ),
        SpecEntry(
            "bookie",
            BookieSpec,
            "bookie",
            "one bookie's journal, memtable, entry log and index, LastLogMark, crashes and replay",
            BOOKIE_MODELS,
        ),
        SpecEntry(
            "managed_ledger",
            ManagedLedgerSpec,
            "managed_ledger",
            "a Pulsar topic's ledger list: publish with dedup, rollover, broker crash and reopen, trimming",
            MANAGED_LEDGER_MODELS,
        ),
        SpecEntry(
            "cursor",
            CursorSpec,
            "cursor",
            "a Pulsar durable cursor: acks, persistence to its ledger and znode, crash, restore and rollback",
            CURSOR_MODELS,
        ),
        SpecEntry(
            "autorecovery",
            AutorecoverySpec,
            "autorecovery",
            "autorecovery of a closed ledger: auditor election, under-replication marking, fragment re-replication",
            AUTORECOVERY_MODELS,
        ),
    )
}


def find(name: str) -> SpecEntry:
    """The spec of that name; ``-`` stands for ``_`` (``managed-ledger``, as the command line also spells it)."""
    entry = SPECS.get(name) or SPECS.get(name.replace("-", "_"))
    if entry is None:
        raise KeyError(f"unknown spec {name!r}; known specs: {', '.join(SPECS)}")
    return entry
