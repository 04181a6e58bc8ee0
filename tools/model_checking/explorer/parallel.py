"""The level-by-level search (:mod:`.levels`) on several worker processes, with the same results as on one.

Each worker is a :class:`~.levels.LevelWorker` in a process of its own,
forked, so it has the spec already. It holds a part of each level: the
states it found, and those moved to it when one worker holds much more than
another. For a chunk of a level, the workers expand their states at the
same time and send back only ``(parent record, successor index,
fingerprint)`` per successor, a few bytes pickled; the successor states stay
with them. The main process looks the fingerprints up and numbers the new
states in the order a one-process search meets them, so the fingerprint
store, the records and the predecessors, the counts, the verdicts and the
counterexamples are exactly those of one worker.

The speed-up comes from the successors and the invariants, which are most of
the work; the main process only looks fingerprints up.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import pickle
import signal
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from ledgerspec.tools.model_checking.explorer.exploration import Exploration
from ledgerspec.tools.model_checking.explorer.explorer import Explorer
from ledgerspec.tools.model_checking.explorer.levels import LevelSearch, LevelWorker

__all__ = ["ParallelExplorer", "explore_in_parallel"]

_AHEAD_STATES = 32  # states expanded ahead between two looks for a request: a few milliseconds


def _serve(explorer: Explorer[Any], conn: Connection, spill_above: int | None) -> None:
    """A worker process: answer the search's requests with its :class:`LevelWorker` until told to stop."""
    # Ctrl-C goes to the whole process group: the main process handles it and ends the workers. The worker
    # was forked with SIGINT blocked (see ParallelExplorer.run), so one sent before this line is dropped here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # Spec states are immutable values without cycles: the cyclic collector would only walk them, again and
    # again, as each level's successors pile up.
    gc.disable()
    worker = LevelWorker(explorer, spill_above, explorer.directory)
    while True:
        # Between requests, expand ahead rather than wait for the other workers' rounds to end.
        while worker.can_expand_ahead() and not conn.poll():
            worker.expand_ahead(_AHEAD_STATES)
        method, arguments = conn.recv()
        if method == "stop":
            worker.close()
            conn.close()
            return
        if method == "take":  # the states come next, as the bytes another worker sent
            arguments = (pickle.loads(conn.recv_bytes()),)
        conn.send(getattr(worker, method)(*arguments))


class _Remote:
    """A worker in a process of its own, reached through a pipe."""

    def __init__(self, conn: Connection, pid: int | None) -> None:
        self.conn = conn
        self.pid = pid

    def ask(self, method: str, *arguments: Any) -> None:
        self.conn.send((method, arguments))

    def answer(self) -> Any:
        return self.conn.recv()

    def move(self, count: int, to: Any) -> None:
        """The states pass through this process as the bytes the giver sent, never unpickled here."""
        self.conn.send(("give", (count,)))
        given = self.conn.recv_bytes()
        to.conn.send(("take", ()))
        to.conn.send_bytes(given)
        to.conn.recv()


class ParallelExplorer(Explorer[Any]):
    """:class:`~.explorer.Explorer`'s search on ``workers`` processes (see the module docstring)."""

    def __init__(self, spec: Any, *, workers: int, **options: Any) -> None:
        if options.get("keep_states"):
            raise ValueError("whole states are kept by the one-process search only: leave workers at 1")
        if workers < 2:
            raise ValueError(f"a parallel search takes at least 2 workers, got {workers}")
        super().__init__(spec, **options)
        self.workers = workers

    def run(self) -> Exploration[Any]:
        context = multiprocessing.get_context("fork")
        pipes = [context.Pipe() for _ in range(self.workers)]
        spill_above = self.spill_threshold(self.workers + 1)
        processes = [
            context.Process(target=_serve, args=(self, child, spill_above), daemon=True) for _parent, child in pipes
        ]
        links = [_Remote(parent, None) for parent, _child in pipes]
        try:
            # A Ctrl-C between a fork and the worker's own handler would raise KeyboardInterrupt in the child,
            # in the fork's own hooks, where it runs on as a copy of this process. SIGINT stays blocked while
            # the workers are forked; one sent meanwhile is raised here once it is unblocked.
            with _sigint_blocked():
                for link, process in zip(links, processes, strict=True):
                    process.start()
                    link.pid = process.pid
            return LevelSearch(self, list(links), self.directory).run()
        except BaseException:  # (Ctrl-C, an error): the workers' answers are not wanted any more
            for process in processes:
                if process.pid is not None:
                    process.terminate()
            raise
        finally:
            for link, process in zip(links, processes, strict=True):
                if process.pid is not None and process.is_alive():
                    with contextlib.suppress(OSError):
                        link.ask("stop")
            for process in processes:
                if process.pid is not None:
                    process.join(timeout=5)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back from this thread (and from the processes it forks) until the block ends, when the mask
    is as it was before."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def explore_in_parallel(spec: Any, workers: int, **options: Any) -> Exploration[Any]:
    """Shorthand for ``ParallelExplorer(spec, workers=workers, **options).run()``."""
    return ParallelExplorer(spec, workers=workers, **options).run()
