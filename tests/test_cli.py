"""The command line: JSON output, exit statuses, and clear errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ledgerspec.tools.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_python_engine_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model-check", "ledger", "--engine", "python", "--const", "MaxEntries=1", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["constants"]["MaxEntries"] == 1
    assert data["python"]["distinct_states"] == 1898
    assert data["python"]["violations"] == []
    assert "agree" not in data and "tlc" not in data


def test_violation_json_names_the_invariant_and_gives_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "model-check", "ledger", "--engine", "python", "--json",
        "--const", "E=3", "--const", "Qw=3", "--const", "MaxEntries=1", "--const", "Bug=recovery_read_no_fence",
    )  # fmt: skip
    assert code == 1
    (violation,) = json.loads(out)["python"]["violations"]
    assert violation["invariant"] == "NoAckedEntryLost"
    trace = violation["trace"]
    assert trace[0]["action"] == "Init" and trace[-1]["action"] == "RecovererClosesLedger"
    assert trace[-1]["state"]["meta_status"] == "CLOSED" and trace[-1]["state"]["writer_lac"] == 0
    assert trace[2]["params"]["m"]["type"] == "AddReq"


def test_human_output_tells_the_counterexample(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "model-check", "ledger", "--engine", "python",
        "--const", "E=3", "--const", "Qw=2", "--const", "Qa=1", "--const", "Bug=fence_qa_total",
    )  # fmt: skip
    assert code == 1
    assert "invariant NoNewAcksToFencedWriter violated" in out
    assert "RecovererStartsRecovery(c=1)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--const", "Qa=3"], "ack quorum larger than the write quorum: Qa=3 > Qw=2"),
        (["--const", "Qw=4"], "write quorum larger than the ensemble: Qw=4 > E=3"),
        (["--const", "E=0", "--const", "Qw=0", "--const", "Qa=0"], "ensemble size E must be at least 1"),
        (["--const", "Bogus=1"], "unknown constant Bogus for spec ledger"),
        (["--const", "MaxEntries"], "--const expects NAME=VALUE, got 'MaxEntries'"),
        (["--const", "MaxEntries=two"], "constant MaxEntries must be an integer, got 'two'"),
        (
            ["--const", "NumBookies=99999999999999999999999"],
            "constant NumBookies must lie between -2,147,483,648 and 2,147,483,647 (TLC's integers are 32-bit)",
        ),
    ],
)
def test_bad_constants_get_a_clear_error(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, "model-check", "ledger", "--engine", "python", *argv)
    assert code == 2
    assert message in " ".join(err.split())
    assert "Traceback" not in err and out == ""


def test_unknown_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "model-check", "nosuchspec", "--engine", "python")
    assert code == 2 and "unknown spec 'nosuchspec'; known specs: ledger" in err


@pytest.mark.parametrize("spec", ["ledger", "managed-ledger"])
def test_an_unknown_preset_is_a_usage_error_that_names_the_presets(
    capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    code, out, err = run(capsys, "model-check", spec, "--engine", "python", "--preset", "chaos")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "unknown preset 'chaos'; presets: defaults, faults" in " ".join(err.split())


def test_a_preset_takes_every_action_its_mode_allows_and_a_constant_on_top_of_it_can_leave_some_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "model-check", "ledger", "--engine", "python", "--preset", "faults", "--json")
    data = json.loads(out)
    assert code == 0 and data["preset"] == "faults" and data["python"]["distinct_states"] == 15_538
    assert data["constants"]["MaxLoss"] == 1 and data["python"]["never_taken"] == ["ClientReceivesReply"]
    assert data["python"]["actions"]["NetworkLosesMessage"]["transitions"] > 0
    # without losses, nothing is resent: a vacuous run for those actions, pointed out
    argv = ["model-check", "ledger", "--engine", "python", "--preset", "faults", "--const", "MaxLoss=0"]
    code, out, _ = run(capsys, *argv)
    text = " ".join(out.split())
    assert code == 0 and "(preset faults)" in text and "MaxLoss=0" in text
    assert "off under the preset's constants, by design: ClientReceivesReply" in text
    assert (
        "warning: the python explorer never took 4 of 21 actions: NetworkLosesMessage, RecovererResendsFenceRead, "
        "RecovererResendsRead, RecovererResendsWriteBack. The run checked none of their steps" in text
    )
    code, out, _ = run(capsys, *argv, "--json")
    assert json.loads(out)["python"]["never_taken"] == [
        "ClientReceivesReply",
        "NetworkLosesMessage",
        "RecovererResendsFenceRead",
        "RecovererResendsRead",
        "RecovererResendsWriteBack",
    ]


def test_the_defaults_leave_actions_out_and_the_warning_names_the_preset_that_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "model-check", "autorecovery", "--engine", "python", "--preset", "defaults")
    text = " ".join(out.split())
    assert code == 0
    assert (
        "warning: the python explorer never took 5 of 17 actions: BookieLosesDisk, WriterClosesLedger, WorkerGivesUp, "
        "WorkerDefersLock, WorkerEndsGracePeriod. The run checked none of their steps; --preset faults takes every "
        "action" in text
    )


@pytest.mark.tlc
def test_both_engines_count_the_actions_they_take_and_agree_on_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model-check", "managed-ledger", "--engine", "both", "--json")
    data = json.loads(out)
    assert code == 0 and data["agree"] and data["actions_compared"]
    assert (
        data["python"]["never_taken"]
        == data["tlc"]["never_taken"]
        == ["ConnectionDrops", "LedgerCreationFails", "ClockTicks", "TopicMovesToAnotherBroker", "OldBrokerRollsOver"]
    )
    assert (
        data["tlc"]["actions"]["BrokerCrashes"]["transitions"]
        == data["python"]["actions"]["BrokerCrashes"]["transitions"]
    )
    code, out, _ = run(capsys, "model-check", "managed-ledger", "--engine", "both")
    text = " ".join(out.split())
    assert (
        "warning: neither engine took 5 of 16 actions: ConnectionDrops, LedgerCreationFails, ClockTicks, "
        "TopicMovesToAnotherBroker, OldBrokerRollsOver" in text
    )
    assert "The engines agree: the same states, the same actions taken." in text
    code, out, _ = run(capsys, "model-check", "managed-ledger", "--engine", "tlc", "--no-coverage", "--json")
    assert code == 0 and "actions" not in json.loads(out)["tlc"]


def test_specs_lists_constants(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "specs")
    assert code == 0 and "ledger" in out and "MaxEntries" in out
    text = " ".join(out.split())
    assert (
        "presets (model-check --preset): defaults; faults (OpenLedger=1 MaxStops=2 MaxDiskLosses=1 NumEntries=1): "
        "takes every action" in text
    )


def test_specs_json_gives_every_spec_and_its_constants(capsys: pytest.CaptureFixture[str]) -> None:
    from ledgerspec.spec import catalog

    code, out, _ = run(capsys, "specs", "--json")
    data = json.loads(out)
    assert code == 0 and [s["name"] for s in data["specs"]] == list(catalog.SPECS)
    ledger = data["specs"][0]
    max_entries = next(c for c in ledger["constants"] if c["name"] == "MaxEntries")
    assert max_entries["type"] == "int" and max_entries["default"] == 2 and max_entries["choices"] is None
    bug = next(c for c in ledger["constants"] if c["name"] == "Bug")
    assert bug["type"] == "str" and "none" in bug["choices"]
    defaults, faults = ledger["presets"]
    assert defaults == {"name": "defaults", "constants": {}}
    assert faults["name"] == "faults" and faults["constants"]["MaxLoss"] == 1 and faults["distinct_states"] == 15_538


@pytest.mark.parametrize("argv", [["specs", "--json"], ["mutants", "--list", "--json"]])
def test_a_closed_pipe_ends_the_output_without_a_traceback(argv: list[str]) -> None:
    """As ``| head`` does: the reader goes away before the output is written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ledgerspec", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait() == 141 and err == ""


