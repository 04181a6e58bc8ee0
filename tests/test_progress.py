"""Progress of the commands' long steps: a live bar on a terminal, plain lines on standard error elsewhere.

The commands run here with standard error captured, as in a CI log or ``2> log``: not a terminal.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.console import PROGRESS_INTERVAL, RateLimit, StageSteps, StepProgress, duration
from ledgerspec.tools.model_checking.tlc.runner import ProgressLog
from rich.console import Console


class Clock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(console: Console) -> list[str]:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue().splitlines()


def _piped() -> Console:
    return Console(file=io.StringIO(), width=200)


# -- the rate limit and the lines, on a clock of their own ------------------------------------------------
def test_the_rate_limit_allows_one_event_per_interval_for_each_key() -> None:
    clock = Clock()
    limit = RateLimit(10.0, clock)
    assert limit.allow("a") and limit.allow("b")  # a first event always
    clock.now += 9.9
    assert not limit.allow("a") and not limit.allow("b")
    clock.now += 0.1
    assert limit.allow("a")
    clock.now += 5
    assert not limit.allow("a") and limit.allow("b")  # b's last allowed event was 15 s ago, a's 5 s
    limit.forget("a")
    assert limit.allow("a")
    assert not limit.allow("a")


def test_a_step_prints_a_line_at_its_start_at_most_one_per_interval_and_one_at_its_end() -> None:
    clock, console = Clock(), _piped()
    with StepProgress(console, get_time=clock, interval=10.0) as progress:
        task = progress.add_task("[bold]runs[/bold]", total=400)
        for _ in range(40):  # 40 updates 0.5 s apart: 20 s
            clock.now += 0.5
            progress.advance(task, 5)
        clock.now += 1
        progress.update(task, completed=400)
        progress.advance(task, 0)  # past its end: nothing more
    assert _lines(console) == [
        "runs: started, 0/400",
        "runs: 100/400 (25%) after 10.0 s",
        "runs: 200/400 (50%) after 20.0 s",
        "runs: done, 400/400 in 21.0 s",
    ]


def test_steps_of_unknown_size_follow_each_other_and_an_error_stops_the_one_under_way() -> None:
    clock, console = Clock(), _piped()
    with pytest.raises(RuntimeError), StepProgress(console, get_time=clock) as progress:
        progress.step("fetching the jars")
        clock.now += 48.25
        progress.step("starting ZooKeeper")
        clock.now += 75
        raise RuntimeError("ZooKeeper did not start")
    assert _lines(console) == [
        "fetching the jars: started",
        "fetching the jars: done in 48.2 s",
        "starting ZooKeeper: started",
        "starting ZooKeeper: stopped after 1 min 15 s",
    ]


def test_a_step_of_unknown_size_says_how_long_it_has_run() -> None:
    clock, console = Clock(), _piped()
    with StepProgress(console, get_time=clock) as progress:
        task = progress.add_task("TLC: checking ledger", total=None)
        clock.now += PROGRESS_INTERVAL
        progress.update(task, description="TLC: 11,229 distinct states")
    assert _lines(console) == [
        "TLC: checking ledger: started",
        f"TLC: 11,229 distinct states: after {duration(PROGRESS_INTERVAL)}",
        f"TLC: 11,229 distinct states: done in {duration(PROGRESS_INTERVAL)}",
    ]


def test_quiet_progress_prints_nothing_and_on_a_terminal_no_plain_line() -> None:
    console = _piped()
    with StepProgress(console, quiet=True) as progress:
        progress.step("fetching the jars")
        progress.add_task("runs", total=3)
    assert console.file.getvalue() == ""  # type: ignore[attr-defined]
    terminal = Console(file=io.StringIO(), force_terminal=True, width=100)
    with StepProgress(terminal) as progress:
        assert not progress.lines
        progress.step("fetching the jars")
    assert "fetching the jars: started" not in terminal.file.getvalue()  # type: ignore[attr-defined]


def test_stages_are_shown_as_steps_from_first_seen_to_gone() -> None:
    clock, console = Clock(), _piped()
    with StepProgress(console, get_time=clock) as progress:
        stages = StageSteps(progress)
        stages({"checking ranges: stage 0": (0, 8)})
        clock.now += 2
        stages({"checking ranges: stage 0": (8, 8), "summing up: stage 1": (0, 1)})
        clock.now += 1
        stages({})
    assert _lines(console) == [
        "checking ranges: stage 0: started, 0/8",
        "checking ranges: stage 0: done, 8/8 in 2.0 s",
        "summing up: stage 1: started, 0/1",
        "summing up: stage 1: done, 0/1 in 1.0 s",
    ]


def test_tlc_progress_is_read_from_its_output_as_it_is_written(tmp_path: Path) -> None:
    log = tmp_path / "tlc.log"
    seen: list[tuple[int, int, int, int]] = []
    read = ProgressLog(log, lambda *counts: seen.append(counts))
    read()  # no output yet
    message = (
        "@!@!@STARTMSG 2200:0 @!@!@\n"
        "Progress(20) at 2026-01-02 10:11:12: 1,228,067 states generated (458,611 s/min), 11,229 distinct states "
        "found (183,480 ds/min), 3,004 states left on queue.\n"
        "@!@!@ENDMSG 2200 @!@!@\n"
    )
    with open(log, "w") as out:
        out.write("@!@!@STARTMSG 2185:0 @!@!@\nStarting... (2026-01-02 10:11:11)\n@!@!@ENDMSG 2185 @!@!@\n")
        out.write(message[:100])  # TLC is in the middle of the line
        out.flush()
        read()
        assert seen == []
        out.write(message[100:])
        out.flush()
        read()
    assert seen == [(11229, 1228067, 20, 3004)]
    read()
    assert seen == [(11229, 1228067, 20, 3004)]


# -- the commands, with standard error not a terminal -----------------------------------------------------
def test_simulate_prints_progress_lines_on_stderr_and_json_stays_pure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "ledger", "--traces", "3", "--steps", "20", "--out", str(tmp_path / "a")]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "ledger runs: started, 0/3" in err.splitlines()
    assert any(line.startswith("ledger runs: done, 3/3 in ") for line in err.splitlines())
    assert "check them with" in out and "ledger runs" not in out
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["traces"]) == 3 and err == ""


@pytest.mark.parametrize(("spec", "title"), [("managed-ledger", "managed ledger"), ("autorecovery", "autorecovery")])
def test_simulate_of_other_specs_prints_progress_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, title: str
) -> None:
    assert main(["simulate", spec, "--traces", "2", "--steps", "10", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert f"{title} runs: started, 0/2" in err and any(line.startswith(f"{title} runs: done, 2/2 in ") for line in err)


def test_the_explorer_of_model_check_prints_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model-check", "ledger", "--engine", "python", "--const", "MaxEntries=1", "--workers", "1"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0] == "python explorer: started"
    assert lines[-1].startswith("python explorer") and " done in " in lines[-1]
    assert "1,898" in out
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["python"]["distinct_states"] == 1898 and err == ""


@pytest.mark.tlc
def test_tlc_of_model_check_prints_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model-check", "bookie", "--engine", "tlc"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "TLC: checking bookie (1 worker(s)): started"
    # the counts TLC printed as it ended
    assert lines[-1].startswith("TLC: 36,620 distinct states, 106,423 generated, depth 22, 0 queued: done in ")


def test_crash_check_prints_progress_lines_per_workload(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["crash-check", "bookie", "--workload", "basic", "--no-second-crash"]
    assert main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("basic: boundaries: started, ")
    assert lines[-1].startswith("basic: boundaries: done, ")
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["violations"] == [] and err == ""


def test_soak_prints_progress_lines_and_none_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["soak", "--spec", "cursor", "--traces", "2", "--seed", "3", "--jobs", "1"]
    assert main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("runs: started, 0/")
    assert " done, " in lines[-1]
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["passed"] and err == ""


def test_the_demo_simulation_shows_its_progress(tmp_path: Path) -> None:
    from ledgerspec.tools.cli.commands.demo import _simulate

    console = _piped()
    with StepProgress(console) as progress:
        ids, _ = _simulate(tmp_path, 1, progress)
    lines = _lines(console)
    assert lines[0] == "simulating: started, 0/3"
    assert lines[-1].startswith(f"simulating: {list(ids)[-1]}: done, 3/3 in ")


def _fake_recording(calls: list[str]) -> Any:
    def record(names: list[str], out: Path, **options: Any) -> list[Any]:
        status = options.get("status")
        for step in ("fetching the jars", "starting ZooKeeper"):
            calls.append(step)
            if status is not None:
                status(step)
        return []

    return record


def test_record_prints_each_step_of_its_setup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledgerspec.tools.cli.commands import record

    calls: list[str] = []
    monkeypatch.setattr(record, "record_bookkeeper", _fake_recording(calls))
    assert main(["record", "bookkeeper", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert calls == ["fetching the jars", "starting ZooKeeper"]
    assert lines[0] == "fetching the jars: started" and lines[1].startswith("fetching the jars: done in ")
    assert lines[2] == "starting ZooKeeper: started" and lines[3].startswith("starting ZooKeeper: done in ")
    assert main(["record", "bookkeeper", "--out", str(tmp_path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["scenarios"] == [] and err == ""


def test_the_jars_say_when_they_are_fetched_and_the_harness_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledgerspec.conformance.adapters import jars

    monkeypatch.setattr(jars, "_fetch", lambda artifacts, root: (root / "lib").mkdir(parents=True))
    monkeypatch.setattr(jars, "java_executable", lambda name: name)
    compiled = subprocess.CompletedProcess(["javac"], 0, "", "")
    monkeypatch.setattr(jars, "subprocess", SimpleNamespace(run=lambda command, **_: compiled))
    (tmp_path / "cache").mkdir()
    steps: list[str] = []
    first = jars.ensure_jars(cache=tmp_path / "cache", status=steps.append)
    (first.classes / "LedgerspecHarness.class").write_bytes(b"")  # what javac would have written
    assert len(steps) == 2 and steps[0].startswith("fetching org.apache.bookkeeper:bookkeeper-server:")
    assert steps[1] == "compiling the client harness"
    jars.ensure_jars(cache=tmp_path / "cache", status=steps.append)  # all there: nothing to say
    assert len(steps) == 2
