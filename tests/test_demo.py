"""``ledgerspec demo``, the README's main job: the unmutated engine's traces conform, each mutant's are caught,
Spark and the in-process checker agree, and the report shows the violations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ledgerspec.tools.cli.commands.demo import DEMO_MUTANTS

pytestmark = pytest.mark.spark


def test_the_demo_simulates_checks_on_spark_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerspec.tools.cli.main",
            "demo",
            "--out",
            str(out),
            "--master",
            "local[2]",
            "--json",
        ],
        capture_output=True,
        check=False,
        timeout=600,
    )
    assert got.returncode == 0, got.stderr.decode()[-3000:]
    summary = json.loads(got.stdout)
    assert summary["passed"] and summary["spark_and_in_process_disagree_on"] == []
    engines = summary["engines"]
    assert engines["unmutated"]["conforms"] == engines["unmutated"]["traces"] > 0
    assert engines["unmutated"]["bugs"] == 0 and engines["unmutated"]["promises"] == []
    for mutant in DEMO_MUTANTS:
        assert engines[mutant]["violates"] > 0
        assert engines[mutant]["bugs"] <= engines[mutant]["violates"]
        assert bool(engines[mutant]["bugs"]) == bool(engines[mutant]["promises"])
        trace, _, reason = engines[mutant]["first_violation"]
        assert trace.startswith(f"{mutant}/") and reason
    traces = sum(e["traces"] for e in engines.values())
    assert pq.read_table(out / "check" / "verdicts.parquet").num_rows == traces
    report = (out / "report.html").read_text()
    for mutant in DEMO_MUTANTS:
        assert engines[mutant]["first_violation"][0] in report
    assert sorted(p.name for p in (out / "traces").iterdir()) == sorted(engines)


def test_the_demo_refuses_a_directory_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    got = subprocess.run(
        [sys.executable, "-m", "ledgerspec.tools.cli.main", "demo", "--out", str(blocker / "demo")],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert got.returncode == 2
    assert b"cannot write to" in got.stderr
