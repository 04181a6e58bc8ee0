"""Traces carry what they were recorded under: the ``manifest.json`` beside them, read by ``ledgerspec check``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from ledgerspec.conformance.manifest import MANIFEST_NAME, find_inputs, manifest_json, read_manifest, write_manifest
from ledgerspec.conformance.reader import TraceFileError
from ledgerspec.tools.cli.main import main

RECORDING = Path(__file__).parent / "data" / "bookkeeper-4.17.2" / "crash-restart"


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main([*args, "--json"])
    return status, json.loads(buffer.getvalue())


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ledger traces written by ``simulate`` under constants other than the spec's defaults (four bookies,
    crashes and lost messages)."""
    directory = tmp_path_factory.mktemp("simulated")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["simulate", "ledger", "--out", str(directory), "--traces", "3", "--seed", "2", "--json"]) == 0
    return directory


def test_simulated_traces_are_checked_under_the_constants_they_were_recorded_under(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads((simulated / MANIFEST_NAME).read_text())
    assert manifest["format"] == "ledgerspec-traces" and manifest["constants"]["NumBookies"] == 4
    status, checked = _json(["check", str(simulated)], capsys)
    assert status == 0 and checked["traces"] == 3 and checked["constants"]["NumBookies"] == 4
    # Without the manifest, the same files are checked under the spec's defaults (three bookies), and the
    # first event already leaves the spec.
    bare = simulated.parent / "bare"
    bare.mkdir()
    for name in manifest["files"]:
        (bare / name).write_bytes((simulated / name).read_bytes())
    status, checked = _json(["check", str(bare)], capsys)
    assert status == 1 and checked["constants"]["NumBookies"] == 3
    # One file alone takes the manifest beside it.
    status, checked = _json(["check", str(simulated / manifest["files"][0])], capsys)
    assert status == 0 and checked["traces"] == 1 and checked["manifests"] == [str(simulated / MANIFEST_NAME)]


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (["--const", "NumBookies=5"], "--const NumBookies=5 contradicts"),
        (["--spec", "cursor"], "--spec cursor contradicts"),
        (["--mode", "client"], "--mode client contradicts"),
    ],
)
def test_an_option_that_contradicts_the_manifest_is_an_error_not_a_violation(
    simulated: Path, capsys: pytest.CaptureFixture[str], option: list[str], words: str
) -> None:
    assert main(["check", str(simulated), *option]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert words in err and str(simulated / MANIFEST_NAME) in err
    # What agrees with the manifest is accepted.
    assert main(["check", str(simulated), "--const", "NumBookies=4", "--spec", "ledger", "--mode", "full"]) == 0


def test_each_trace_is_checked_under_its_own_constants(simulated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two copies of one trace in one file, listed with different constants: each is checked under its own."""
    manifest = read_manifest(simulated / MANIFEST_NAME)
    lines = [json.loads(line) for line in (simulated / manifest.files[0]).read_text().splitlines()]
    directory = simulated.parent / "own"
    directory.mkdir()
    copies = [{**line, "trace": trace} for trace in ("as-recorded", "too-few-bookies") for line in lines]
    (directory / "both.ndjson").write_text("".join(json.dumps(line) + "\n" for line in copies))
    constants = dict(manifest.constants)
    write_manifest(
        directory,
        manifest_json(
            spec="ledger",
            mode="full",
            constants=constants,
            files=["both.ndjson"],
            traces=[{"trace": "as-recorded"}, {"trace": "too-few-bookies", "constants": {"NumBookies": 3}}],
        ),
    )
    status, checked = _json(["check", str(directory)], capsys)
    assert status == 1 and [v["trace"] for v in checked["violations"]] == ["too-few-bookies"]
    assert sorted(c["NumBookies"] for c in checked["constant_sets"]) == [3, 4]
    # A --const that the listed trace contradicts names that trace.
    assert main(["check", str(directory), "--const", "NumBookies=4"]) == 2
    assert "trace too-few-bookies was recorded under NumBookies=3" in " ".join(capsys.readouterr().err.split())


def test_files_the_manifest_does_not_list_are_named_with_the_reason(
    simulated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "traces"
    directory.mkdir()
    for f in simulated.iterdir():
        (directory / f.name).write_bytes(f.read_bytes())
    (directory / "stray.ndjson").write_text('{"v": 1}\n')
    (directory / "raw.ndjson").write_text('{"obs": 1}\n')
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    write_manifest(directory, {**manifest, "not_traces": {"raw.ndjson": "what the harness saw, unmapped"}})
    status, checked = _json(["check", str(directory)], capsys)
    assert status == 0 and checked["traces"] == 3
    assert checked["not_read"] == [
        {"file": str(directory / "raw.ndjson"), "why": "what the harness saw, unmapped"},
        {"file": str(directory / "stray.ndjson"), "why": f"not listed in {directory / MANIFEST_NAME}"},
    ]
    assert main(["check", str(directory)]) == 0
    assert "not read: " + str(directory / "stray.ndjson") in capsys.readouterr().out
    # Named on its own, a file the manifest says is not a trace is refused with the reason.
    assert main(["check", str(directory / "raw.ndjson")]) == 2
    assert "not a trace file" in capsys.readouterr().err


def test_a_directory_of_recorded_scenarios_is_read_through_their_manifests(tmp_path: Path) -> None:
    for name, constants in (("a", {"NumBookies": 4}), ("b", {"NumBookies": 5})):
        directory = tmp_path / "out" / name
        directory.mkdir(parents=True)
        (directory / "trace.ndjson").write_text(
            '{"v":1,"trace":"t-' + name + '","process":"w","seq":0,"type":"Init"}\n'
        )
        write_manifest(
            directory, manifest_json(spec="ledger", mode="client", constants=constants, files=["trace.ndjson"])
        )
    (tmp_path / "out" / "bookies").mkdir()  # the bookies' files beside the scenarios: no traces, not read
    inputs = find_inputs([tmp_path / "out"])
    assert [Path(f).parent.name for f in inputs.files] == ["a", "b"]
    assert [inputs.constants_of("t-a", f) for f in inputs.files] == [{"NumBookies": 4}, {"NumBookies": 5}]


def test_a_recording_not_yet_mapped_says_how_to_map_it(capsys: pytest.CaptureFixture[str]) -> None:
    for path in (RECORDING, RECORDING / "observations.ndjson"):
        assert main(["check", str(path)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"ledgerspec record bookkeeper --recheck {RECORDING} --out OUT" in err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{", "not JSON"),
        ('{"spec": "ledger"}', 'not a trace manifest (no "format": "ledgerspec-traces")'),
        ('{"format": "ledgerspec-traces", "v": 2}', "manifest version 2; this checker reads 1"),
        ('{"format": "ledgerspec-traces", "v": 1, "spec": "ledger", "mode": "full"}', '"files" must be a JSON array'),
        (
            '{"format": "ledgerspec-traces", "v": 1, "spec": "ledger", "mode": "full", "files": ["../x.ndjson"]}',
            '"files" must name files of the manifest\'s directory',
        ),
        (
            '{"format": "ledgerspec-traces", "v": 1, "spec": "ledger", "mode": "full", "files": ["gone.ndjson"]}',
            "gone.ndjson: no such file",
        ),
        (
            '{"format": "ledgerspec-traces", "v": 1, "spec": "ledger", "mode": "full", "files": [], '
            '"constants": {"NumBookies": "many"}}',
            "constant NumBookies must be an integer, got 'many'",
        ),
    ],
)
def test_a_bad_manifest_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    (tmp_path / MANIFEST_NAME).write_text(content)
    (tmp_path / "t.ndjson").write_text('{"v":1,"trace":"t","process":"w","seq":0,"type":"Init"}\n')
    assert main(["check", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert words in err and str(tmp_path) in err
    if "constant" not in words:
        with pytest.raises(TraceFileError, match=r"manifest|JSON|no such file"):
            find_inputs([tmp_path])


def test_the_soak_writes_a_manifest_beside_its_flagged_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ledgerspec.reference.managed_ledger import RunConfig
    from ledgerspec.tools.harness.soak import run_soak, write_soak
    from ledgerspec.tools.harness.workloads import CursorWorkload

    buggy = CursorWorkload("cursor-buggy", RunConfig(mutant="restore_skips_unacked"), traces=8, steps=120, seed=1)
    run = run_soak((buggy,))
    write_soak(tmp_path, run, run.to_json())
    status, checked = _json(["check", str(tmp_path / "cursor-buggy" / "full")], capsys)
    assert status == 1 and checked["spec"] == "cursor"
    assert sorted(v["reason"] for v in checked["violations"]) == sorted(
        f.reason for f in run.flagged if f.status == "violates"
    )
