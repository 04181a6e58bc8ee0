"""A real ZooKeeper server for the tests, started from the Debian package (or a ZooKeeper release).

The server runs in the foreground as a child process, in a temporary
directory, on a free loopback port, with the admin server and JMX off. It is
ready once it answers ZooKeeper's ``ruok`` command with ``imok``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from ledgerspec.java import JavaNotFound, java_home

__all__ = [
    "DEBIAN_ZKSERVER",
    "ZOOKEEPER_HOME_VARIABLE",
    "ZooKeeperServer",
    "ZooKeeperUnavailableError",
    "find_zkserver",
]

DEBIAN_ZKSERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
ZOOKEEPER_HOME_VARIABLE = "LEDGERSPEC_ZOOKEEPER_HOME"  # an unpacked Apache ZooKeeper release, used instead


class ZooKeeperUnavailableError(Exception):
    """No ZooKeeper server can be started here; the message says why and what to install."""


def find_zkserver() -> Path:
    """The ``zkServer.sh`` to run: from $LEDGERSPEC_ZOOKEEPER_HOME, else the Debian package's."""
    home = os.environ.get(ZOOKEEPER_HOME_VARIABLE)
    script = Path(home) / "bin" / "zkServer.sh" if home else DEBIAN_ZKSERVER
    if not script.is_file():
        where = f"${ZOOKEEPER_HOME_VARIABLE}={home} has no bin/zkServer.sh" if home else f"no {DEBIAN_ZKSERVER}"
        raise ZooKeeperUnavailableError(f"no ZooKeeper server ({where}); install it with `apt-get install zookeeper`")
    try:
        java_home()
    except JavaNotFound as exc:
        raise ZooKeeperUnavailableError(f"ZooKeeper needs Java: {exc}") from None
    return script


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ZooKeeperServer:
    """One standalone ZooKeeper server in ``workdir``."""

    def __init__(self, zkserver: Path, workdir: Path) -> None:
        self.zkserver = zkserver
        self.workdir = workdir
        self.port = _free_loopback_port()
        self.log = workdir / "zookeeper.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        config = self.workdir / "zoo.cfg"
        config.write_text(
            "tickTime=2000\n"
            f"dataDir={self.workdir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
        )
        env = {
            **os.environ,
            "JMXDISABLE": "true",
            "ZOOPIDFILE": str(self.workdir / "zookeeper.pid"),
            "ZOO_LOG_DIR": str(self.workdir),
        }
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                [str(self.zkserver), "start-foreground", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self._answers_ruok():
            if self._process.poll() is not None:
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper ({self.zkserver}) exited with status {self._process.returncode}: {self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ZooKeeperUnavailableError(f"ZooKeeper did not answer on {self.hosts} within {timeout:g} s")
            time.sleep(0.2)

    def _answers_ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as connection:
                connection.sendall(b"ruok")
                return connection.recv(4) == b"imok"
        except OSError:
            return False

    def _log_tail(self, lines: int = 15) -> str:
        return " | ".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
