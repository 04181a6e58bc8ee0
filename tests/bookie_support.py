"""What the bookie tests share: entries, a started bookie, and what a restart must have kept.

The crash sweep over every file-system boundary is ``ledgerspec.tools.harness.crash_check``
(tests/test_crash_check.py).
"""

from __future__ import annotations

from pathlib import Path

from ledgerspec.reference.bookie import (
    Bookie,
    BookieConfig,
    BookieError,
    BookieLayout,
    FileSystem,
    RequestKind,
    encode_entry,
    encode_lac,
)

KEY = b"master-key-of-twenty"


def entry(ledger: int, entry_id: int, payload: bytes | None = None) -> bytes:
    """Entry ``entry_id`` of ``ledger`` as its writer sends it (LAC = previous entry, CRC32C)."""
    data = payload if payload is not None else f"ledger {ledger} entry {entry_id}".encode()
    return encode_entry(ledger, entry_id, entry_id - 1, 100 * (entry_id + 1), data)


def lac(ledger: int, value: int) -> bytes:
    return encode_lac(ledger, value)


def started(root: Path, fs: FileSystem | None = None, config: BookieConfig | None = None, **kw: bool) -> Bookie:
    """A bookie on ``root`` (``journal/``, ``ledgers/``), started."""
    bookie = Bookie(BookieLayout.in_data_dir(str(root)), fs, config)
    bookie.start(**kw)
    return bookie


def survivors_violations(before: Bookie, after: Bookie) -> list[str]:
    """What a restarted bookie lost of what the crashed one acknowledged, and a stale mark (#2087)."""
    found = []
    for reply in before.replies:
        if reply.kind is RequestKind.ADD:
            try:
                after.read_entry(reply.ledger_id, reply.entry_id)
            except BookieError as exc:
                found.append(f"acked entry {reply.ledger_id}:{reply.entry_id} lost ({exc})")
        elif reply.kind is RequestKind.FENCE and not after.is_fenced(reply.ledger_id):
            found.append(f"acked fence of ledger {reply.ledger_id} lost")
        elif reply.kind is RequestKind.LAC and (after.read_explicit_lac(reply.ledger_id) or -1) < reply.lac:
            found.append(f"acked explicit LAC {reply.lac} of ledger {reply.ledger_id} lost")
    state = after.memory_state()
    if state.mark != state.synced:
        found.append(f"mark {state.mark} is behind the replayed journal {state.synced}")
    return found
