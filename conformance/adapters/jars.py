"""The released Apache jars the adapters run, fetched with Maven and cached.

The versions are pinned (:data:`ARTIFACTS`): a recorded trace names the
version it came from, and the documented differences of the real system
(docs/real-systems.md) hold for these versions. Maven resolves them with
their dependencies from Maven Central only: Pulsar's poms name other
repositories, which the mirror in ``settings.xml`` sends to Central too.

The cache is ``$LEDGERSPEC_JAR_CACHE``, else ``~/.cache/ledgerspec/jars``;
one directory per set of pins, so a change of version fetches anew. The
client harness (``java/LedgerspecHarness.java``) is compiled there against
the jars the first time it is needed, and again whenever its source changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path

import attrs

from ledgerspec.java import JavaNotFound, java_tool

__all__ = [
    "ARTIFACTS",
    "BROKER_ARTIFACTS",
    "MAVEN_SETTINGS",
    "JarSet",
    "JavaSetupError",
    "cache_lock",
    "check_tools",
    "compile_java",
    "ensure_jars",
    "java_executable",
    "pulsar_client_classes",
]

#: group:artifact:version of what is fetched, with everything they depend on.
ARTIFACTS = (
    "org.apache.bookkeeper:bookkeeper-server:4.17.2",
    # managed-ledger 4.0.7 is the newest 4.0.x whose whole dependency tree is on Central;
    # it is built against bookkeeper-server 4.17.2 (its metadata store calls a constructor 4.17.1 lacks),
    # which brings ZooKeeper 3.9.3.
    "org.apache.pulsar:managed-ledger:4.0.7",
    # ZooKeeper's server needs it for its snapshots; the pom marks it optional.
    "org.xerial.snappy:snappy-java:1.1.10.5",
)

#: The broker set: a released Pulsar broker with its Java client (``pulsar_broker.py``,
#: ``java/LedgerspecPulsarClient.java``), which bring the same bookkeeper-server, managed-ledger and ZooKeeper
#: as :data:`ARTIFACTS`. The broker goes first: Maven keeps the first version it meets of a jar, and the logging
#: jars of bookkeeper-server's tree do not work with those of the broker's. Kept apart, as it is some 240 MB.
BROKER_ARTIFACTS = (
    "org.apache.pulsar:pulsar-broker:4.0.7",
    "org.apache.pulsar:pulsar-client-original:4.0.7",
    "org.xerial.snappy:snappy-java:1.1.10.5",
)

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ledgerspec</groupId><artifactId>real-systems</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"
MAVEN_SETTINGS = """<settings>
  <mirrors>
    <mirror><id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo.maven.apache.org/maven2</url></mirror>
  </mirrors>
</settings>
"""
_HARNESS = "LedgerspecHarness"
_FETCH_TIMEOUT = 1800


class JavaSetupError(Exception):
    """Java, javac or Maven is missing, or the jars could not be fetched: says which, and what to do."""


def java_executable(name: str) -> str:
    """``java`` or ``javac``, as :mod:`ledgerspec.java` finds it; :class:`JavaSetupError` if it is missing."""
    try:
        return str(java_tool(name))
    except JavaNotFound as exc:
        raise JavaSetupError(f"the real BookKeeper and Pulsar run on Java 17 or newer, with javac: {exc}") from None


@attrs.frozen
class JarSet:
    """The fetched jars and the compiled harness: what a JVM of the adapters runs with."""

    root: Path

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def classes(self) -> Path:
        return self.root / "harness"

    def classpath(self, *first: Path) -> str:
        """The harness's classes and every jar; ``first``, more directories of classes, before them."""
        return os.pathsep.join((*map(str, first), str(self.classes), str(self.lib / "*")))

    def version_of(self, artifact: str) -> str:
        """The version of a jar in the set, by artifact id (``bookkeeper-server``)."""
        for jar in sorted(self.lib.glob(f"{artifact}-*.jar")):
            rest = jar.name[len(artifact) + 1 : -len(".jar")]
            if rest[:1].isdigit():
                return rest
        raise JavaSetupError(f"{self.lib} holds no {artifact} jar")


def check_tools() -> None:
    """Raise :class:`JavaSetupError` unless java, javac and Maven are all at hand."""
    java_executable("java")
    java_executable("javac")
    _maven()


def _maven() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JavaSetupError(
            "Maven (mvn) is not on the PATH: it fetches the pinned BookKeeper and Pulsar jars "
            f"({', '.join(ARTIFACTS)}) from Maven Central; install it (apt-get install maven)"
        )
    return mvn


