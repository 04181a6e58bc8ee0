"""``ledgerspec simulate ledger``: reproducible traces of the engine, which the conformance oracle accepts.

The correct engine's traces must conform, fully observed and as clients see
them; a mutant's must not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledgerspec.tools.cli.main import main

FAULTS_WITHOUT_RESTART = "crash,loss,reorder,recovery,ensemble-change"
ALL_FAULTS = FAULTS_WITHOUT_RESTART + ",restart"


def simulate(out: Path, *args: str) -> int:
    return main(["simulate", "ledger", "--out", str(out), *args])


def check_command(out: Path) -> list[str]:
    """``ledgerspec check`` as the manifest gives it, without the program name."""
    manifest = json.loads((out / "manifest.json").read_text())
    argv: list[str] = manifest["check"].split()
    assert argv[:2] == ["ledgerspec", "check"]
    return argv[1:]


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b", "c"):
        seed = "5" if name != "c" else "6"
        assert simulate(tmp_path / name, "--seed", seed, "--steps", "150", "--traces", "3", "--json") == 0
    capsys.readouterr()
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["ledger-5-0.ndjson", "ledger-5-1.ndjson", "ledger-5-2.ndjson", "manifest.json"]
    for name in names[:-1]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    manifests = [json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("a", "b")]
    assert [dict(m, check=None) for m in manifests[:1]] == [dict(m, check=None) for m in manifests[1:]]
    other = (tmp_path / "c" / "ledger-6-0.ndjson").read_bytes()
    assert other != (tmp_path / "a" / "ledger-5-0.ndjson").read_bytes()


@pytest.mark.parametrize(
    ("mode", "faults"),
    [
        ("full", FAULTS_WITHOUT_RESTART),
        ("client", FAULTS_WITHOUT_RESTART),
        ("full", ALL_FAULTS),
        ("client", ALL_FAULTS),
    ],
)
def test_traces_of_the_engine_conform(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, faults: str
) -> None:
    args = ["--seed", "1", "--steps", "250", "--traces", "12", "--mode", mode, "--faults", faults]
    assert simulate(tmp_path, *args) == 0
    capsys.readouterr()
    assert main([*check_command(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["traces"], report["conforms"], report["mode"]) == (12, 12, mode)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    events = sum(run["events"] for run in manifest["traces"])
    assert report["events"] == events > 12 * 10


def test_traces_of_a_mutant_violate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--seed", "2", "--steps", "100", "--traces", "4", "--mutant", "lac_before_qa"]
    assert simulate(tmp_path, *args) == 0
    capsys.readouterr()
    assert main([*check_command(tmp_path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["violations"], report
    assert "writer_lac" in report["violations"][0]["reason"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "crash,meteor"], "unknown fault meteor; faults: crash, restart, loss"),
        (["--mutant", "nosuch"], "unknown mutant 'nosuch'; mutants: lac_before_qa"),
        (["--mode", "bookie"], "unknown mode 'bookie' for ledger; modes: full, client"),
        (["--const", "Qa=3"], "ack quorum larger than the write quorum"),
        (["--const", "Bug=lac_before_qa"], "the engine takes no Bug constant"),
        (["--const", "Colour=3"], "unknown constant Colour"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--steps", "100000"], "--steps 100,000 is more than 10,000: a run's time grows faster than its steps"),
        (["--const", "MaxEntries=99999999999999999999999"], "constant MaxEntries must lie between"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert simulate(tmp_path, *args) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_unknown_simulation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "bookie", "--out", str(tmp_path)]) == 2
    assert "no simulation of spec 'bookie'; simulations: ledger" in capsys.readouterr().err


def test_force_runs_more_steps_than_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "autorecovery", "--out", str(tmp_path), "--steps", "10001", "--json"]
    assert main(argv) == 2 and "add --force to run it anyway" in " ".join(capsys.readouterr().err.split())
    assert main([*argv, "--force"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 10001
