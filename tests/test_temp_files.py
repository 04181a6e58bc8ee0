"""Nothing left behind: a command's temporary files are gone when it ends, on success, on failure and on
Ctrl-C, unless it was asked to keep them; and Ctrl-C ends a command with "interrupted", never a traceback.

Each command runs in a process of its own with ``TMPDIR`` set to a fresh directory, which must be empty
once the process has ended: TLC's JVM starts once per process and its own temporary directory goes at
the process's exit, so only a whole process shows that nothing is left. Ctrl-C is sent, as a terminal
sends it, to the command's whole process group (its worker processes, Spark's JVM and Python workers).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from ledgerspec.conformance.generate import random_walk, trace_events
from ledgerspec.spec.ledger.ledger import LedgerSpec

SMALL = ["--const", "MaxEntries=1"]  # 1,898 states: a second on either engine
LARGE = ["--const", "MaxEntries=4"]  # minutes on either engine: long enough to be interrupted


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "ledgerspec", *argv]


def _environment(tmp: Path) -> dict[str, str]:
    tmp.mkdir()
    return {**os.environ, "TMPDIR": str(tmp)}


def _run(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*argv), env=_environment(tmp), capture_output=True, text=True, check=False, timeout=600
    )


def _interrupted(tmp: Path, ready: Callable[[int], bool], *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the command in a process group of its own and send the group SIGINT once ``ready(pid)``."""
    process = subprocess.Popen(
        _command(*argv),
        env=_environment(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A new process group, as a terminal's foreground job has; SIGINT as a shell gives it.
        preexec_fn=lambda: (os.setpgrp(), signal.signal(signal.SIGINT, signal.SIG_DFL)),
    )
    deadline = time.monotonic() + 300
    while not ready(process.pid):
        assert process.poll() is None, "the command ended before it could be interrupted"
        assert time.monotonic() < deadline, "the command never got to the point to interrupt"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _descendants(pid: int) -> list[str]:
    """The command lines of the processes under ``pid`` (from /proc)."""
    parents, lines = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            lines[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (ValueError, OSError):
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found, level = [], {pid}
    while level:
        level = {child for child, parent in parents.items() if parent in level}
        found += [lines[child] for child in level]
    return found


def _left(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir())


@pytest.mark.tlc
def test_model_check_with_both_engines_leaves_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path / "tmp", "model-check", "ledger", "--engine", "both", "--json", *SMALL)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["agree"] and data["tlc"]["distinct_states"] == 1898
    assert "log" not in data["tlc"]  # no path to a file that is gone
    assert _left(tmp_path / "tmp") == []


@pytest.mark.tlc
def test_model_check_keeps_tlc_files_where_asked(tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    done = _run(tmp_path / "tmp", "model-check", "ledger", "--engine", "both", "--keep-work", str(keep), *SMALL)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in keep.iterdir()) == ["MCledger.cfg", "tlc.dump", "tlc.log"]
    assert f"TLC's config, output and state dump are kept in {keep}" in " ".join(done.stderr.split())
    assert _left(tmp_path / "tmp") == []
    done = _run(
        tmp_path / "tmp2", "model-check", "ledger", "--engine", "tlc", "--keep-work", str(keep), "--json", *SMALL
    )
    assert json.loads(done.stdout)["tlc"]["log"] == str(keep / "tlc.log")


def test_keep_work_needs_tlc_and_a_directory(tmp_path: Path) -> None:
    done = _run(tmp_path / "tmp", "model-check", "ledger", "--engine", "python", "--keep-work", str(tmp_path))
    assert done.returncode == 2 and "--keep-work keeps TLC's files: it needs --engine tlc or both" in done.stderr
    (tmp_path / "file").write_text("")
    done = _run(tmp_path / "tmp2", "model-check", "ledger", "--keep-work", str(tmp_path / "file"))
    assert done.returncode == 2 and "not a directory" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.tlc
def test_ctrl_c_during_tlc_stops_it_and_leaves_nothing(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"

    def tlc_running(pid: int) -> bool:
        return tmp.is_dir() and any(p.name.startswith("ledgerspec-tlc-") for p in tmp.iterdir())

    started = time.monotonic()
    done = _interrupted(tmp, tlc_running, "model-check", "ledger", "--engine", "tlc", *LARGE)
    assert done.returncode == 130 and "interrupted" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60  # TLC stopped: it does not run to its end
    assert _left(tmp) == []


def test_ctrl_c_during_a_parallel_search_ends_the_workers_quietly(tmp_path: Path) -> None:
    def workers_started(pid: int) -> bool:
        return len(_descendants(pid)) >= 2

    argv = ("model-check", "ledger", "--engine", "python", "--workers", "2", *LARGE)
    done = _interrupted(tmp_path / "tmp", workers_started, *argv)
    assert done.returncode == 130 and "interrupted" in done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    assert _left(tmp_path / "tmp") == []


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three conforming traces of a small ledger model."""
    spec = LedgerSpec(MaxEntries=2)
    rng = random.Random(1)
    lines = [orjson.dumps(e) for i in range(3) for e in trace_events(spec, random_walk(spec, rng, 20), "full", f"t{i}")]
    root = tmp_path_factory.mktemp("traces")
    (root / "a.ndjson").write_bytes(b"\n".join(lines) + b"\n")
    return root


SPARK_CHECK = ("check", "--const", "MaxEntries=2", "--spark", "--master", "local[1]")


@pytest.mark.spark
def test_check_on_spark_leaves_nothing(tmp_path: Path, traces: Path) -> None:
    done = _run(tmp_path / "tmp", *SPARK_CHECK, str(traces), "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["conforms"] == 3
    assert _left(tmp_path / "tmp") == []


@pytest.mark.spark
@pytest.mark.parametrize("when", ["session", "jobs"])
def test_ctrl_c_during_a_spark_check_says_interrupted(tmp_path: Path, traces: Path, when: str) -> None:
    """Interrupted as the session starts (PySpark sets its own handler then), or once Spark runs jobs."""
    tmp = tmp_path / "tmp"

    def reached(pid: int) -> bool:
        if when == "session":  # its scratch directory is made just before the session starts
            return tmp.is_dir() and any(tmp.iterdir())
        return any("pyspark.daemon" in line for line in _descendants(pid))  # Python workers run tasks

    done = _interrupted(tmp, reached, *SPARK_CHECK, str(traces), "--out", str(tmp_path / "out"))
    assert done.returncode == 130 and "interrupted" in done.stderr
    assert "Traceback" not in done.stderr and "Py4J" not in done.stderr
    assert _left(tmp) == []


def test_the_documentation_examples_leave_nothing(tmp_path: Path) -> None:
    """The pages' examples make scratch directories as a reader would (``tempfile.mkdtemp()``); each page runs
    with a temporary directory of its own that goes when the page is done (docs/conftest.py)."""
    docs = Path(__file__).parent.parent / "docs"
    pages = [str(docs / page) for page in ("bookie.md", "bookie-files.md", "message-ids.md")]
    done = subprocess.run(
        # One process (-n 0): xdist's controller would make a base temporary directory for its workers.
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *pages],
        env=_environment(tmp_path / "tmp"),
        cwd=docs.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert list((tmp_path / "tmp").iterdir()) == []