def _cache_root() -> Path:
    configured = os.environ.get("LEDGERSPEC_JAR_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "ledgerspec" / "jars"


def _pins_digest(artifacts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(artifacts).encode()).hexdigest()[:12]


def ensure_jars(
    artifacts: Sequence[str] = ARTIFACTS, cache: Path | None = None, status: Callable[[str], None] | None = None
) -> JarSet:
    """The jars of ``artifacts`` and their dependencies, fetched into the cache unless already there.

    ``status`` is told of each long step as it starts: the fetch with Maven, the harness's compilation.
    """
    root = (cache or _cache_root()) / _pins_digest(artifacts)
    jars = JarSet(root)
    complete = root / "lib" / ".complete"
    with cache_lock(jars):
        if not complete.is_file():
            if status is not None:
                status(f"fetching {', '.join(artifacts)} and their dependencies with Maven into {root}")
            _fetch(artifacts, root)
            complete.write_text("\n".join(artifacts) + "\n")
        _compile_harness(jars, status)
    return jars


@contextlib.contextmanager
def cache_lock(jars: JarSet) -> Iterator[None]:
    """Hold the cache directory's lock: two processes (two commands, two test workers) fetch and compile in turn,
    never over each other's files."""
    jars.root.mkdir(parents=True, exist_ok=True)
    with open(jars.root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fetch(artifacts: Sequence[str], root: Path) -> None:
    mvn = _maven()
    java_executable("java")
    root.mkdir(parents=True, exist_ok=True)
    dependencies = "\n".join(_DEPENDENCY.format(*artifact.split(":")) for artifact in artifacts)
    (root / "pom.xml").write_text(_POM.format(dependencies=dependencies))
    (root / "settings.xml").write_text(MAVEN_SETTINGS)
    staging = root / "lib.partial"
    shutil.rmtree(staging, ignore_errors=True)
    command = [mvn, "-q", "-B", "-s", "settings.xml", "dependency:copy-dependencies", f"-DoutputDirectory={staging}"]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=_FETCH_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise JavaSetupError(f"fetching the jars took over {_FETCH_TIMEOUT} s: {' '.join(command)} in {root}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise JavaSetupError(f"Maven could not fetch {', '.join(artifacts)} (exit {done.returncode}):\n{tail}")
    shutil.rmtree(root / "lib", ignore_errors=True)
    staging.rename(root / "lib")


def _compile_harness(jars: JarSet, status: Callable[[str], None] | None = None) -> None:
    _compile_program(jars, _HARNESS, jars.classes, "the client harness", status)


def pulsar_client_classes(jars: JarSet, status: Callable[[str], None] | None = None) -> Path:
    """``java/LedgerspecPulsarClient.java`` compiled against the jars (the broker set, :data:`BROKER_ARTIFACTS`),
    unless it already was: the directory of its classes."""
    target = jars.root / "pulsar-client"
    with cache_lock(jars):
        _compile_program(jars, "LedgerspecPulsarClient", target, "the Pulsar client harness", status)
    return target


def _compile_program(jars: JarSet, program: str, target: Path, what: str, status: Callable[[str], None] | None) -> None:
    """``java/PROGRAM.java`` of this package compiled into ``target`` (:func:`compile_java`)."""
    source = resources.files("ledgerspec.conformance.adapters").joinpath("java", f"{program}.java")
    compile_java(jars, {f"{program}.java": source.read_bytes()}, target, what, status)


def compile_java(
    jars: JarSet, sources: dict[str, bytes], target: Path, what: str, status: Callable[[str], None] | None = None
) -> None:
    """Compile ``sources`` (file name: text) against the jars into ``target``, unless the classes there were
    compiled from the same sources; ``what`` names them in the status and in the error."""
    digest = hashlib.sha256(b"".join(name.encode() + b"\0" + text for name, text in sorted(sources.items())))
    stamp = target / ".source-sha256"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return
    if status is not None:
        status(f"compiling {what}")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name, text in sources.items():
        (target / name).write_bytes(text)
    done = subprocess.run(
        [
            java_executable("javac"),
            "-nowarn",
            "-d",
            str(target),
            "-cp",
            str(jars.lib / "*"),
            *(str(target / name) for name in sorted(sources)),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise JavaSetupError(f"{what} did not compile against {jars.lib}:\n{done.stderr.strip()}")
    stamp.write_text(digest.hexdigest())
