"""``ledgerspec check``: JSON and human output, exit statuses, clear errors."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.generate import random_walk, trace_events, write_ndjson
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.tools.cli.main import main

CONSTANTS = ["--const", "MaxEntries=3", "--const", "MaxLoss=1", "--const", "MaxCrashes=1"]


def write(path: Path, count: int, mode: str = "full", seed: int = 1, **spec: Any) -> list[list[dict[str, Any]]]:
    model = LedgerSpec(MaxEntries=3, MaxLoss=1, MaxCrashes=1, **spec)
    rng = random.Random(seed)
    objs = [trace_events(model, random_walk(model, rng, 30), mode, f"t{i}") for i in range(count)]
    write_ndjson(path, objs)
    return objs


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_conforming_traces_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = write(tmp_path / "a.ndjson", 20)
    code, out, _ = run(capsys, "check", str(tmp_path / "a.ndjson"), "--json", *CONSTANTS)
    data = json.loads(out)
    assert code == 0
    assert (data["traces"], data["conforms"], data["events"]) == (20, 20, sum(map(len, objs)))
    assert (data["violations"], data["inconclusive"], data["input_errors"]) == ([], [], [])
    assert data["spec"] == "ledger" and data["mode"] == "full" and data["constants"]["MaxEntries"] == 3


def test_a_violation_exits_1_with_trace_event_and_explanation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "bug.ndjson", 40, Bug="lac_before_qa")
    code, out, _ = run(capsys, "check", str(tmp_path / "bug.ndjson"), "--json", *CONSTANTS)
    data = json.loads(out)
    assert code == 1 and data["violations"]
    v = data["violations"][0]
    assert set(v) >= {"trace", "event_index", "reason", "explanation", "file", "line", "path"}
    assert "observed writer_lac = 0, the spec has -1" in v["reason"]
    assert v["file"] == str(tmp_path / "bug.ndjson") and v["path"][0] == "Init"
    # A LAC moved early loses nothing yet; only a walk that goes on to close the ledger below it shows a loss.
    findings = {(w["finding"], tuple(w["promises"])) for w in data["violations"]}
    assert ("difference", ()) in findings and findings <= {("difference", ()), ("bug", ("NoAckedEntryLost",))}
    assert all(w["undecided"] == [] for w in data["violations"])
    assert data["conforms"] + len(data["violations"]) == data["traces"] == 40


def test_human_output_tells_the_story(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "bug.ndjson", 40, Bug="lac_before_qa")
    code, out, _ = run(capsys, "check", str(tmp_path / "bug.ndjson"), *CONSTANTS)
    text = " ".join(out.split())
    assert code == 1
    assert "diverges from the spec at event" in text and "observed writer_lac = 0, the spec has -1" in text
    assert "shortest spec path to that point" in text and "0. Init" in text
    assert "with no promise shown broken" in text


def test_a_lost_entry_is_told_as_the_promise_it_breaks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seeded bug's counterexample: a LAC moved early (a difference), then a close that loses the entry."""
    from ledgerspec.conformance.generate import WalkStep
    from ledgerspec.tools.model_checking.explorer.explorer import explore

    constants = {"E": 3, "Qw": 2, "Qa": 2, "MaxEntries": 2}
    buggy = LedgerSpec(**constants, Bug="lac_before_qa")
    (violation,) = explore(buggy, check_deadlock=False).violations
    walk = tuple(WalkStep(s.step.action, tuple(v for _, v in s.step.params), s.state) for s in violation.trace)
    write_ndjson(tmp_path / "lost.ndjson", [trace_events(buggy, walk, "client", "lost")])
    argv = [
        "check",
        str(tmp_path / "lost.ndjson"),
        "--mode",
        "client",
        *(f"--const={k}={v}" for k, v in constants.items()),
    ]
    code, out, _ = run(capsys, *argv)
    text = " ".join(out.split())
    assert code == 1
    assert "bug: NoAckedEntryLost broken by 1 trace(s): lost" in text
    assert "then event" in text and "breaks the promise NoAckedEntryLost" in text
    assert "writer_lac = " in text and "reported by writer at event" in text  # the evidence, with its events
    code, out, _ = run(capsys, *argv, "--json")
    (violation_json,) = json.loads(out)["violations"]
    assert violation_json["finding"] == "bug" and violation_json["promises"] == ["NoAckedEntryLost"]
    assert violation_json["further"][-1]["broken"][0]["promise"] == "NoAckedEntryLost"
    assert violation_json["reason"].startswith("violates NoAckedEntryLost at event ")


