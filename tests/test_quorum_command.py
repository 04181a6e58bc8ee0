"""``ledgerspec quorum``: JSON figures, the table, exit statuses, and clear errors for impossible quorums."""

from __future__ import annotations

import json
import time

import pytest
from ledgerspec.tools.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_figures_for_e5_qw3_qa2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "quorum", "--ensemble", "5", "--write", "3", "--ack", "2", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["valid"] is True and data["proved"] is True
    assert (data["ensemble"], data["write_quorum"], data["ack_quorum"], data["bookies"]) == (5, 3, 2, 5)
    assert data["fencing_replies_per_write_set"] == 2
    assert data["missing_after_no_such_entry"] == 2
    assert data["replicas_per_entry"] == 3
    tolerated = {name: t["tolerated"] for name, t in data["failures_tolerated"].items()}
    assert tolerated == {
        "acked_entries_survive": 1,
        "writes_continue_without_ensemble_change": 1,
        "writes_continue_with_ensemble_change": 1,
        "writes_continue_with_eager_ensemble_change": 0,
        "fencing_completes": 1,
    }
    assert all(t["proved"] for t in data["failures_tolerated"].values())
    assert data["failures_tolerated"]["acked_entries_survive"]["breaks_with"]["failed"] == [1, 2]
    rules = {r["rule"]: r for r in data["fencing_rules"]}
    assert rules["write_set_coverage"]["safe"] is True
    assert rules["qa_total"]["safe"] is False
    assert rules["qa_total"]["counterexample"]["replied"] == [1, 4]
    assert rules["qa_total"]["counterexample"]["unfenced_acks"] == [2, 3]
    assert {r["rule"]: r["safe"] for r in data["missing_rules"]} == {
        "write_set_coverage": True,
        "qa_no_such": True,
        "one_short": False,
    }
    assert data["ensemble_coverage_implies_write_set_coverage"] is True
    assert data["write_set_coverage_only"] is None


def test_spare_bookies_raise_the_figures_with_ensemble_change(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "quorum", "-e", "4", "-w", "2", "-a", "2", "--bookies", "6", "--json")
    data = json.loads(out)
    assert code == 0
    tolerated = {name: t["tolerated"] for name, t in data["failures_tolerated"].items()}
    assert tolerated["writes_continue_without_ensemble_change"] == 0
    assert tolerated["writes_continue_with_ensemble_change"] == 2
    assert tolerated["writes_continue_with_eager_ensemble_change"] == 2
    assert data["write_set_coverage_only"]["replied"] == [1, 3]


def test_missing_after_qa_counterexample_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "quorum", "-e", "4", "-w", "4", "-a", "2", "--json")
    (rule,) = [r for r in json.loads(out)["missing_rules"] if r["rule"] == "qa_no_such"]
    assert rule["safe"] is False
    assert rule["counterexample"]["acked"] == [1, 2] and rule["counterexample"]["no_such_entry"] == [3, 4]


def test_table_says_what_is_proved(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # wide enough that no cell wraps
    code, out, _ = run(capsys, "quorum", "--ensemble", "4", "--write", "3", "--ack", "2")
    rows = {cells[0]: cells[1:] for line in out.splitlines() if (cells := [c.strip() for c in line.split("│")[1:-1]])}
    assert code == 0
    assert out.startswith("E=4 Qw=3 Qa=2, a cluster of 4 bookies")
    assert rows["fencing replies needed in each write set"][:2] == ["2", "proved"]
    assert rows["NoSuchEntry replies to declare an entry missing"][:2] == ["2", "proved"]
    assert rows["failures tolerated: acknowledged entries survive"][:2] == ["1", "proved"]
    assert rows["failures tolerated: writes continue, eager ensemble change (default)"][:2] == ["0", "proved"]
    assert rows["Weaker: Qa replies from anywhere in the ensemble."][1:] == [
        "unsafe",
        "fencing replies from bookies 1, 4 count as complete, yet bookies 2, 3 of entry 0's write set {1, 2, 3} "
        "are not fenced: the old writer still gets 2 acks for entry 0",
    ]
    assert "Every figure above is proved by Z3" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-e", "3", "-w", "2", "-a", "3"], "ack quorum larger than the write quorum: Qa=3 > Qw=2"),
        (["-e", "3", "-w", "4", "-a", "2"], "write quorum larger than the ensemble: Qw=4 > E=3"),
        (["-e", "0", "-w", "0", "-a", "0"], "ensemble size E must be at least 1, got E=0"),
        (["-e", "3", "-w", "2", "-a", "-1"], "ack quorum Qa must be at least 1, got Qa=-1"),
        (["-e", "3", "-w", "3", "-a", "2", "--bookies", "2"], "not enough bookies for the ensemble: bookies=2 < E=3"),
    ],
)
def test_impossible_configuration_is_refused(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "quorum", *argv)
    assert code == 2 and out == ""
    assert message in " ".join(err.split())
    assert "Traceback" not in err
    code, out, _ = run(capsys, "quorum", *argv, "--json")
    data = json.loads(out)
    assert code == 2 and data["valid"] is False and data["proved"] is False
    assert message in data["error"]


def test_non_integer_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["quorum", "--ensemble", "three", "--write", "2", "--ack", "2"])
    assert exc.value.code == 2
    assert "argument --ensemble/-e: invalid int value: 'three'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["-e", "100", "-w", "3", "-a", "2"], ["-e", "5", "-w", "3", "-a", "2", "-n", "100"]])
def test_a_cluster_too_large_to_prove_in_seconds_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    started = time.perf_counter()
    code, out, err = run(capsys, "quorum", *argv)
    assert code == 2 and out == "" and time.perf_counter() - started < 5
    assert "bookies is more than 16" in err and "add --force to prove it anyway" in " ".join(err.split())
    code, out, _ = run(capsys, "quorum", *argv, "--json")
    assert code == 2 and "add --force" in json.loads(out)["error"]


def test_force_proves_a_larger_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "quorum", "-e", "17", "-w", "3", "-a", "2")
    assert code == 2 and out == ""
    code, out, _ = run(capsys, "quorum", "-e", "17", "-w", "3", "-a", "2", "--force", "--json")
    assert code == 0 and json.loads(out)["proved"] is True
