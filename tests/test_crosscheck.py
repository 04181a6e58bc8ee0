"""A client's own log beside the served bookies' log (``conformance/crosscheck.py``, ``ledgerspec cross-check``):
the reference client recovers an open ledger on traced reference bookies, and the writer's add after the fence is
refused by bookies 2 and 3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.crosscheck import cross_check_paths
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording.reference_client import ServedReferenceBookies, record_reference_client

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
    copy.mkdir()
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


def test_a_refusal_the_writer_counted_as_an_acknowledgement_is_named(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer's log, edited: the refusal of entry 4 (the ledger fenced) it took from bookie 2 or 3 taken as that
    bookie's ack. A fenced writer that goes on counting acks appends past the fence; the bookies' log says what the
    bookie answered."""
    client, served = run
    refused_by = []

    def ack_the_refusal(lines: list[dict[str, Any]]) -> None:
        acks: list[list[int]] = []
        for line in lines:
            acks = line.get("observed", {}).get("writer_acks", acks)
            m = line.get("params", {}).get("m", {})
            if line["type"] == "BookieReceivesAdd" and m.get("entry") == 4 and line["process"] == "writer":
                line["observed"] = {"writer_acks": [*acks, [4, m["bookie"]]]}
                refused_by.append(m["bookie"])
                return
        raise AssertionError("the writer's refused add of entry 4 is not in the trace")

    edited = _edited(client, tmp_path, ack_the_refusal)
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
