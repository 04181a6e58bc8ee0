"""``ledgerspec soak``: the unmutated engine over many seeded runs of every spec, checked in every mode.

The ``ci`` profile is the mutation score's default baseline, of which the tests run a fifth
(tests/test_mutants.py); the ``slow`` one runs with ``--run-slow``. Here: that the profiles reach what they
promise, that the command reports, writes and re-checks what it flags, and that the result does not depend on the
number of processes."""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from ledgerspec.conformance.checker import Bounds
from ledgerspec.conformance.generate import random_walk, trace_events
from ledgerspec.reference.bookie import BookieStateError
from ledgerspec.reference.managed_ledger import RunConfig
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.harness.soak import PROFILES, SOAK_WORKLOADS, SoakRun, run_soak, soak_workloads, write_soak
from ledgerspec.tools.harness.workloads import (
    MODES,
    Checkers,
    CursorWorkload,
    RandomBookieWorkload,
    SeededWorkload,
    WorkloadRun,
)


def _json(args: list[str]) -> tuple[int, dict[str, Any]]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main([*args, "--json"])
    return status, json.loads(buffer.getvalue())


def _planned(profile_name: str) -> dict[tuple[str, str], int]:
    traces: dict[tuple[str, str], int] = collections.Counter()
    for workload in soak_workloads(PROFILES[profile_name]):
        for mode in workload.modes:
            traces[workload.spec, mode] += workload.run_count()
    return traces


@pytest.mark.parametrize("profile", sorted(PROFILES), ids=lambda name: f"{name}-profile")
def test_each_profile_checks_every_spec_in_every_mode_with_enough_traces(profile: str) -> None:
    planned = _planned(profile)
    assert set(planned) == {(spec, mode) for spec in SOAK_WORKLOADS for mode in MODES}
    assert min(planned.values()) >= PROFILES[profile].traces, planned
    seeds = {w.seed for w in soak_workloads(PROFILES[profile]) if isinstance(w, CursorWorkload)}
    assert seeds == set(PROFILES[profile].seeds) and len(seeds) >= 5


def test_the_workloads_leave_no_file_open() -> None:
    """Thousands of runs go through one process: a run that left its bookies' files open would exhaust the
    process's descriptors (as it once did, at the slow profile's 167 ledger runs per seed)."""
    for workload in (w for ws in SOAK_WORKLOADS.values() for w in ws if isinstance(w, SeededWorkload)):
        before = set(os.listdir("/proc/self/fd"))
        for _ in workload.scaled(3).recorded(None, MODES):
            pass
        assert set(os.listdir("/proc/self/fd")) <= before, workload.name


def test_the_ci_profile_shows_a_one_percent_rate_of_rejected_traces() -> None:
    """With n traces, a rate of 1 % leaves none rejected with probability 0.99^n."""
    assert 0.99 ** PROFILES["ci"].traces < 0.01
    assert 0.9995 ** PROFILES["slow"].traces < 0.01


def test_a_short_soak_conforms_everywhere_and_prints_each_spec_and_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["soak", "--traces", "4", "--seed", "3", "--seed", "4", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    for spec in SOAK_WORKLOADS:
        assert spec in out
    assert "metadata" in out  # autorecovery's partial observation, by its own name
    status, summary = _json(["soak", "--traces", "4", "--seed", "3", "--seed", "4", "--jobs", "1"])
    assert status == 0 and summary["passed"]
    tallies = {(t["spec"], t["mode"]): t for t in summary["tallies"]}
    assert set(tallies) == {(spec, mode) for spec in SOAK_WORKLOADS for mode in MODES}
    for t in tallies.values():
        assert t["traces"] >= 4 and t["events"] > t["traces"] and t["rejected"] == t["inconclusive"] == 0
        assert t["seeds"] == ([] if t["workloads"] == ["bookie-storage"] else [3, 4])


def test_the_result_is_the_same_in_one_process_or_two() -> None:
    workloads = soak_workloads(PROFILES["ci"], ["cursor"])
    small = tuple(w.scaled(2) for w in workloads if w.seed in (11, 12))
    one, two = run_soak(small, jobs=1), run_soak(small, jobs=2)
    assert one.to_json() == two.to_json()
    assert one.tally("cursor", "full").traces == 12 and one.tally("cursor", "client").traces == 8


def _buggy_cursor_runs() -> tuple[CursorWorkload, ...]:
    """Runs whose engine has a seeded bug (a restore that skips unacknowledged entries): what a false positive
    looks like to the soak, as no unmutated run can show one."""
    buggy = CursorWorkload("cursor-buggy", RunConfig(mutant="restore_skips_unacked"), traces=8, steps=120, seed=1)
    return (buggy,)


def test_a_rejected_trace_is_reported_written_and_checks_again_from_its_file(tmp_path: Path) -> None:
    run = run_soak(_buggy_cursor_runs())
    tally = run.tally("cursor", "full")
    assert tally.rejected >= 1 and not run.passed
    flagged = next(f for f in tally.flagged if f.status == "violates")
    assert flagged.workload == "cursor-buggy" and flagged.seed == 1 and flagged.lines
    path = tmp_path / f"{flagged.trace}.ndjson"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in flagged.lines))
    command = flagged.check_command(str(path)).split()
    assert command[:2] == ["ledgerspec", "check"] and "--spec" in command and "Bug=" not in " ".join(command)
    status, verdicts = _json(command[1:])
    assert status == 1 and verdicts["violations"][0]["reason"] == flagged.reason


