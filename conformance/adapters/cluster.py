"""A real BookKeeper cluster on this machine: ZooKeeper, bookies and a client harness, each its own JVM.

:class:`BookKeeperCluster` starts a ZooKeeper server, formats the cluster's
metadata, and starts bookies, on free ports, in a directory of its own. Each
bookie is a ``org.apache.bookkeeper.server.Main`` process with its own
journal and ledger directories, so that :meth:`~BookKeeperCluster.kill_bookie`
is a real crash (SIGKILL: the bookie gets no chance to flush anything) and
:meth:`~BookKeeperCluster.restart_bookie` replays its journal from the
directories it left. The clients live in one more JVM, the harness
(``java/LedgerspecHarness.java``), driven through :class:`Harness`.

Every JVM logs to a file in the cluster's directory (``zookeeper.log``,
``bookie-N.log``, ``harness.log``); an error that stops a process names its
log. The bookies' journal replay logs each record it replays, and each it
skips, at DEBUG level (``BookieImpl.readJournal``, through the logger named
``org.apache.bookkeeper.bookie.Bookie``): that one logger is at DEBUG, so that
a bookie's log says what its restart restored.

The bookies' ledger storage is one of :data:`BOOKIE_STORAGES`, chosen for the
whole cluster: BookKeeper's default (``SortedLedgerStorage``), the same with
an entry log per ledger (then a checkpoint runs every ``flushInterval``), or
``DbLedgerStorage``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import attrs
import orjson
from kazoo.client import KazooClient
from ledgerspec.conformance.adapters.jars import JarSet, java_executable

__all__ = [
    "BOOKIE_STORAGES",
    "MEMTABLE_PRESSURE_STORAGE",
    "WRITE_CACHE_PRESSURE_STORAGE",
    "BookKeeperCluster",
    "ClusterError",
    "FaultingCluster",
    "Harness",
    "ScenarioCluster",
    "free_port",
    "free_ports",
    "wait_for_port",
]

_LOG4J = """<Configuration status="ERROR">
  <Appenders>
    <File name="file" fileName="${sys:ledgerspec.log}">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p [%t] %c{1} %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.bookkeeper.bookie.Bookie" level="debug"/>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""
_JVM_OPTIONS = ("-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_START_TIMEOUT = 60.0
# ZooKeeper's tick: sessions may be as short as two ticks. A killed bookie's registration lasts until its session
# expires, and its restart waits for that; short sessions keep a restart to a second or two.
_ZK_TICK_MS = 250
_BOOKIE_SESSION_MS = 1500
#: flushInterval. It drives checkpoints only with an entry log per ledger or DbLedgerStorage (the BookieImpl
#: constructor starts a periodic SyncThread then); the default storage checkpoints when its memtable fills or its
#: entry log rotates, which no scenario makes happen, and when a bookie starts, after its journal replay.
CHECKPOINT_INTERVAL_MS = 1000
#: The default storage with a memtable small enough for a scenario's adds to fill it.
MEMTABLE_PRESSURE_STORAGE = "default-small-memtable"
#: DbLedgerStorage with a write cache small enough for a scenario's adds to fill it.
WRITE_CACHE_PRESSURE_STORAGE = "db-small-write-cache"
#: The bookies' ledger storage, by name: the settings added to every bookie's configuration.
BOOKIE_STORAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "default": (),  # SortedLedgerStorage over InterleavedLedgerStorage: journal, entry logs, .idx index files
    "entry-log-per-ledger": (("entryLogPerLedgerEnabled", "true"),),  # the same, checkpointed every flushInterval
    # The default storage with a memtable of 1 MB and entry logs of 1 MB (64 MB and 1 GB by default): an add that
    # fills the memtable makes the bookie flush it to the entry log (SortedLedgerStorage.onSizeLimitReached), and
    # a flush that takes the entry log past its limit rolls it and checkpoints (commitEntryMemTableFlush of
    # EntryLogManagerForSingleEntryLog; no checkpoint without the roll).
    MEMTABLE_PRESSURE_STORAGE: (("skipListSizeLimit", str(1024 * 1024)), ("logSizeLimit", str(1024 * 1024))),
    "db": (("ledgerStorageClass", "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"),),  # index in RocksDB
    # DbLedgerStorage whose SyncThread checkpoints once an hour: a scenario crashes its bookies before the first.
    "db-hourly-checkpoints": (
        ("ledgerStorageClass", "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"),
        ("flushInterval", "3600000"),
    ),
    # DbLedgerStorage with its smallest write cache: 1 MB, two caches of 512 KB, one taking adds while the other is
    # flushed (SingleDirectoryDbLedgerStorage); an add that finds the cache full triggers a flush, a checkpoint.
    # Its timer checkpoints at BookKeeper's default interval, 60 s, so that the full cache is what flushes it.
    WRITE_CACHE_PRESSURE_STORAGE: (
        ("ledgerStorageClass", "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"),
        ("dbStorage_writeCacheMaxSizeMb", "1"),
        ("flushInterval", "60000"),
    ),
}
#: The ledger storages users deploy, on which the whole suite runs (``record bookkeeper --storage``): BookKeeper's
#: default, and DbLedgerStorage, which Pulsar deploys. The others serve the scenarios that need them.
SUITE_STORAGES = ("default", "db")
_REPLY_TIMEOUT = 120.0
_LEDGERS_ROOT = "/ledgers"


