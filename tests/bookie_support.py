"""What the bookie tests share: entries, a started bookie, and a crash sweep over every file-system boundary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledgerspec.reference.bookie import (
    Bookie,
    BookieConfig,
    BookieError,
    BookieLayout,
    FaultyFileSystem,
    FileSystem,
    RequestKind,
    SimulatedCrash,
    check_bookie_files,
    encode_entry,
    encode_lac,
    read_bookie_files,
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


Scenario = Callable[[Bookie], None]


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


def crash_sweep(
    root: Path, scenario: Scenario, config: BookieConfig | None = None, *, power_loss: bool = True
) -> tuple[int, list[str]]:
    """Crash the scenario at every boundary in turn, restart, and collect what the restart lost.

    Returns the number of boundaries of a run without a crash, and one line
    per violation: ``crash at #N: ...``. With ``power_loss`` the crash loses
    what was not durable; without, only the process dies.
    """
    clean = FaultyFileSystem(str(_fresh(root / "clean")), sync_to_disk=False)
    bookie = started(root / "clean", clean, config)
    scenario(bookie)
    boundaries = clean.boundaries
    violations = []
    for crash_at in range(boundaries + 1):
        directory = _fresh(root / f"crash-{crash_at}")
        fs = FaultyFileSystem(str(directory), crash_at=crash_at, sync_to_disk=False)
        crashed = Bookie(BookieLayout.in_data_dir(str(directory)), fs, config)
        try:
            crashed.start()
            scenario(crashed)
        except SimulatedCrash:
            pass
        where = f"crash at {fs.crash_event or 'the end'}"
        if power_loss:
            fs.power_loss()
        else:
            fs.restart_process()
        try:
            after = started(directory, fs, config)
        except BookieError as exc:
            violations.append(f"{where}: the bookie does not restart: {exc}")
            continue
        violations += [f"{where}: {v}" for v in survivors_violations(crashed, after)]
        after.close()
        problems = check_bookie_files(read_bookie_files(after.layout))
        violations += [f"{where}: {p}" for p in problems if p.severity == "error"]
    return boundaries, violations


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def sweep_scenario(bookie: Bookie) -> None:
    """Adds, a fence, a recovery add, an explicit LAC, checkpoints, rollovers, and an unacknowledged tail."""
    bookie.add_entry(entry(1, 0), KEY)
    bookie.add_entry(entry(1, 1), KEY)
    bookie.force_write()
    bookie.checkpoint()
    bookie.add_entry(entry(1, 2), KEY)
    bookie.force_write()
    bookie.fence_ledger(1, KEY)
    bookie.force_write()
    bookie.add_entry(entry(1, 3), KEY, recovery=True)
    bookie.set_explicit_lac(lac(1, 2), KEY)
    bookie.force_write()
    bookie.checkpoint()
    bookie.add_entry(entry(2, 0), KEY)
    bookie.journal_flush()


SWEEP_CONFIG = BookieConfig(journal_max_records=3)
