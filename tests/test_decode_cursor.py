"""``ledgerspec decode-cursor``: cursor and ledger-list bytes from files and from a real ZooKeeper's znodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledgerspec.reference.managed_ledger import SUBSCRIPTION, TOPIC, CursorRun
from ledgerspec.reference.managed_ledger.message_id import MessageId, MessageIdError
from ledgerspec.reference.metadata.managed_ledger_format import (
    BatchDeletionIndex,
    ManagedCursorInfo,
    MessageRange,
    Position,
    PositionInfo,
    compress,
    encode_managed_cursor_info,
    encode_position_info,
)
from ledgerspec.reference.metadata.managed_ledger_paths import cursor_path, managed_ledger_path
from ledgerspec.tools.cli.main import main
from zookeeper_server import ZooKeeperServer

CURSOR = ManagedCursorInfo(
    -1,
    Position(603, -1),
    (MessageRange(Position(603, 1), Position(603, 3)),),
    batched_deletion=(BatchDeletionIndex(Position(603, 5), (6,)),),
)


def _decode(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object] | str]:
    status = main(["decode-cursor", *args])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if status == 0 else " ".join(captured.err.split())  # unwrapped


def test_a_cursor_znodes_bytes_are_detected_and_decoded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "consumer_002"
    path.write_bytes(encode_managed_cursor_info(CURSOR))
    status, decoded = _decode(capsys, str(path))
    assert status == 0 and decoded == {
        "type": "ManagedCursorInfo",
        "cursorsLedgerId": -1,
        "markDelete": "603:-1",
        "individualDeletedMessages": ["(603:1, 603:3]"],
        "batchedEntryDeletionIndexInfo": [{"position": "603:5", "deleteSet": [6]}],
        "properties": {},
        "lastActive": 0,
    }


def test_a_cursor_ledger_record_is_detected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "record"
    path.write_bytes(encode_position_info(PositionInfo(Position(56, 9))))
    status, decoded = _decode(capsys, str(path))
    assert status == 0 and isinstance(decoded, dict)
    assert (decoded["type"], decoded["markDelete"]) == ("PositionInfo", "56:9")


def test_compressed_bytes_decode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "compressed"
    path.write_bytes(compress(encode_managed_cursor_info(CURSOR), "ZLIB", cursor=True))
    status, decoded = _decode(capsys, str(path), "--type", "cursor-info")
    assert status == 0 and isinstance(decoded, dict) and decoded["markDelete"] == "603:-1"


def test_bad_input_names_the_file_and_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "garbage"
    path.write_bytes(b"\x0a\x05abc")
    status, message = _decode(capsys, str(path))
    assert status == 2 and f"{path} (5 bytes)" in str(message)
    assert "not a cursor-info" in str(message) and "not a ledger-info" in str(message)
    status, message = _decode(capsys, str(tmp_path / "missing"))
    assert status == 2 and "cannot read" in str(message) and "No such file" in str(message)
    path.write_bytes(encode_position_info(PositionInfo(Position(1, 2))))
    status, message = _decode(capsys, str(path), "--type", "cursor-info")
    assert status == 2 and "has no mark-delete position" in str(message)


@pytest.mark.zookeeper
def test_znodes_a_broker_wrote_to_zookeeper_decode(
    zookeeper_server: ZooKeeperServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference managed ledger on a real ZooKeeper: its znodes, read back by the command."""
    from ledgerspec.reference.metadata.zookeeper import ZooKeeperMetadataStore

    with ZooKeeperMetadataStore(zookeeper_server.hosts, chroot="") as store:
        if store.exists(managed_ledger_path(TOPIC)) is not None:
            pytest.skip("another test left this topic on the server")
        run = CursorRun(str(tmp_path), store=store)
        first, second = run.publish(), run.publish()
        assert first is not None and second is not None
        run.ack(second)
        assert not run.close_cursor()
    hosts = zookeeper_server.hosts
    status, decoded = _decode(capsys, "--zookeeper", hosts, cursor_path(TOPIC, SUBSCRIPTION))
    assert status == 0 and isinstance(decoded, dict)
    assert (decoded["type"], decoded["cursorsLedgerId"], decoded["markDelete"]) == ("ManagedCursorInfo", -1, "0:-1")
    assert decoded["individualDeletedMessages"] == ["(0:0, 0:1]"]
    status, decoded = _decode(capsys, "--zookeeper", hosts, managed_ledger_path(TOPIC))
    assert status == 0 and isinstance(decoded, dict) and decoded["type"] == "ManagedLedgerInfo"
    assert [x["ledger_id"] for x in decoded["ledgerInfo"]] == [0, 1]  # rolled over after two entries
    status, message = _decode(capsys, "--zookeeper", hosts, "/managed-ledgers/none/x/persistent/y/sub")
    assert status == 2 and "no znode /managed-ledgers/none/x/persistent/y/sub" in str(message)


# -- message ids ---------------------------------------------------------------------------
def test_message_ids_print_parse_and_order_as_pulsars() -> None:
    batch = MessageId.batch((603, 4), 3, partition=0)
    assert [str(m) for m in batch] == ["603:4:0:0", "603:4:0:1", "603:4:0:2"]
    assert MessageId.parse("603:4:0") == MessageId(603, 4, 0) < batch[0]
    assert sorted([MessageId(604, 0), MessageId(603, 9), batch[2], MessageId(603, 4, 0)]) == [
        MessageId(603, 4, 0),
        batch[2],
        MessageId(603, 9),
        MessageId(604, 0),
    ]
    assert batch[1].position == (603, 4)


@pytest.mark.parametrize(
    ("text", "words"),
    [("603:4", "got 2 part(s)"), ("603:x:0", "entryId 'x' is not an integer"), ("1:2:-3", "below -1")],
)
def test_malformed_message_ids_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(MessageIdError, match=words.replace("(", r"\(").replace(")", r"\)")):
        MessageId.parse(text)
