"""Threads that drive a :class:`~.bookie.Bookie` for real use: group commit with a journal and a force-write thread.

As BookKeeper's bookie runs (``Journal.run``, ``Journal.ForceWriteThread``,
``SyncThread``):

- clients call :meth:`BookieRunner.add_entry` (and the fence and LAC
  requests) from any thread; the request enters the memtable and the
  journal buffer at once and the call returns a future for the reply;
- the journal thread writes the buffer to the OS when the oldest buffered
  record has waited ``max_group_wait`` seconds, when ``max_group_bytes`` are
  buffered, or at once when ``flush_when_queue_empty``; it rolls the journal
  over when the file is full;
- the force-write thread takes every batch written so far, fsyncs each file
  once, outside the lock, then advances the mark and completes the futures:
  one fsync acknowledges every request written while the previous one ran;
- the checkpoint thread, if ``checkpoint_interval`` is given, checkpoints
  that often.

The bookie is not thread-safe: every call into it holds one lock, except the
fsync itself. The bookie's own steps stay deterministic; only their
interleaving comes from the threads.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

from ledgerspec.reference.bookie.bookie import Bookie, Request

__all__ = ["BookieRunner"]


class BookieRunner:
    """A journal thread, a force-write thread and an optional checkpoint thread around one started bookie."""

    def __init__(
        self,
        bookie: Bookie,
        *,
        max_group_wait: float = 0.002,  # journalMaxGroupWaitMSec
        max_group_bytes: int = 512 * 1024,  # journalBufferedWritesThreshold
        flush_when_queue_empty: bool = False,  # journalFlushWhenQueueEmpty
        checkpoint_interval: float | None = None,  # flushInterval, in seconds
    ) -> None:
        self.bookie = bookie
        self.max_group_wait = max_group_wait
        self.max_group_bytes = max_group_bytes
        self.flush_when_queue_empty = flush_when_queue_empty
        self.checkpoint_interval = checkpoint_interval
        self.fsyncs = 0  # force writes done (batches of batches)
        self.acknowledged = 0  # replies delivered
        self.error: BaseException | None = None  # what stopped a thread, if anything did
        self._lock = threading.Condition()
        self._futures: dict[int, Future[Request]] = {}
        self._replied_early: set[int] = set()
        self._first_buffered: float | None = None
        self._running = False
        self._threads: list[threading.Thread] = []
        bookie.on_reply = self._on_reply

    def start(self) -> BookieRunner:
        self._running = True
        targets = [("journal", self._journal_loop), ("force-write", self._force_write_loop)]
        if self.checkpoint_interval is not None:
            targets.append(("checkpoint", self._checkpoint_loop))
        for name, target in targets:
            thread = threading.Thread(target=self._guard, args=(target,), name=f"bookie-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Write and fsync what is buffered, stop the threads, and close the bookie."""
        with self._lock:
            self._running = False
            self._lock.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        if self.error is None:
            with self._lock:
                self.bookie.force_write()
        self.bookie.close()

    def __enter__(self) -> BookieRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- requests

    def add_entry(self, entry: bytes, master_key: bytes, *, recovery: bool = False) -> Future[Request]:
        return self._submit(self.bookie.add_entry, entry, master_key, recovery=recovery)

    def fence_ledger(self, ledger_id: int, master_key: bytes) -> Future[Request]:
        return self._submit(self.bookie.fence_ledger, ledger_id, master_key)

    def set_explicit_lac(self, lac_buffer: bytes, master_key: bytes) -> Future[Request]:
        return self._submit(self.bookie.set_explicit_lac, lac_buffer, master_key)

    def _submit(self, step: Any, *args: Any, **kwargs: Any) -> Future[Request]:
        future: Future[Request] = Future()
        with self._lock:
            if self.error is not None:
                raise RuntimeError("the bookie runner stopped") from self.error
            request: Request = step(*args, **kwargs)
            if request.seq in self._replied_early:
                self._replied_early.discard(request.seq)
                future.set_result(request)
            else:
                self._futures[request.seq] = future
            if self._first_buffered is None and self.bookie.journal.buffered_bytes:
                self._first_buffered = time.monotonic()
            self._lock.notify_all()
        return future

    def _on_reply(self, request: Request) -> None:  # called by the bookie, under the lock
        self.acknowledged += 1
        future = self._futures.pop(request.seq, None)
        if future is None:
            self._replied_early.add(request.seq)
        else:
            future.set_result(request)

    # -- threads

    def _guard(self, loop: Any) -> None:
        try:
            loop()
        except BaseException as exc:  # a crash (real or simulated) stops the runner: fail every waiting request
            with self._lock:
                self.error = exc
                self._running = False
                for future in self._futures.values():
                    future.set_exception(exc)
                self._futures.clear()
                self._lock.notify_all()

    def _journal_loop(self) -> None:
        with self._lock:
            while self._running:
                if self.bookie.journal.buffered_bytes == 0:
                    self._lock.wait()
                    continue
                if not self.flush_when_queue_empty:
                    assert self._first_buffered is not None
                    deadline = self._first_buffered + self.max_group_wait
                    while self._running and self.bookie.journal.buffered_bytes < self.max_group_bytes:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self._lock.wait(remaining)
                self._first_buffered = None
                self.bookie.journal_flush()
                if self.bookie.journal_full:
                    self.bookie.roll_journal()
                self._lock.notify_all()

    def _force_write_loop(self) -> None:
        while True:
            with self._lock:
                while self._running and not self.bookie.has_batches():
                    self._lock.wait()
                if not self._running:
                    return
                batch = self.bookie.take_batch()
            self.bookie.journal_sync(batch)  # the fsync, outside the lock: the journal thread keeps writing
            with self._lock:
                self.fsyncs += 1
                self.bookie.journal_synced(batch)

    def _checkpoint_loop(self) -> None:
        assert self.checkpoint_interval is not None
        with self._lock:
            while self._running:
                self._lock.wait(self.checkpoint_interval)
                if self._running:
                    self.bookie.checkpoint()
