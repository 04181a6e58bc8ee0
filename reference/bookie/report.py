"""A bookie's files, as read and checked by the bookie-file readers, as one JSON object.

``ledgerspec inspect-bookie --json`` prints it; recordings of real bookies
(:mod:`ledgerspec.tools.recording.real_systems`) store it.
"""

from __future__ import annotations

from typing import Any

from ledgerspec.reference.bookie.disk import BookieFiles, Problem
from ledgerspec.reference.bookie.formats import JournalRecord, RecordKind

__all__ = ["bookie_files_json", "explicit_lac"]


def _record_json(record: JournalRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "offset": record.offset,
        "end": record.end,
        "kind": record.kind.value,
        "ledger": record.ledger_id,
    }
    if record.kind is RecordKind.ENTRY:
        data["entry"] = record.entry_id
    elif record.kind is RecordKind.EXPLICIT_LAC:
        data["lac"] = record.lac
    elif record.kind is RecordKind.LEDGER_KEY:
        data["master_key"] = record.master_key.hex()
    return data


def bookie_files_json(files: BookieFiles, problems: list[Problem], valid: bool) -> dict[str, Any]:
    mark = files.persisted_mark
    return {
        "layout": {"journal_dir": files.layout.journal_dir, "ledger_dirs": list(files.layout.ledger_dirs)},
        "valid": valid,
        "persisted_mark": {"file_id": mark.file_id, "offset": mark.offset},
        "marks": [
            {"path": c.path, "mark": None if c.mark is None else {"file_id": c.mark.file_id, "offset": c.mark.offset}}
            for c in files.marks
        ],
        "journals": [
            {
                "path": j.path,
                "file_id": j.file_id,
                "version": j.version,
                "size": j.size,
                "end": j.end,
                "end_kind": j.end_kind.value,
                "records": [_record_json(r) for r in j.records],
            }
            for j in files.journals
        ],
        "entry_logs": [
            {
                "path": log.path,
                "log_id": log.log_id,
                "version": log.version,
                "size": log.size,
                "end": log.end,
                "torn": log.torn,
                "entries": [
                    {
                        "offset": r.offset,
                        "location": r.location,
                        "ledger": r.ledger_id,
                        "entry": r.entry_id,
                        "size": r.size,
                    }
                    for r in log.records
                ],
            }
            for log in files.entry_logs
        ],
        "indexes": [
            {
                "path": i.path,
                "ledger": i.ledger_id,
                "fenced": i.header.fenced,
                "master_key": i.header.master_key.hex(),
                "explicit_lac": explicit_lac(i.header.explicit_lac),
                "entries": {str(e): loc for e, loc in sorted(i.locations.items())},
                "torn_slot": i.torn_slot,
            }
            for i in files.indexes
        ],
        "leftovers": list(files.leftovers),
        "other_files": list(files.other_files),
        "problems": [
            {"severity": p.severity, "path": p.path, "offset": p.offset, "message": p.message} for p in problems
        ],
    }


def explicit_lac(buffer: bytes | None) -> int | None:
    return None if buffer is None or len(buffer) < 16 else int.from_bytes(buffer[8:16], "big", signed=True)
