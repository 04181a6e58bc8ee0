"""The stand-alone reproductions of the findings of kind bug: small Java programs that a maintainer of BookKeeper
or Pulsar runs against the released jars, without ledgerspec.

Each is a Maven project of ``java/reproductions/`` (a write-up in its
``README.md``: the promise broken, the steps, the cause, directions for a
fix; a ``pom.xml`` of the jars; one Java program). The program starts a
cluster of its own (ZooKeeper and each bookie a JVM, a crash a SIGKILL),
takes the scenario's steps, prints them with an ``EXPECTED:`` and an
``OBSERVED:`` line, and exits 1 when it showed the bug, 0 when the jars kept
the promise, 2 when it could not run. :func:`run` compiles a program against
the pinned jars (``jars.py``, the versions of the poms) and runs it;
:func:`export` writes the projects out, to hand to a maintainer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterable
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

import attrs
from ledgerspec.conformance.adapters.findings import FINDINGS, Finding, Reproduction
from ledgerspec.conformance.adapters.jars import MAVEN_SETTINGS, JarSet, cache_lock, compile_java, java_executable

__all__ = ["REPRODUCED", "ReproductionRun", "export", "project_files", "reproducible", "run"]

#: A program's exit status when it showed its bug.
REPRODUCED = 1
_COULD_NOT_RUN = 2
_TIMEOUT_S = 300.0
_SOURCES = "src/main/java"


def reproducible() -> list[Finding]:
    """The findings that come with a reproduction, in the order of :data:`FINDINGS`."""
    return [f for f in FINDINGS.values() if f.reproduction is not None]


def _reproduction(finding: Finding) -> Reproduction:
    if finding.reproduction is None:
        raise ValueError(f"finding {finding.name} has no reproduction")
    return finding.reproduction


def project_files(project: str) -> dict[str, bytes]:
    """A reproduction project's files (``README.md``, ``pom.xml``, the Java sources), by path inside it."""
    root = resources.files("ledgerspec.conformance.adapters").joinpath("java", "reproductions", project)
    if not root.is_dir():
        raise ValueError(f"no reproduction project {project!r}")

    def walk(folder: Traversable, prefix: str) -> Iterable[tuple[str, bytes]]:
        for item in folder.iterdir():
            if item.is_dir():
                yield from walk(item, f"{prefix}{item.name}/")
            elif item.name in ("README.md", "pom.xml") or item.name.endswith(".java"):
                yield f"{prefix}{item.name}", item.read_bytes()

    return dict(sorted(walk(root, "")))


def export(directory: Path, findings: Iterable[Finding]) -> list[Path]:
    """Write the projects of ``findings`` into ``directory`` (one folder each), each with Maven settings that
    fetch every jar from Maven Central alone; the files written."""
    written = []
    for project in dict.fromkeys(_reproduction(f).project for f in findings):
        files = {**project_files(project), "settings.xml": MAVEN_SETTINGS.encode()}
        for name, text in files.items():
            path = directory / project / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text)
            written.append(path)
    return written


@attrs.frozen
class ReproductionRun:
    """One run of a finding's program: its exit status and what it printed."""

    finding: str
    command: str  # the main class and its arguments
    status: int
    output: str
    directory: Path

    @property
    def could_not_run(self) -> bool:
        """It ended without its verdict: it exited 2, or otherwise without an OBSERVED line."""
        return self.status not in (0, REPRODUCED) or not self.line("OBSERVED")

    @property
    def reproduced(self) -> bool:
        return self.status == REPRODUCED and not self.could_not_run

    def line(self, label: str) -> str:
        """The text after ``LABEL:`` at the start of an output line ('' when there is none)."""
        prefix = f"{label}: "
        return next((ln[len(prefix) :] for ln in self.output.splitlines() if ln.startswith(prefix)), "")


def run(
    finding: Finding, jars: JarSet, directory: Path, status: Callable[[str], None] | None = None
) -> ReproductionRun:
    """Compile ``finding``'s program against ``jars`` (once per source) and run it; its cluster's files and
    logs go under ``directory``."""
    reproduction = _reproduction(finding)
    sources = {
        name.rpartition("/")[2]: text
        for name, text in project_files(reproduction.project).items()
        if name.startswith(f"{_SOURCES}/")
    }
    classes = jars.root / "reproductions" / reproduction.project
    with cache_lock(jars):
        compile_java(jars, sources, classes, f"the reproduction {reproduction.project}", status)
    directory.mkdir(parents=True, exist_ok=True)
    command = (
        java_executable("java"),
        f"-Djava.io.tmpdir={directory}",  # where the program makes its cluster's directory
        "-cp",
        os.pathsep.join((str(classes), str(jars.lib / "*"))),
        reproduction.main_class,
        *reproduction.arguments,
    )
    if status is not None:
        status(f"reproducing {finding.name}: {reproduction.command}")
    # A session of its own: on a timeout, or should it leave one behind, its bookies and brokers are stopped too.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=_TIMEOUT_S)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\nCOULD NOT RUN: no verdict within {_TIMEOUT_S:.0f} s (files and logs in {directory})"
        returncode = _COULD_NOT_RUN
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    return ReproductionRun(finding.name, reproduction.command, returncode, output, directory)