def test_bad_lines_exit_2_and_the_rest_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.ndjson"
    write(path, 5)
    lines = path.read_bytes().splitlines()
    lines[3] = b'{"v": 1, "trace": "t0", oops'
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, out, _ = run(capsys, "check", str(path), "--json", *CONSTANTS)
    data = json.loads(out)
    assert code == 2
    (error,) = data["input_errors"]
    assert error["file"] == str(path) and error["line"] == 4 and error["trace"] == "t0"
    assert data["traces"] == 5 and data["conforms"] == 4 and data["inconclusive"][0]["trace"] == "t0"


def test_inconclusive_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    state = next(iter(spec.init_states()))
    from ledgerspec.conformance.generate import WalkStep
    from ledgerspec.spec.ledger.ledger import Msg

    steps = [WalkStep("Init", (), state)]
    for name, args in [
        ("WriterAddsEntry", (-1,)),
        ("NetworkLosesMessage", (Msg("AddReq", 0, 1, 0, -1),)),
        ("WriterChangesEnsemble", (1, 4)),
    ]:
        state = spec.find_action(name).fn(spec, state, *args)
        steps.append(WalkStep(name, args, state))
    path = tmp_path / "c.ndjson"
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in trace_events(spec, tuple(steps), "client", "c")))
    argv = ["check", str(path), "--mode", "client", "--const", "NumBookies=4", "--const", "MaxLoss=1", "--json"]
    code, out, _ = run(capsys, *argv, "--max-hidden-steps", "0")
    data = json.loads(out)
    assert code == 4
    (v,) = data["inconclusive"]
    assert v["bound"] == {"bound": "max_hidden_steps", "limit": 0, "event_index": 2}
    code, out, _ = run(capsys, *argv)
    assert code == 0 and json.loads(out)["conforms"] == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "bookie"], "spec ledger has no observation mode 'bookie'; modes: full, client, bookies, merged"),
        (["--spec", "nosuch"], "unknown spec 'nosuch'"),
        (["--const", "Qa=9"], "ack quorum larger than the write quorum"),
        (["--max-candidates", "0"], "bounds must be max_hidden_steps >= 0, max_candidates >= 1 and"),
        (["--max-divergences", "0"], "max_divergences >= 1, got Bounds(max_hidden_steps=None, max_candidates=10000"),
        (["--max-reduced-closure", "0"], "max_reduced_closure must be at least 1, got 0"),
        (["--master", "local[1]"], "--master and --out go with --spark"),
        (["--spark", "--report", "r.html"], "--report is written by runs in this process (without --spark)"),
        (["--spark", "--max-bad-lines", "5"], "--max-bad-lines bounds runs in this process (without --spark)"),
        (["--max-bad-lines", "-1"], "--max-bad-lines must be at least 0, got -1"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    write(tmp_path / "a.ndjson", 1)
    code, out, err = run(capsys, "check", str(tmp_path / "a.ndjson"), *argv)
    assert code == 2 and message in " ".join(err.split()) and "Traceback" not in err and out == ""


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "check", str(tmp_path / "nope.ndjson"))
    assert code == 2 and "nope.ndjson: no such file" in " ".join(err.split())


def test_an_empty_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.ndjson").write_bytes(b"")
    code, out, err = run(capsys, "check", str(tmp_path / "empty.ndjson"))
    assert code == 2 and "empty.ndjson: empty file: it holds no trace" in " ".join(err.split()) and out == ""


def test_a_file_of_garbage_stops_after_100_bad_lines_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "garbage.ndjson"
    path.write_bytes(random.Random(3).randbytes(2_000_000))
    code, out, _ = run(capsys, "check", str(path))
    assert code == 2
    listed = [line.strip() for line in out.splitlines() if line.strip().startswith(str(path))]
    assert len(listed) == 101 and "101 bad line(s)" in out
    assert listed[-1].endswith(
        "more than 100 bad lines: the rest of the file is not read (the limit; see --max-bad-lines)"
    )
    assert listed[99].startswith(f"{path}:100: not valid UTF-8")  # a line number, not an emoji code
    code, out, _ = run(capsys, "check", str(path), "--max-bad-lines", "2", "--json")
    assert code == 2 and len(json.loads(out)["input_errors"]) == 3
