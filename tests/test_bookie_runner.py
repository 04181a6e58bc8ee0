"""The threaded runner: group commit under concurrent clients, failures, and the checkpoint thread."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from bookie_support import KEY, entry, lac, started, survivors_violations
from ledgerspec.reference.bookie import FaultyFileSystem, LedgerFencedError, Request, SimulatedCrash
from ledgerspec.reference.bookie.runner import BookieRunner


def test_concurrent_clients_share_fsyncs_and_every_ack_is_durable(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    bookie = started(tmp_path, fs)
    runner = BookieRunner(bookie, max_group_wait=0.005)
    futures: list[Future[Request]] = []
    lock = threading.Lock()

    def client(ledger: int) -> None:
        for e in range(40):
            future = runner.add_entry(entry(ledger, e), KEY)
            with lock:
                futures.append(future)
            if e % 10 == 9:
                future.result()  # wait now and then, as a client with a window of pending adds

    with runner:
        threads = [threading.Thread(target=client, args=(ledger,)) for ledger in range(1, 5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert {f.result().entry_id for f in futures} == set(range(40)) and len(futures) == 160
        journal_fsyncs = sum(e.op == "fsync" and e.path.endswith(".txn") for e in fs.events)
        assert journal_fsyncs < 160  # grouped: fewer journal fsyncs than adds
    fs.power_loss()
    after = started(tmp_path, fs)
    assert survivors_violations(bookie, after) == []
    assert len([r for r in bookie.replies if r.kind.value == "add"]) == 160


def test_fence_and_lac_through_the_runner(tmp_path: Path) -> None:
    bookie = started(tmp_path)
    with BookieRunner(bookie, flush_when_queue_empty=True) as runner:
        runner.add_entry(entry(1, 0), KEY).result()
        fence = runner.fence_ledger(1, KEY)
        assert fence.result(timeout=10).kind.value == "fence"
        assert runner.fence_ledger(1, KEY).result(timeout=10).kind.value == "fence"  # answered at once
        with pytest.raises(LedgerFencedError):
            runner.add_entry(entry(1, 1), KEY)
        runner.set_explicit_lac(lac(1, 0), KEY).result(timeout=10)
    after = started(tmp_path)
    assert after.is_fenced(1) and after.read_explicit_lac(1) == 0


def test_a_crash_fails_the_waiting_requests_and_keeps_the_acknowledged_ones(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path), sync_to_disk=False)
    bookie = started(tmp_path, fs)
    fs.crash_at = fs.boundaries + 12  # a few batches in
    runner = BookieRunner(bookie, flush_when_queue_empty=True).start()
    futures = [runner.add_entry(entry(1, e), KEY) for e in range(3)]
    outcomes = []
    for e in range(3, 200):
        try:
            futures.append(runner.add_entry(entry(1, e), KEY))
        except RuntimeError:
            break
        time.sleep(0.0005)
    for future in futures:
        try:
            outcomes.append(future.result(timeout=10) is not None)
        except SimulatedCrash:
            outcomes.append(False)
    runner.stop()
    assert isinstance(runner.error, SimulatedCrash) and True in outcomes and False in outcomes
    fs.power_loss()
    after = started(tmp_path, fs)
    assert survivors_violations(bookie, after) == []


def test_the_checkpoint_thread_persists_the_mark(tmp_path: Path) -> None:
    bookie = started(tmp_path, checkpoint=False)
    with BookieRunner(bookie, flush_when_queue_empty=True, checkpoint_interval=0.01) as runner:
        runner.add_entry(entry(1, 0), KEY).result(timeout=10)
        deadline = time.monotonic() + 30
        while bookie.persisted_mark.file_id == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bookie.persisted_mark.file_id == 1
