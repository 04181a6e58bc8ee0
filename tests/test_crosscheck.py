"""A client's own log beside the served bookies' log (``conformance/crosscheck.py``, ``ledgerspec cross-check``),
and the two merged into one trace (``conformance/log_merge.py``, ``ledgerspec merge``): the reference client
recovers an open ledger on traced reference bookies, and the writer's add after the fence is refused by bookies 2
and 3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.checker import check_trace
from ledgerspec.conformance.crosscheck import cross_check_paths
from ledgerspec.conformance.events import events_from_json
from ledgerspec.conformance.log_merge import MERGED_FILE, LogMergeError, merge_paths
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording.reference_client import (
    CLIENT_SCENARIOS,
    ServedReferenceBookies,
    record_reference_client,
)

SCENARIO = "recover-open-ledger"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The client's trace directory and the bookies' trace file of one run."""
    root = tmp_path_factory.mktemp("cross-check")
    with ServedBookies(root / "bookies", 4, trace=root / "served" / "run.ndjson") as served:
        (recording,) = record_reference_client([SCENARIO], ServedReferenceBookies(served), root / "client")
    assert recording.status == "conforms"
    return root / "client" / SCENARIO, root / "served"


def _edited(client: Path, tmp_path: Path, edit: Callable[[list[dict[str, Any]]], None]) -> Path:
    """A copy of the client's trace directory with its lines passed through ``edit``."""
    copy = tmp_path / "client"
    copy.mkdir(parents=True)
    (copy / "manifest.json").write_bytes((client / "manifest.json").read_bytes())
    lines = [orjson.loads(line) for line in (client / "trace.ndjson").read_bytes().splitlines()]
    edit(lines)
    (copy / "trace.ndjson").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return copy