class ClusterError(Exception):
    """A process of the cluster failed to start, died, or the harness refused a command."""


def free_port() -> int:
    """A TCP port no one listens on now."""
    (port,) = free_ports(1)
    return port


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports no one listens on now. Each socket stays bound until every port is chosen: a
    port released at once may be handed out again by the next bind (two bookies of one cluster were once given
    the same port, and the second refused to start on the first's cookie)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"{what} exited with status {process.returncode} while starting: see {log}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise ClusterError(f"{what} did not listen on port {port} within {_START_TIMEOUT:.0f} s: see {log}")


@attrs.define
class _Bookie:
    number: int
    port: int
    conf: Path
    process: subprocess.Popen[bytes] | None = None
    stale_session: int | None = None  # the session of a killed process's registration

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"


class ScenarioCluster(Protocol):
    """What a ledger scenario and its recorder use of a cluster: its harness and ZooKeeper, and its bookies by
    number (1 ..), to kill, stop, restart and read the files of. :class:`BookKeeperCluster` is one; a cluster of
    reference bookies is another."""

    storage: str

    @property
    def harness(self) -> Harness | None: ...

    @property
    def zookeeper(self) -> KazooClient: ...

    @property
    def bookie_ids(self) -> list[str]: ...

    def number_of(self, bookie_id: str) -> int: ...

    def bookie_directory(self, n: int) -> Path: ...

    def bookie_log(self, n: int) -> Path: ...

    def wait_for_bookies(self, count: int) -> list[str]: ...

    def kill_bookie(self, n: int) -> None: ...

    def stop_bookie(self, n: int) -> None: ...

    def restart_bookie(self, n: int) -> None: ...


@runtime_checkable
class FaultingCluster(ScenarioCluster, Protocol):
    """A cluster whose bookies show faults on command (a cluster of reference bookies): ``fault`` and its
    ``fields`` as in ``reference.wire.faults``, for bookie ``n``."""

    def apply_fault(self, n: int, fault: str, **fields: int | str) -> None: ...


class BookKeeperCluster:
    """ZooKeeper, ``bookies`` bookies and the client harness, in ``directory`` (module docstring).

    ``storage`` names the bookies' ledger storage (:data:`BOOKIE_STORAGES`);
    ``status`` is told of each step of the start as it begins (each process's JVM takes a while).
    Use it as a context manager: leaving it stops every process it started.
    """

    def __init__(
        self,
        jars: JarSet,
        directory: Path,
        bookies: int = 4,
        storage: str = "default",
        status: Callable[[str], None] | None = None,
    ) -> None:
        if storage not in BOOKIE_STORAGES:
            raise ValueError(f"unknown bookie storage {storage!r}; the storages: {', '.join(BOOKIE_STORAGES)}")
        self.storage = storage
        self.jars = jars
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.xml").write_text(_LOG4J)
        self.zk_port, *bookie_ports = free_ports(1 + bookies)
        self.metadata_uri = f"zk+hierarchical://127.0.0.1:{self.zk_port}{_LEDGERS_ROOT}"
        self._zookeeper: subprocess.Popen[bytes] | None = None
        self._bookies = [self._bookie(n, port) for n, port in enumerate(bookie_ports, 1)]
        self.harness: Harness | None = None
        self._harnesses: list[Harness] = []
        self._others: list[subprocess.Popen[bytes]] = []  # the JVMs start_jvm started
        self._zk: KazooClient | None = None
        self._status = status or (lambda _step: None)

    # -- processes ---------------------------------------------------------------------
    @property
    def _jvm_tmp(self) -> Path:
        """The JVMs' temporary directory: RocksDB and the checksum library unpack native libraries there, which
        a killed JVM never deletes; :meth:`stop` removes it."""
        return self.directory / "jvm-tmp"

    def _java(self, log_name: str, *arguments: str, classes: Path | None = None) -> list[str]:
        """A JVM's command line; ``classes``, a directory of compiled classes, goes first on its class path."""
        log4j = self.directory / "log4j2.xml"
        self._jvm_tmp.mkdir(parents=True, exist_ok=True)
        return [
            java_executable("java"),
            *_JVM_OPTIONS,
            f"-Djava.io.tmpdir={self._jvm_tmp}",
            f"-Dlog4j.configurationFile={log4j}",
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dledgerspec.log={self.directory / log_name}",
            "-cp",
            self.jars.classpath(*(() if classes is None else (classes,))),
            *arguments,
        ]

    def _spawn(self, command: list[str], stdout_name: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        with open(self.directory / stdout_name, "ab") as out:
            return subprocess.Popen(
                command, stdout=kwargs.pop("stdout", out), stderr=out, start_new_session=True, **kwargs
            )

    def _bookie(self, n: int, port: int) -> _Bookie:
        home = self.directory / f"bookie-{n}"
        conf = self.directory / f"bookie-{n}.conf"
        settings = {
            "bookiePort": str(port),
            "advertisedAddress": "127.0.0.1",
            "allowLoopback": "true",
            "journalDirectories": str(home / "journal"),
            "ledgerDirectories": str(home / "ledgers"),
            "metadataServiceUri": self.metadata_uri,
            "httpServerEnabled": "false",
            "zkTimeout": str(_BOOKIE_SESSION_MS),
            # 60 s by default; it matters only to the storages that checkpoint on a timer (see above).
            "flushInterval": str(CHECKPOINT_INTERVAL_MS),
            # The bookie's disk checker stops it when the disk is 95% full; test machines often are.
            "diskUsageThreshold": "0.999",
            "diskUsageWarnThreshold": "0.998",
        }
        settings.update(BOOKIE_STORAGES[self.storage])  # a storage's own settings win
        conf.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return _Bookie(n, port, conf)

    def start(self) -> BookKeeperCluster:
        self._status("starting ZooKeeper")
        zk_data = self.directory / "zookeeper"
        zk_data.mkdir(exist_ok=True)
        self._zookeeper = self._spawn(
            self._java(
                "zookeeper.log",
                "-Dzookeeper.admin.enableServer=false",  # its HTTP port would clash between clusters
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(self.zk_port),
                str(zk_data),
                str(_ZK_TICK_MS),
            ),
            "zookeeper.out",
        )
        wait_for_port(self.zk_port, self._zookeeper, self.directory / "zookeeper.log", "ZooKeeper")
        # Kazoo reconnects by itself when the server drops a connection; without a handler, its warning
        # about it would reach stderr through logging's last resort, amid the command's output.
        quiet = logging.getLogger("ledgerspec.cluster.kazoo")
        quiet.setLevel(logging.ERROR)
        self._zk = KazooClient(hosts=f"127.0.0.1:{self.zk_port}", timeout=10, logger=quiet)
        self._zk.start(timeout=_START_TIMEOUT)
        self._status("starting the client harness")
        self.harness = self.start_harness("harness")
        self.harness.call("init-cluster")
        for bookie in self._bookies:
            self._status(f"starting bookie {bookie.number} of {len(self._bookies)}")
            self._start_bookie(bookie)
        self._status("waiting for the bookies to register")
        self.wait_for_bookies(len(self._bookies))
        return self

    def start_harness(
        self,
        name: str,
        properties: dict[str, str] | None = None,
        *,
        main: str | None = None,
        classes: Path | None = None,
        metadata_uri: str | None = None,
    ) -> Harness:
        """Another client JVM (a broker, say), logging to ``NAME.log``; the caller closes or kills it.

        ``properties`` are Java system properties for it: ``ledgerspec.useV2WireProtocol=true`` makes its
        clients speak BookKeeper's v2 protocol, as Pulsar's brokers do. ``main`` is another class that speaks the
        harness's protocol, in ``classes`` (``java/LedgerspecPulsarClient.java``); without it, the client harness
        of this cluster's metadata, or of ``metadata_uri`` (the same ZooKeeper through a proxy, say).
        """
        options = [f"-D{key}={value}" for key, value in (properties or {}).items()]
        program = (main,) if main is not None else ("LedgerspecHarness", metadata_uri or self.metadata_uri)
        process = self._spawn(
            self._java(f"{name}.log", *options, *program, classes=classes),
            f"{name}.err",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        harness = Harness(self, process, name)
        self._harnesses.append(harness)
        return harness

    def start_jvm(self, log_name: str, *arguments: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Another JVM on the cluster's jars (a Pulsar broker), logging to ``log_name``, its output beside it;
        ``env`` adds to the environment. :meth:`stop` kills it if it still runs."""
        environment = None if env is None else {**os.environ, **env}
        process = self._spawn(self._java(log_name, *arguments), f"{Path(log_name).stem}.out", env=environment)
        self._others.append(process)
        return process

    def _start_bookie(self, bookie: _Bookie) -> None:
        """Start the bookie's JVM; return once it has registered, in a session other than a killed one's."""
        log = self.directory / f"bookie-{bookie.number}.log"
        bookie.process = self._spawn(
            self._java(log.name, "org.apache.bookkeeper.server.Main", "--conf", str(bookie.conf)),
            f"bookie-{bookie.number}.out",
        )
        wait_for_port(bookie.port, bookie.process, log, f"bookie {bookie.number}")
        deadline = time.monotonic() + _START_TIMEOUT
        while (owner := self._registration(bookie)) is None or owner == bookie.stale_session:
            if bookie.process.poll() is not None:
                raise ClusterError(f"bookie {bookie.number} exited with status {bookie.process.returncode}: see {log}")
            if time.monotonic() > deadline:
                raise ClusterError(f"bookie {bookie.number} did not register within {_START_TIMEOUT:.0f} s: see {log}")
            time.sleep(0.05)
        bookie.stale_session = None

    @property
    def zookeeper(self) -> KazooClient:
        """The cluster's own ZooKeeper client, connected while the cluster runs."""
        if self._zk is None:
            raise ClusterError("the cluster is not running: it has no ZooKeeper client")
        return self._zk

    def _registration(self, bookie: _Bookie) -> int | None:
        """The ZooKeeper session that holds the bookie's registration znode, or None when it has none."""
        stat = self.zookeeper.exists(f"{_LEDGERS_ROOT}/available/{bookie.bookie_id}")
        return None if stat is None else int(stat.ephemeralOwner)

    def wait_for_bookies(self, count: int) -> list[str]:
        """Wait until ``count`` bookies are registered as available; their ids."""
        assert self.harness is not None
        available: list[str] = self.harness.call("bookies", wait_for=count)["bookies"]
        if len(available) < count:
            raise ClusterError(
                f"{len(available)} bookies registered of {count}: see the bookie-N.log files in {self.directory}"
            )
        return available

    @property
    def bookie_ids(self) -> list[str]:
        """Every bookie's id (``host:port``), in bookie number order."""
        return [b.bookie_id for b in self._bookies]

    def bookie_directory(self, n: int) -> Path:
        return self.directory / f"bookie-{n}"

    def bookie_log(self, n: int) -> Path:
        """The log file of bookie ``n``: every run of its JVM appends to it."""
        return self.directory / f"bookie-{n}.log"

    def number_of(self, bookie_id: str) -> int:
        for bookie in self._bookies:
            if bookie.bookie_id == bookie_id:
                return bookie.number
        raise ClusterError(f"no bookie of this cluster has id {bookie_id}")

    def kill_bookie(self, n: int) -> None:
        """SIGKILL bookie ``n``: a crash, with whatever it had not made durable lost."""
        bookie = self._bookies[n - 1]
        if bookie.process is None or bookie.process.poll() is not None:
            raise ClusterError(f"bookie {n} is not running")
        bookie.stale_session = self._registration(bookie)  # it outlives the process until the session expires
        bookie.process.send_signal(signal.SIGKILL)
        bookie.process.wait()
        bookie.process = None

    def stop_bookie(self, n: int) -> None:
        """Stop bookie ``n`` the orderly way (SIGTERM): it flushes its ledger storage and writes its lastMark."""
        bookie = self._bookies[n - 1]
        if bookie.process is None or bookie.process.poll() is not None:
            raise ClusterError(f"bookie {n} is not running")
        bookie.stale_session = self._registration(bookie)
        bookie.process.terminate()
        try:
            bookie.process.wait(_START_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"bookie {n} did not stop within {_START_TIMEOUT:.0f} s of SIGTERM") from exc
        bookie.process = None

    def restart_bookie(self, n: int) -> None:
        """Start bookie ``n`` again on its own directories; return once it listens."""
        bookie = self._bookies[n - 1]
        if bookie.process is not None and bookie.process.poll() is None:
            raise ClusterError(f"bookie {n} is running")
        self._start_bookie(bookie)

    def running_bookies(self) -> list[int]:
        return [b.number for b in self._bookies if b.process is not None and b.process.poll() is None]

    def stop(self) -> None:
        for harness in self._harnesses:
            harness.close()
        self._harnesses.clear()
        self.harness = None
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
        for other in self._others:
            if other.poll() is None:
                other.kill()
                other.wait()
        self._others.clear()
        for process in [b.process for b in self._bookies] + [self._zookeeper]:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(self._jvm_tmp, ignore_errors=True)

    def __enter__(self) -> BookKeeperCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Harness:
    """The client harness JVM: commands in, replies and observations out (``java/LedgerspecHarness.java``).

    Observations are numbered by the harness in the order it saw them; they
    are collected by a reader thread and taken with :meth:`take_observations`.
    """

    def __init__(self, cluster: BookKeeperCluster, process: subprocess.Popen[bytes], name: str = "harness") -> None:
        self.cluster = cluster
        self.process = process
        self.name = name
        self._ids = iter(range(1, 1 << 62))
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._observations: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        assert process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = orjson.loads(raw)
            if "obs" in line:
                with self._lock:
                    self._observations.append(line)
            else:
                self._replies.put(line)
        self._replies.put(None)

    def call(self, cmd: str, **arguments: Any) -> dict[str, Any]:
        """Run one command; its reply. A refused command raises :class:`ClusterError` with the harness's reason."""
        request_id = next(self._ids)
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(orjson.dumps({"id": request_id, "cmd": cmd, **arguments}) + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError as exc:
            raise self._died() from exc
        try:
            reply = self._replies.get(timeout=_REPLY_TIMEOUT)
        except queue.Empty as exc:
            raise ClusterError(f"the harness did not answer {cmd} within {_REPLY_TIMEOUT:.0f} s") from exc
        if reply is None:
            raise self._died()
        if reply.get("reply") != request_id:
            raise ClusterError(f"the harness answered request {reply.get('reply')} when {request_id} ({cmd}) was asked")
        if "error" in reply:
            raise ClusterError(f"the harness refused {cmd} {arguments}: {reply['error']}")
        return reply

    def _died(self) -> ClusterError:
        status = self.process.wait(10)
        log = self.cluster.directory / f"{self.name}.err"
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-10:]) if log.exists() else ""
        return ClusterError(f"the harness exited with status {status}; the end of {log}:\n{tail}")

    def take_observations(self) -> list[dict[str, Any]]:
        """The observations reported since the last call, in the order of their numbers.

        The harness numbers an observation when it happens, and writes it when its
        thread gets the output: lines may arrive a little out of order.
        """
        with self._lock:
            taken, self._observations = self._observations, []
        return sorted(taken, key=lambda obs: int(obs["obs"]))

    def kill(self) -> None:
        """SIGKILL the JVM: a crash, with nothing closed or flushed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ClusterError, BrokenPipeError, OSError):
                self.call("quit")
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