def test_console_script_is_installed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledgerspec", "model-check", "ledger", "--engine", "python", "--const", "Qa=5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "ack quorum larger than the write quorum" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.tlc
def test_both_engines_tell_the_collision_probability(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model-check", "ledger", "--engine", "both", "--const", "MaxEntries=1")
    text = " ".join(out.split())
    assert code == 0
    assert "tlc: states kept as 64-bit fingerprints; the probability of a fingerprint collision is estimated" in text
    assert "python: whole states kept, to compare them with TLC's: none can collide" in text
    code, out, _ = run(capsys, "model-check", "ledger", "--engine", "both", "--const", "MaxEntries=1", "--json")
    assert 0 < json.loads(out)["tlc"]["collision_probability"] < 1e-6


@pytest.mark.parametrize("name", ["managed-ledger", "managed_ledger"])
def test_a_spec_name_takes_a_dash_or_an_underscore(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    code, out, _ = run(capsys, "model-check", name, "--engine", "python", "--json")
    assert code == 0 and json.loads(out)["spec"] == "managed_ledger"
    code, out, _ = run(capsys, "simulate", name, "--out", str(tmp_path), "--steps", "20", "--json")
    assert code == 0 and json.loads(out)["traces"]


def test_demo_help_says_the_default_runs_and_why_few_fail(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "runs per engine (default 12)" in text
    assert "ack_before_fsync" in text and "with fewer runs it goes uncaught and the demo fails" in text


def test_constants_far_beyond_the_known_models_need_force(capsys: pytest.CaptureFixture[str]) -> None:
    """The ledger models known to finish here throttle at most one entry: four is refused with the reason, and
    runs when forced (a one-entry ledger never reaches the throttle, so it is still small)."""
    argv = ["model-check", "ledger", "--engine", "python", "--const", "MaxEntries=1", "--const", "Throttle=4"]
    code, _, err = run(capsys, *argv)
    err = " ".join(err.split())
    assert code == 2 and "Throttle=4 lies far beyond the models of ledger known to finish here" in err
    assert "Throttle at most 1" in err and "Add --force" in err
    code, out, err = run(capsys, *argv, "--force", "--json")
    assert code == 0 and json.loads(out)["python"]["distinct_states"] == 1_898
    code, _, err = run(
        capsys, "model-check", "ledger", "--engine", "python", "--const", "MaxEntries=1", "--const", "Throttle=2"
    )
    assert code == 0 and "Throttle=2 is beyond every model of ledger checked here" in " ".join(err.split())