def test_every_reply_the_client_took_is_one_a_bookie_sent(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    client, served = run
    (result,) = cross_check_paths(client, served)
    replies = [
        line
        for line in map(orjson.loads, (client / "trace.ndjson").read_bytes().splitlines())
        if line["type"].startswith("BookieReceives")
    ]
    assert result.agrees and result.replies == result.matched == len(replies) > 20
    assert main(["cross-check", str(client), str(served), "--json"]) == 0
    (pair,) = json.loads(capsys.readouterr().out)["pairs"]
    assert pair["agrees"] and pair["bookies_trace"] == "run-L0" and pair["discrepancies"] == []


def _ack_the_refusal(refused_by: list[int]) -> Callable[[list[dict[str, Any]]], None]:
    """An edit of the client's log: the refusal of entry 4 it took from bookie 2 or 3 taken as an ack instead."""

    def edit(lines: list[dict[str, Any]]) -> None:
        acks: list[list[int]] = []
        for line in lines:
            acks = line.get("observed", {}).get("writer_acks", acks)
            m = line.get("params", {}).get("m", {})
            if line["type"] == "BookieReceivesAdd" and m.get("entry") == 4 and line["process"] == "writer":
                line["observed"] = {"writer_acks": [*acks, [4, m["bookie"]]]}
                refused_by.append(m["bookie"])
                return
        raise AssertionError("the writer's refused add of entry 4 is not in the trace")

    return edit


def test_a_refusal_the_writer_counted_as_an_acknowledgement_is_named(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer's log, edited: the refusal of entry 4 (the ledger fenced) it took from bookie 2 or 3 taken as that
    bookie's ack. A fenced writer that goes on counting acks appends past the fence; the bookies' log says what the
    bookie answered."""
    client, served = run
    refused_by: list[int] = []

    edited = _edited(client, tmp_path, _ack_the_refusal(refused_by))
    (result,) = cross_check_paths(edited, served)
    (found,) = result.discrepancies
    assert found.bookie is not None and found.bookie.event["x-reply"] == "fenced"
    (bookie,) = refused_by
    assert (
        bookie in (2, 3)
        and f"the writer counted bookie {bookie}'s answer 'fenced' to its add of entry 4" in found.reason
    )
    assert main(["cross-check", str(edited), str(served)]) == 1
    assert f"{found.client.where}: the writer counted" in capsys.readouterr().out


def test_a_reply_no_bookie_sent_is_named(run: tuple[Path, Path], tmp_path: Path) -> None:
    client, served = run

    def invent_a_reply(lines: list[dict[str, Any]]) -> None:
        first = next(line for line in lines if line["type"] == "BookieReceivesAdd")
        invented = json.loads(json.dumps(first))
        invented["params"]["m"]["entry"] = 9
        lines.insert(lines.index(first) + 1, invented)
        for seq, line in enumerate(lines, 1):
            line["seq"] = seq

    (result,) = cross_check_paths(_edited(client, tmp_path, invent_a_reply), served)
    (found,) = result.discrepancies
    assert found.bookie is None and "took bookie 1's answer to AddReq (entry 9" in found.reason
    assert found.reason.endswith("which bookie 1 never served") and result.matched == result.replies - 1


def test_input_that_cannot_be_read_or_paired_is_named(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, served = run
    broken = _edited(client, tmp_path, lambda lines: None)
    text = (broken / "trace.ndjson").read_bytes().splitlines()
    (broken / "trace.ndjson").write_bytes(b"\n".join([*text[:3], b"{not json", *text[3:]]) + b"\n")
    assert main(["cross-check", str(broken), str(served)]) == 2
    assert f"{broken / 'trace.ndjson'}:4: not JSON" in capsys.readouterr().err
    assert main(["cross-check", str(served), str(client)]) == 2
    assert "traces in mode bookies, where the client mode's are expected" in capsys.readouterr().err
    assert main(["cross-check", str(tmp_path / "missing"), str(served)]) == 2
    assert f"{tmp_path / 'missing'}: no such file" in capsys.readouterr().err


# -- the two logs merged into one trace ------------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _checked(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["check", str(directory), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_two_logs_merge_by_their_stamps_into_one_trace_that_conforms(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every event of both logs, in the order of their stamps; each reply the client took is ClientReceivesReply;
    checked with replies in flight, the trace conforms, each step decided (one candidate state)."""
    client, served = run
    client_lines, served_lines = _lines(client / "trace.ndjson"), _lines(served / "run.ndjson")
    (merged,) = merge_paths(client, served, tmp_path / "merged")
    lines = _lines(tmp_path / "merged" / MERGED_FILE)
    assert len(lines) == len(client_lines) + len(served_lines) == len(merged.lines)
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert [line["time"] for line in lines] == sorted(line["time"] for line in lines)
    taken = [line for line in client_lines if line["type"].startswith("BookieReceives")]
    assert merged.replies == len(taken) == sum(1 for line in lines if line["type"] == "ClientReceivesReply") > 20
    replies = [line["params"]["p"] for line in lines if line["type"] == "ClientReceivesReply"]
    assert [p.get("type") for p in replies if p["entry"] == -1] == ["FenceResp"] * 3  # a recovery's fencing reads
    assert all("type" not in p for p in replies if p["entry"] >= 0)  # an add's or a read's answer is searched for
    assert merged.constants["RepliesInFlight"] == 1
    code, verdict = _checked(tmp_path / "merged", capsys)
    assert code == 0 and verdict["mode"] == "merged" and verdict["conforms"] == 1
    assert verdict["coverage"]["hidden_steps"] == 0
    assert verdict["coverage"]["actions"]["ClientReceivesReply"]["steps"] == merged.replies
    assert main(["merge", str(client), str(served), "--out", str(tmp_path / "again")]) == 0
    assert f"check it with: ledgerspec check {tmp_path / 'again'}" in " ".join(capsys.readouterr().out.split())


def test_a_refusal_taken_as_an_acknowledgement_leaves_the_merged_trace(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The edited log of the cross-check above, merged: the bookie's step sends a refusal, and the client's step
    that takes it cannot leave the writer WRITING with one more ack."""
    client, served = run
    refused_by: list[int] = []
    edited = _edited(client, tmp_path, _ack_the_refusal(refused_by))
    merge_paths(edited, served, tmp_path / "merged")
    code, verdict = _checked(tmp_path / "merged", capsys)
    (violation,) = verdict["violations"]
    assert code == 1 and verdict["conforms"] == 0
    bad = _lines(tmp_path / "merged" / MERGED_FILE)[violation["line"] - 1]
    assert bad["type"] == "ClientReceivesReply" and bad["params"]["p"]["entry"] == 4
    assert bad["params"]["p"]["bookie"] == refused_by[0]
    assert violation["reason"].startswith(f"after ClientReceivesReply(p=AddFenced(c0 b{refused_by[0]} e4)): observed")
    assert f"(writer_acks has [4,{refused_by[0]}] only in the observation)" in violation["reason"]


def test_logs_not_stamped_by_one_clock_are_refused_with_where(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, served = run

    def unstamp_line_3(lines: list[dict[str, Any]]) -> None:
        del lines[2]["time"]

    unstamped = _edited(client, tmp_path / "a", unstamp_line_3)
    with pytest.raises(LogMergeError, match=rf"{unstamped / 'trace.ndjson'}:3: no time stamp"):
        merge_paths(unstamped, served, tmp_path / "out")

    def step_back(lines: list[dict[str, Any]]) -> None:
        lines[4]["time"] = lines[3]["time"] - 1.0

    stepped_back = _edited(client, tmp_path / "b", step_back)
    assert main(["merge", str(stepped_back), str(served), "--out", str(tmp_path / "out")]) == 2
    assert f"{stepped_back / 'trace.ndjson'}:5: its time" in capsys.readouterr().err
    assert not (tmp_path / "out" / MERGED_FILE).exists()


@pytest.mark.parametrize("scenario", list(CLIENT_SCENARIOS))
def test_each_scenario_of_the_reference_client_merged_with_the_bookies_log_conforms(
    scenario: str, tmp_path: Path
) -> None:
    """Crashes, a recovery with a bookie down and the explicit LAC among them; every step decided."""
    with ServedBookies(tmp_path / "bookies", 4, trace=tmp_path / "served" / "run.ndjson") as served:
        (recording,) = record_reference_client([scenario], ServedReferenceBookies(served), tmp_path / "client")
    assert recording.status == "conforms"
    (merged,) = merge_paths(tmp_path / "client" / scenario, tmp_path / "served", tmp_path / "merged")
    verdict = check_trace(events_from_json(merged.lines, "merged"), LedgerSpec(**merged.constants), "merged")
    assert verdict.status == "conforms" and verdict.max_candidates == 1, verdict.to_json()
