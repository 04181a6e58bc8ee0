"""``ledgerspec inspect-bookie``: what it shows, its JSON, and the invalid directories it refuses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bookie_support import KEY, entry, lac, started
from ledgerspec.reference.bookie import BookieConfig, FaultyFileSystem, LogMark, SimulatedCrash, read_bookie_files
from ledgerspec.reference.bookie.bookie import WRITE_CACHE
from ledgerspec.reference.bookie.formats import encode_mark
from ledgerspec.reference.bookie.layout import BookieLayout
from ledgerspec.tools.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["inspect-bookie", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def bookie_dir(tmp_path: Path) -> Path:
    """A bookie with ledger 1 (entries 0-2, fenced, explicit LAC 1) checkpointed and ledger 2 (entry 0) after."""
    bookie = started(tmp_path)
    for e in range(3):
        bookie.add_entry(entry(1, e), KEY)
    bookie.fence_ledger(1, KEY)
    bookie.set_explicit_lac(lac(1, 1), KEY)
    bookie.force_write()
    bookie.checkpoint()
    bookie.add_entry(entry(2, 0), KEY)
    bookie.force_write()
    bookie.close()
    return tmp_path


def test_a_valid_directory_is_shown_and_exits_0(
    capsys: pytest.CaptureFixture[str], bookie_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough that no table cell wraps
    code, out, err = run(capsys, str(bookie_dir), "--records")
    text = " ".join(out.split())
    assert code == 0 and err == ""
    assert "lastMark (0x1, 1024)" in text
    assert "1.txn │ 6 │ 1,536 │ 8 │ end of file │ <- at 1024: 6 record(s) before, 2 after" in text
    assert "1024 │ lastMark" in text and "lac 1" in text and "fence" in text
    assert "│ 1 │ ledgers/current/0/1/1.idx │ yes │ 1 │ 0-2 │ entry logs 0 │" in text
    assert out.rstrip().endswith("valid")


def test_json_holds_every_file(capsys: pytest.CaptureFixture[str], bookie_dir: Path) -> None:
    code, out, _ = run(capsys, str(bookie_dir), "--json")
    data = json.loads(out)
    assert code == 0 and data["valid"] is True and data["problems"] == []
    assert data["persisted_mark"] == {"file_id": 1, "offset": 1024}
    assert [m["mark"] for m in data["marks"]] == [{"file_id": 1, "offset": 1024}]
    first = data["journals"][0]
    assert [(r["kind"], r["ledger"], r.get("entry"), r.get("lac")) for r in first["records"]] == [
        ("ledger_key", 1, None, None),
        ("entry", 1, 0, None),
        ("entry", 1, 1, None),
        ("entry", 1, 2, None),
        ("fence", 1, None, None),
        ("lac", 1, None, 1),
        ("ledger_key", 2, None, None),
        ("entry", 2, 0, None),
    ]
    assert [j["file_id"] for j in data["journals"]] == [1]
    (index,) = data["indexes"]
    assert (index["ledger"], index["fenced"], index["explicit_lac"], index["master_key"]) == (1, True, 1, KEY.hex())
    (log,) = data["entry_logs"]
    assert [(e["ledger"], e["entry"]) for e in log["entries"]] == [(1, 0), (1, 1), (1, 2)]
    assert index["entries"] == {str(e["entry"]): e["location"] for e in log["entries"]}


def _problems(capsys: pytest.CaptureFixture[str], directory: Path) -> tuple[int, list[str]]:
    code, out, _ = run(capsys, str(directory), "--json")
    data = json.loads(out)
    return code, [
        f"{p['severity']}: {os.path.basename(p['path'])}@{p['offset']}: {p['message']}" for p in data["problems"]
    ]


def test_an_index_pointing_past_the_entry_log_is_invalid(capsys: pytest.CaptureFixture[str], bookie_dir: Path) -> None:
    log = bookie_dir / "ledgers" / "current" / "0.log"
    size = log.stat().st_size
    with open(log, "r+b") as f:
        f.truncate(size - 10)
    code, problems = _problems(capsys, bookie_dir)
    location = read_bookie_files(BookieLayout.in_data_dir(str(bookie_dir))).index(1).locations[2]  # type: ignore[union-attr]
    assert code == 1
    assert problems == [
        f"error: 1.idx@None: index of ledger 1 entry 2 points to location {location:#x}: offset {location} is past "
        f"the end of the entries of {log} ({location - 4})"
    ]
    code, out, _ = run(capsys, str(bookie_dir))
    assert "invalid: 1 error(s)" in out


def test_a_digest_mismatch_is_invalid(capsys: pytest.CaptureFixture[str], bookie_dir: Path) -> None:
    log = bookie_dir / "ledgers" / "current" / "0.log"
    files = read_bookie_files(BookieLayout.in_data_dir(str(bookie_dir)))
    target = files.entry_logs[0].records[1]
    with open(log, "r+b") as f:
        f.seek(target.offset + target.size - 1)
        f.write(b"!")
    code, problems = _problems(capsys, bookie_dir)
    assert code == 1
    assert problems == [
        f"error: 0.log@{target.offset}: digest mismatch: the entry matches neither a CRC32C nor a CRC32 digest"
    ]
    code, out, _ = run(capsys, str(bookie_dir), "--json", "--digest", "crc32c")
    assert code == 1 and "crc32c digest mismatch for ledger 1 entry 1" in out


def test_a_mark_into_a_missing_journal_is_invalid(capsys: pytest.CaptureFixture[str], bookie_dir: Path) -> None:
    os.unlink(bookie_dir / "journal" / "current" / "1.txn")
    code, problems = _problems(capsys, bookie_dir)
    assert code == 1
    assert problems == ["error: lastMark@None: lastMark (0x1, 1024) points into journal 1.txn, which is missing"]


def test_a_corrupt_journal_is_reported_with_its_offset(capsys: pytest.CaptureFixture[str], bookie_dir: Path) -> None:
    journal = bookie_dir / "journal" / "current" / "1.txn"
    with open(journal, "r+b") as f:
        f.seek(1024)
        f.write((-9).to_bytes(4, "big", signed=True))
    code, problems = _problems(capsys, bookie_dir)
    assert code == 1 and problems[0] == "error: 1.txn@1024: negative record length -9"


def test_a_mark_over_unflushed_data_is_invalid(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path), sync_to_disk=False)
    bookie = started(tmp_path, fs, BookieConfig(mutant="mark_before_flush"))
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.start_checkpoint()
    bookie.persist_mark()
    bookie.start_checkpoint(WRITE_CACHE)  # the entry is still in the write cache
    fs.crash_at = fs.boundaries
    with pytest.raises(SimulatedCrash):
        bookie.flush_ledger_storage(WRITE_CACHE)
    fs.power_loss()
    code, problems = _problems(capsys, tmp_path)
    assert code == 0 and problems == [
        "warning: 1.txn@556: entry record of ledger 1 is before the lastMark but the ledger has no index "
        "(deleted since?)"
    ]
    bookie = started(tmp_path, fs, checkpoint=False)  # the index exists from now on, still without entry 0
    bookie.add_entry(entry(1, 1), KEY)
    bookie.force_write()
    bookie.checkpoint(delete_journals=False)
    code, problems = _problems(capsys, tmp_path)
    assert code == 1 and problems == [
        "error: 1.txn@556: entry 0 of ledger 1 is before the lastMark but not in the index"
    ]


def test_explicit_directories_and_usage_errors(capsys: pytest.CaptureFixture[str], bookie_dir: Path) -> None:
    journal, ledgers = str(bookie_dir / "journal" / "current"), str(bookie_dir / "ledgers" / "current")
    code, out, _ = run(capsys, "--journal-dir", journal, "--ledger-dir", ledgers, "--json")
    assert code == 0 and json.loads(out)["persisted_mark"]["offset"] == 1024
    for argv, message in [
        ([str(bookie_dir / "nope")], "no such directory"),
        ([str(bookie_dir / "ledgers")], "is not a bookie directory: it needs journal/current and ledgers/current"),
        (["--journal-dir", journal], "give either DIR, or --journal-dir with at least one --ledger-dir"),
        ([], "give a bookie directory DIR"),
    ]:
        code, out, err = run(capsys, *argv)
        assert code == 2 and message in " ".join(err.split()) and out == "", argv


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        (600, "lastMark (0x1, 600) points inside a record of"),
        (9000, "lastMark (0x1, 9000) points past the end of"),
        (1536, None),  # the end of the file
        (556, None),  # a record boundary
    ],
)
def test_where_the_mark_may_point(
    capsys: pytest.CaptureFixture[str], bookie_dir: Path, offset: int, message: str | None
) -> None:
    (bookie_dir / "ledgers" / "current" / "lastMark").write_bytes(encode_mark(LogMark(1, offset)))
    _, problems = _problems(capsys, bookie_dir)
    errors = [p for p in problems if p.startswith("error") and "lastMark (" in p]
    assert errors[0].split(": ", 2)[2].startswith(message) if message else errors == [], errors


def test_a_mark_in_the_torn_tail_is_where_bookkeeper_leaves_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fs = FaultyFileSystem(str(tmp_path), sync_to_disk=False)
    bookie = started(tmp_path, fs, checkpoint=False)
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.checkpoint()
    bookie.add_entry(entry(1, 1), KEY)
    bookie.journal_flush()
    journal = bookie.layout.journal_path(1)
    fs.power_loss(torn={journal: 20})
    size = os.path.getsize(journal)
    (tmp_path / "ledgers" / "current" / "lastMark").write_bytes(encode_mark(LogMark(1, size)))  # at EOF, as replay
    code, problems = _problems(capsys, tmp_path)
    assert code == 0 and problems == []
    assert started(tmp_path).read_entry(1, 0) == entry(1, 0)
