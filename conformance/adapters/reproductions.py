"""The stand-alone reproductions of the findings of kind bug: small Java programs that a maintainer of BookKeeper
or Pulsar runs against the released jars, without ledgerspec.

Each program (``java/reproductions/``) takes a finding's scenario steps on a
cluster of its own (``ReproCluster.java``: ZooKeeper in its JVM, each bookie
in its own, killed with SIGKILL), prints the steps, the expected and the
observed outcome, and exits 1 when it reproduced the finding, 0 when the jars
behaved as expected, 2 when it could not run. :func:`export` writes the
programs with a ``pom.xml`` and the commands, for use outside ledgerspec;
:func:`run` compiles and runs one against the pinned jars (``jars.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import attrs
from ledgerspec.conformance.adapters.findings import FINDINGS, Finding
from ledgerspec.conformance.adapters.jars import (
    ARTIFACTS,
    MAVEN_SETTINGS,
    JarSet,
    cache_lock,
    compile_java,
    java_executable,
    maven_pom,
)

__all__ = ["REPRODUCED", "ReproductionRun", "export", "reproducible", "run", "sources"]

#: A program's exit status when it showed its finding.
REPRODUCED = 1
_COULD_NOT_RUN = 2
_TIMEOUT_S = 300.0


def sources() -> dict[str, bytes]:
    """The reproductions' Java sources and their README, by file name."""
    folder = resources.files("ledgerspec.conformance.adapters").joinpath("java", "reproductions")
    return {item.name: item.read_bytes() for item in folder.iterdir() if item.name.endswith((".java", ".md"))}


def reproducible() -> list[Finding]:
    """The findings that come with a reproduction, in the order of :data:`FINDINGS`."""
    return [f for f in FINDINGS.values() if f.reproduction]


def export(directory: Path) -> list[Path]:
    """Write the programs, their README, a ``pom.xml`` of the pinned jars and Maven settings that fetch them
    from Maven Central alone into ``directory``; the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sorted(sources().items()):
        (directory / name).write_bytes(text)
        written.append(directory / name)
    (directory / "pom.xml").write_text(maven_pom("reproduction", "reproductions", ARTIFACTS))
    (directory / "settings.xml").write_text(MAVEN_SETTINGS)
    written += [directory / "pom.xml", directory / "settings.xml"]
    return written


@attrs.frozen
class ReproductionRun:
    """One run of a finding's program: its exit status and what it printed."""

    finding: str
    program: tuple[str, ...]  # the main class and its arguments
    status: int
    output: str
    directory: Path

    @property
    def reproduced(self) -> bool:
        return self.status == REPRODUCED

    @property
    def could_not_run(self) -> bool:
        return self.status not in (0, REPRODUCED)

    def line(self, label: str) -> str:
        """The text after ``LABEL:`` in the output ('' when absent)."""
        prefix = f"{label}: "
        return next((ln[len(prefix) :] for ln in self.output.splitlines() if ln.startswith(prefix)), "")


def run(
    finding: Finding, jars: JarSet, directory: Path, status: Callable[[str], None] | None = None
) -> ReproductionRun:
    """Compile the reproductions against ``jars`` (once) and run ``finding``'s, with its cluster's files and logs
    kept in ``directory``."""
    if not finding.reproduction:
        raise ValueError(f"finding {finding.name} has no reproduction")
    classes = jars.root / "reproductions"
    java = {name: text for name, text in sources().items() if name.endswith(".java")}
    with cache_lock(jars):
        compile_java(jars, java, classes, "the reproductions", status)
    directory.mkdir(parents=True, exist_ok=True)
    command = (
        java_executable("java"),
        f"-Dreproduction.dir={directory}",
        f"-Djava.io.tmpdir={directory}",
        "-cp",
        os.pathsep.join((str(classes), str(jars.lib / "*"))),
        *finding.reproduction,
    )
    if status is not None:
        status(f"reproducing {finding.name}: {' '.join(finding.reproduction)}")
    # A session of its own: on a timeout the program's bookies and brokers are stopped with it.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\nCOULD NOT RUN: no verdict within {_TIMEOUT_S:.0f} s (logs in {directory})"
        return ReproductionRun(finding.name, finding.reproduction, _COULD_NOT_RUN, output, directory)
    with contextlib.suppress(ProcessLookupError):  # a JVM the program started and did not stop
        os.killpg(process.pid, signal.SIGKILL)
    return ReproductionRun(finding.name, finding.reproduction, process.returncode, output, directory)