def test_every_flagged_trace_is_written_with_a_summary(tmp_path: Path) -> None:
    run = run_soak(_buggy_cursor_runs())
    write_soak(tmp_path, run, {"profile": "buggy", **run.to_json()})
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.ndjson"))
    assert written and written == sorted(f"cursor-buggy/full/{f.trace}.ndjson" for f in run.flagged)
    first = run.flagged[0]
    assert [json.loads(line) for line in first.path_under(tmp_path).read_text().splitlines()] == list(first.lines)
    assert json.loads((tmp_path / "summary.json").read_text())["passed"] is False


@attrs.frozen
class _BreaksInRun(RandomBookieWorkload):
    """The bookie's random runs, with the engine raising in run ``breaks``: what a bug that crashes the engine
    looks like to the soak."""

    breaks: int = 2

    def recorded(self, mutant: Any, modes: Any) -> Iterator[WorkloadRun]:
        for i, run in enumerate(RandomBookieWorkload.recorded(self, mutant, modes)):
            if i == self.breaks:
                raise BookieStateError("ledger 3: the engine broke")
            yield run


def test_a_run_in_which_the_engine_raises_is_reported_and_the_other_workloads_go_on(tmp_path: Path) -> None:
    bookie = SOAK_WORKLOADS["bookie"][0]
    assert isinstance(bookie, RandomBookieWorkload)
    broken = _BreaksInRun(bookie.name, bookie.config, traces=5, steps=10, seed=3)
    run = run_soak((broken, bookie.seeded(4).scaled(2)))
    [failure] = run.failures
    assert (failure.workload, failure.spec, failure.seed) == (bookie.name, "bookie", 3)
    assert (failure.run, failure.skipped) == (2, 2)  # runs 0 and 1 made, 3 and 4 not
    assert failure.error == "BookieStateError: ledger 3: the engine broke"
    assert "raise BookieStateError" in failure.details
    assert run.tally("bookie", "full").traces == 2 + 2 and not run.flagged and not run.passed
    write_soak(tmp_path, run, run.to_json())
    assert failure.path_under(tmp_path).read_text() == failure.details
    assert json.loads((tmp_path / "summary.json").read_text())["engine_failures"][0]["run"] == 2


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (["--spec", "nope"], "unknown spec nope"),
        (["--traces", "0"], "--traces must be at least 1"),
        (["--jobs", "0"], "--jobs must be at least 1"),
    ],
)
def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str], option: list[str], words: str) -> None:
    assert main(["soak", *option]) == 2
    assert words in capsys.readouterr().err


def test_a_soak_that_checked_nothing_has_not_passed() -> None:
    assert not SoakRun().passed


@pytest.mark.slow
def test_the_slow_soak_rejects_and_leaves_undecided_nothing(tmp_path: Path) -> None:
    status, summary = _json(["soak", "--profile", "slow", "--out", str(tmp_path)])
    failing = [f for t in summary["tallies"] for f in t["flagged"]]
    assert status == 0 and not failing and not summary["engine_failures"], (failing[:5], summary["engine_failures"])
    for t in summary["tallies"]:
        assert t["traces"] >= PROFILES["slow"].traces, t


def test_a_trace_the_checkers_bounds_leave_undecided_is_checked_again_under_larger_ones() -> None:
    """With no hidden step allowed between two events, short cursor runs in client mode (every persistence step
    hidden) are undecided; under the retry's bounds they conform, and are counted apart."""
    short = next(w for w in SOAK_WORKLOADS["cursor"] if w.name == "cursor-short")
    assert isinstance(short, SeededWorkload)
    run = run_soak((short.seeded(3).scaled(3),), modes=("client",), bounds=Bounds(max_hidden_steps=0))
    tally = run.tally("cursor", "client")
    assert tally.traces == 3 and tally.decided_later >= 1 and not tally.flagged and run.passed
    assert run.to_json()["tallies"][0]["decided_later"] == tally.decided_later


def test_the_checkers_of_a_workload_are_bounded_in_number_and_each_still_judges() -> None:
    """Runs checked under the faults they spent give one spec many sets of constants: the soak keeps the checkers
    used last, and a trace checked again after its checker was dropped gets the same verdict."""
    checkers = Checkers(Bounds())
    specs = [CursorSpec(MaxEntries=1, MaxFaults=faults) for faults in range(Checkers.KEPT + 2)]
    walk = random_walk(specs[0], random.Random(3), max_steps=12)
    lines = trace_events(specs[0], walk, "full", "bounded")
    first = [checkers.check(spec, "full", "bounded", lines).status for spec in specs]
    assert len(checkers._checkers) == Checkers.KEPT
    assert checkers.check(specs[0], "full", "bounded", lines).status == first[0] == "conforms"
    assert len(checkers._checkers) == Checkers.KEPT
