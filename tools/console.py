"""The consoles the command line and the benchmarks print to, and the progress of their long steps.

On a terminal a console takes the terminal's width. Piped to a file or
another program, Rich would assume 80 columns and cut tables to fit; here it
gets a width that keeps every column whole, so that the figures of a
benchmark or a report survive ``> file``. ``COLUMNS``, when set, still
decides, as Rich lets it. Emoji codes are left as text: ``file:100: message``
names line 100, not an emoji.

:class:`StepProgress` shows how far a long step is. On a terminal it is a
live bar (a spinner for a step whose size is not known); on a console that
is not a terminal (a CI log, ``2> log``), where a live bar would draw
nothing, it prints plain lines instead: one when a step starts, one when it
ends, and between them at most one every :data:`PROGRESS_INTERVAL` seconds
per step. A quiet one (``--json``) shows nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

__all__ = [
    "PIPED_WIDTH",
    "PROGRESS_INTERVAL",
    "RateLimit",
    "StageSteps",
    "StepProgress",
    "duration",
    "output_console",
]

PIPED_WIDTH = 200  # columns when the output is not a terminal
PROGRESS_INTERVAL = 10.0  # seconds between two plain progress lines of one step


def output_console(*, stderr: bool = False) -> Console:
    """A console on standard output (or standard error), as wide as the module docstring says."""
    probe = Console(stderr=stderr, emoji=False)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, width=PIPED_WIDTH, emoji=False)


class RateLimit:
    """At most one event per ``interval`` seconds for each key, by ``clock`` (seconds, monotonic)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._last: dict[Hashable, float] = {}

    def allow(self, key: Hashable) -> bool:
        """Whether an event of ``key`` may happen now: the first always may, a later one once ``interval`` has
        passed since the last allowed. An allowed event counts from now."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return False
        self._last[key] = now
        return True

    def forget(self, key: Hashable) -> None:
        """Start ``key`` afresh: its next event is allowed."""
        self._last.pop(key, None)


def duration(seconds: float) -> str:
    """``4.5 s``, ``2 min 5 s``, ``1 h 3 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


class _Count(ProgressColumn):
    """``done/total`` of a step whose size is known; nothing for one whose size is not."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{int(task.completed):,}/{int(task.total):,}", style="progress.download")


def _plain(description: str) -> str:
    try:
        return Text.from_markup(description).plain
    except MarkupError:
        return description


class StepProgress(Progress):
    """The progress of a command's long steps on ``console`` (standard error), as the module docstring says.

    Used as rich's :class:`~rich.progress.Progress` is: a step is a task (``add_task`` with ``total=None``
    when its size is not known), moved on with ``update`` and ``advance``; it ends when it reaches its
    total, when it is removed, or when the context is left (``stopped`` if by an exception). :meth:`step`
    runs steps one after another, each ending as the next starts. ``interval`` and ``get_time`` set the
    spacing of the plain lines and the clock.
    """

    def __init__(
        self,
        console: Console,
        *,
        quiet: bool = False,
        transient: bool = False,
        interval: float = PROGRESS_INTERVAL,
        get_time: Callable[[], float] | None = None,
    ) -> None:
        #: plain lines rather than a live display: the console is not a terminal
        self.lines = not quiet and not console.is_terminal
        columns = (
            SpinnerColumn(finished_text=" "),
            TextColumn("{task.description}"),
            BarColumn(),
            _Count(),
            TimeElapsedColumn(),
        )
        super().__init__(
            *columns,
            console=console,
            transient=transient,
            get_time=get_time,
            disable=quiet or self.lines,
        )
        self._limit = RateLimit(interval, self.get_time)
        self._ended: set[TaskID] = set()
        self._current: TaskID | None = None
        self._said = threading.RLock()

    # -- what rich's Progress does, and a line for it --------------------------------------------------------
    def add_task(
        self,
        description: str,
        start: bool = True,
        total: float | None = 100.0,
        completed: int = 0,
        visible: bool = True,
        **fields: Any,
    ) -> TaskID:
        task_id = super().add_task(description, start, total, completed, visible, **fields)
        if self.lines:
            with self._said:
                self._limit.allow(task_id)
                task = self._tasks[task_id]
                self._say(task, "started" + (f", {self._counts(task)}" if task.total is not None else ""))
        return task_id

    def update(
        self,
        task_id: TaskID,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        visible: bool | None = None,
        refresh: bool = False,
        **fields: Any,
    ) -> None:
        super().update(
            task_id,
            total=total,
            completed=completed,
            advance=advance,
            description=description,
            visible=visible,
            refresh=refresh,
            **fields,
        )
        self._moved(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._moved(task_id)

    def remove_task(self, task_id: TaskID) -> None:
        self._end(task_id, stopped=False)
        super().remove_task(task_id)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        for task_id in list(self._tasks):
            self._end(task_id, stopped=exc_type is not None)
        super().__exit__(exc_type, exc_val, exc_tb)

    # -- steps one after another -----------------------------------------------------------------------------
    def step(self, description: str | None) -> None:
        """End the step :meth:`step` started last, if any, and start one of unknown size (none for None)."""
        if self._current is not None:
            self.remove_task(self._current)
            self._current = None
        if description is not None:
            self._current = self.add_task(description, total=None)

    # -- the plain lines -------------------------------------------------------------------------------------
    def _open(self, task_id: TaskID) -> Task | None:
        """The task, when plain lines are printed and it has not ended (with ``_said`` held)."""
        task = self._tasks.get(task_id) if self.lines else None
        return None if task is None or task_id in self._ended else task

    def _moved(self, task_id: TaskID) -> None:
        with self._said:
            task = self._open(task_id)
            if task is None:
                return
            if task.finished:
                self._end(task_id, stopped=False)
            elif self._limit.allow(task_id):
                progress = f"{self._counts(task)} ({task.percentage:.0f}%) " if task.total else ""
                self._say(task, f"{progress}after {duration(task.elapsed or 0.0)}")

    def _end(self, task_id: TaskID, *, stopped: bool) -> None:
        with self._said:
            task = self._open(task_id)
            if task is None:
                return
            self._ended.add(task_id)
            self._limit.forget(task_id)
            took = task.finished_time if task.finished_time is not None else task.elapsed or 0.0
            counts = self._counts(task) if task.total is not None else ""
            if stopped:
                self._say(task, f"stopped{f' at {counts}' if counts else ''} after {duration(took)}")
            else:
                self._say(task, f"done{f', {counts}' if counts else ''} in {duration(took)}")

    @staticmethod
    def _counts(task: Task) -> str:
        return f"{int(task.completed):,}/{int(task.total or 0):,}"

    def _say(self, task: Task, what: str) -> None:
        self.console.print(f"{_plain(task.description)}: {what}", markup=False, highlight=False, soft_wrap=True)


class StageSteps:
    """Shows the stages a job reports as steps of a :class:`StepProgress`.

    Called with the stages under way, each as its description and ``(done, total)``: a stage seen for the
    first time starts a step, one seen again moves it on, one no longer under way ends it.
    """

    def __init__(self, progress: StepProgress) -> None:
        self.progress = progress
        self._shown: dict[str, TaskID] = {}

    def __call__(self, stages: Mapping[str, tuple[int, int]]) -> None:
        for description, (done, total) in stages.items():
            if description not in self._shown:
                self._shown[description] = self.progress.add_task(description, total=total, completed=done)
            else:
                self.progress.update(self._shown[description], completed=done, total=total)
        for description in [d for d in self._shown if d not in stages]:
            self.progress.remove_task(self._shown.pop(description))
