"""A bookie directory read whole: every journal, lastMark copy, entry log and index, and checks across them.

This is the reader the ``inspect-bookie`` command and the crash checks use.
It depends on the file formats (:mod:`.formats`, :mod:`.entry`) and the
layout, not on the bookie engine, so it reads directories written by the
reference bookie and by Apache BookKeeper alike (for BookKeeper, with the
interleaved/sorted ledger storage: entry logs and ``.idx`` index files;
DbLedgerStorage keeps its index in RocksDB, which is not read here).

:func:`read_bookie_files` parses each file on its own and collects the
files that cannot be parsed as errors instead of stopping at the first;
:func:`check_bookie_files` then checks what the files say about each other:
the lastMark against the journals, the index against the entry logs, the
digests of every entry, and that nothing the lastMark covers is missing
from the ledger storage.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import attrs
from ledgerspec.reference.bookie.entry import DigestType, EntryFormatError, decode_entry, decode_lac, detect_digest
from ledgerspec.reference.bookie.errors import BookieFileError
from ledgerspec.reference.bookie.files import FileSystem, OsFileSystem
from ledgerspec.reference.bookie.formats import (
    EntryLogScan,
    IndexFile,
    JournalScan,
    LogMark,
    RecordKind,
    parse_index,
    parse_mark,
    scan_entry_log,
    scan_journal,
    split_location,
)
from ledgerspec.reference.bookie.layout import (
    ENTRY_LOG_SUFFIX,
    INDEX_SUFFIX,
    JOURNAL_SUFFIX,
    LAST_MARK_NAME,
    TEMP_SUFFIX,
    BookieLayout,
    parse_file_id,
)

__all__ = [
    "BookieFiles",
    "MarkCopy",
    "Problem",
    "check_bookie_files",
    "find_index_directories",
    "find_index_files",
    "find_leftovers",
    "list_file_ids",
    "read_bookie_files",
    "read_mark_copies",
]


@attrs.frozen
class MarkCopy:
    """One ledger directory's ``lastMark`` file."""

    path: str
    mark: LogMark | None  # None when the file cannot be read
    error: BookieFileError | None = None


def list_file_ids(fs: FileSystem, directory: str, suffix: str) -> list[int]:
    """The ids of the ``<hex><suffix>`` files in ``directory``, sorted (``Journal.listJournalIds``)."""
    if not fs.is_dir(directory):
        return []
    return sorted(parse_file_id(directory, n, suffix) for n in fs.list_dir(directory) if n.endswith(suffix))


def find_index_files(fs: FileSystem, ledger_dir: str) -> Iterator[tuple[int, str]]:
    """``(ledger id, path)`` of every ``.idx`` file two directory levels under ``ledger_dir``."""
    if not fs.is_dir(ledger_dir):
        return
    for grandparent in fs.list_dir(ledger_dir):
        first = os.path.join(ledger_dir, grandparent)
        if not fs.is_dir(first):
            continue
        for parent in fs.list_dir(first):
            second = os.path.join(first, parent)
            if not fs.is_dir(second):
                continue
            for name in fs.list_dir(second):
                if name.endswith(INDEX_SUFFIX):
                    yield parse_file_id(second, name, INDEX_SUFFIX), os.path.join(second, name)


def find_index_directories(fs: FileSystem, ledger_dir: str) -> list[str]:
    """The directories under ``ledger_dir`` that hold index files (and their parents), sorted."""
    found = []
    for first in _subdirs(fs, ledger_dir):
        found.append(first)
        found += _subdirs(fs, first)
    return sorted(found)


def find_leftovers(fs: FileSystem, layout: BookieLayout) -> list[str]:
    """``.tmp`` files a crash left behind while a file was being created (see :mod:`.layout`)."""
    directories = [layout.journal_dir]
    for ledger_dir in layout.ledger_dirs:
        directories.append(ledger_dir)
        for first in _subdirs(fs, ledger_dir):
            directories += _subdirs(fs, first)  # index files live two levels down
    return sorted(
        os.path.join(d, name)
        for d in directories
        if fs.is_dir(d)
        for name in fs.list_dir(d)
        if name.endswith(TEMP_SUFFIX) and not fs.is_dir(os.path.join(d, name))
    )


def _subdirs(fs: FileSystem, directory: str) -> list[str]:
    if not fs.is_dir(directory):
        return []
    return [p for p in (os.path.join(directory, n) for n in fs.list_dir(directory)) if fs.is_dir(p)]


def read_mark_copies(fs: FileSystem, layout: BookieLayout) -> list[MarkCopy]:
    """The ``lastMark`` files that exist, each parsed or with its error."""
    copies = []
    for path in layout.last_mark_paths():
        if not fs.exists(path):
            continue
        try:
            copies.append(MarkCopy(path, parse_mark(path, fs.read_file(path))))
        except BookieFileError as exc:
            copies.append(MarkCopy(path, None, exc))
    return copies


@attrs.frozen
class BookieFiles:
    """Everything in a bookie directory, parsed file by file."""

    layout: BookieLayout
    journals: tuple[JournalScan, ...]  # by file id
    marks: tuple[MarkCopy, ...]  # the lastMark copies that exist
    entry_logs: tuple[EntryLogScan, ...]  # by log id
    indexes: tuple[IndexFile, ...]  # by ledger id
    leftovers: tuple[str, ...]  # .tmp files left by a crash
    other_files: tuple[str, ...]  # files that are none of the above (BookKeeper's VERSION, lastId, ...)
    errors: tuple[BookieFileError, ...]  # files that could not be parsed

    @property
    def persisted_mark(self) -> LogMark:
        """The maximum over the readable lastMark copies, as ``LastLogMark.readLog`` takes it."""
        return max((c.mark for c in self.marks if c.mark is not None), default=LogMark(0, 0))

    def journal(self, file_id: int) -> JournalScan | None:
        return next((j for j in self.journals if j.file_id == file_id), None)

    def entry_log(self, log_id: int) -> EntryLogScan | None:
        return next((e for e in self.entry_logs if e.log_id == log_id), None)

    def index(self, ledger_id: int) -> IndexFile | None:
        return next((i for i in self.indexes if i.ledger_id == ledger_id), None)

    def spec_position(self, mark: LogMark) -> tuple[int, int]:
        """``(file id, records before the offset)``: a mark as the bookie spec counts journal positions.

        Only records the spec knows are counted (entries, fences, explicit
        LACs; not ledger keys or padding). A mark into a journal that is not
        here counts 0 records.
        """
        journal = self.journal(mark.file_id)
        if journal is None:
            return mark.file_id, 0
        return mark.file_id, sum(1 for offset, _ in journal.spec_records() if offset < mark.offset)


def read_bookie_files(layout: BookieLayout, fs: FileSystem | None = None) -> BookieFiles:
    """Read and parse every file of a bookie; a file that cannot be parsed becomes an entry of ``errors``."""
    fs = fs or OsFileSystem()
    errors: list[BookieFileError] = []
    other: list[str] = []
    journals = []
    for file_id, path in _listed(fs, layout.journal_dir, JOURNAL_SUFFIX, errors, other):
        try:
            journals.append(scan_journal(path, fs.read_file(path), file_id))
        except BookieFileError as exc:
            errors.append(exc)
    entry_logs = []
    indexes: dict[int, IndexFile] = {}
    for ledger_dir in layout.ledger_dirs:
        for log_id, path in _listed(fs, ledger_dir, ENTRY_LOG_SUFFIX, errors, other, skip=(LAST_MARK_NAME,)):
            try:
                entry_logs.append(scan_entry_log(path, fs.read_file(path), log_id))
            except BookieFileError as exc:
                errors.append(exc)
        try:
            found = list(find_index_files(fs, ledger_dir))
        except BookieFileError as exc:
            errors.append(exc)
            found = []
        for ledger_id, path in found:
            try:
                index = parse_index(path, fs.read_file(path), ledger_id)
            except BookieFileError as exc:
                errors.append(exc)
                continue
            if ledger_id in indexes:
                errors.append(
                    BookieFileError(path, None, f"second index of ledger {ledger_id}, after {indexes[ledger_id].path}")
                )
            else:
                indexes[ledger_id] = index
    return BookieFiles(
        layout,
        tuple(sorted(journals, key=lambda j: j.file_id)),
        tuple(read_mark_copies(fs, layout)),
        tuple(sorted(entry_logs, key=lambda e: e.log_id)),
        tuple(indexes[i] for i in sorted(indexes)),
        tuple(find_leftovers(fs, layout)),
        tuple(other),
        tuple(errors),
    )


def _listed(
    fs: FileSystem,
    directory: str,
    suffix: str,
    errors: list[BookieFileError],
    other: list[str],
    skip: tuple[str, ...] = (),
) -> Iterator[tuple[int, str]]:
    if not fs.is_dir(directory):
        return
    for name in fs.list_dir(directory):
        path = os.path.join(directory, name)
        if name.endswith(suffix):
            try:
                yield parse_file_id(directory, name, suffix), path
            except BookieFileError as exc:
                errors.append(exc)
        elif not fs.is_dir(path) and not name.endswith(TEMP_SUFFIX) and name not in skip:
            other.append(path)


@attrs.frozen
class Problem:
    """Something wrong across the files of a bookie directory."""

    severity: str  # "error": the directory is invalid; "warning": worth knowing, not invalid
    path: str
    offset: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path} at offset {self.offset}" if self.offset is not None else self.path
        return f"{self.severity}: {where}: {self.message}"


def check_bookie_files(files: BookieFiles, digest_type: DigestType | None = None) -> list[Problem]:
    """What is wrong with a bookie directory: errors make it invalid, warnings do not.

    ``digest_type`` is the digest of the entries; ``None`` accepts, entry by
    entry, whichever of CRC32C and CRC32 matches.
    """
    problems = [Problem("error", e.path, e.offset, e.problem) for e in files.errors]
    problems += [Problem("error", c.path, None, c.error.problem) for c in files.marks if c.error is not None]
    problems += [
        Problem("warning", p, None, "temporary file left by a crash while it was being created")
        for p in files.leftovers
    ]
    problems += _check_mark(files)
    problems += _check_digests(files, digest_type)
    problems += _check_index(files)
    problems += _check_mark_covers_storage(files)
    return problems


def _check_mark(files: BookieFiles) -> list[Problem]:
    """The persisted mark must point into a journal that exists, at a record boundary (or into its torn tail).

    BookKeeper's replay leaves the mark at the read position where the scan
    stopped: the end of the file after a torn record, or 4 bytes into the
    zeros after a zero length. A mark in that unreadable tail is accepted.
    """
    mark = files.persisted_mark
    if mark.file_id == 0:
        return []
    journal = files.journal(mark.file_id)
    name = f"{mark.file_id:x}{JOURNAL_SUFFIX}"
    where = files.marks[0].path if files.marks else files.layout.journal_dir
    if journal is None:
        if any(os.path.basename(e.path) == name for e in files.errors):
            return []  # the journal is there but unreadable: already reported
        return [Problem("error", where, None, f"lastMark {mark} points into journal {name}, which is missing")]
    if mark.offset > journal.size:
        message = f"lastMark {mark} points past the end of {journal.path} ({journal.size} bytes)"
        return [Problem("error", where, None, message)]
    if mark.offset != 0 and mark.offset < journal.end and mark.offset not in journal.boundaries:
        return [Problem("error", where, None, f"lastMark {mark} points inside a record of {journal.path}")]
    return []


def _check_digests(files: BookieFiles, digest_type: DigestType | None) -> list[Problem]:
    problems = []
    for journal in files.journals:
        for record in journal.records:
            error = None
            if record.kind is RecordKind.ENTRY:
                error = _entry_digest_error(record.data, digest_type)
            elif record.kind is RecordKind.EXPLICIT_LAC:
                try:
                    decode_lac(record.lac_buffer, digest_type)
                except EntryFormatError as exc:
                    error = str(exc)
            if error is not None:
                problems.append(Problem("error", journal.path, record.offset, error))
    for log in files.entry_logs:
        for entry in log.records:
            error = _entry_digest_error(entry.entry, digest_type)
            if error is not None:
                problems.append(Problem("error", log.path, entry.offset, error))
    for index in files.indexes:
        if index.header.explicit_lac is not None:
            try:
                lac_ledger, _ = decode_lac(index.header.explicit_lac, digest_type)
            except EntryFormatError as exc:
                problems.append(Problem("error", index.path, None, f"explicit LAC in the header: {exc}"))
                continue
            if lac_ledger != index.ledger_id:
                problems.append(
                    Problem(
                        "error",
                        index.path,
                        None,
                        f"explicit LAC of ledger {lac_ledger} in the index of ledger {index.ledger_id}",
                    )
                )
    return problems


def _entry_digest_error(data: bytes, digest_type: DigestType | None) -> str | None:
    if digest_type is None:
        if detect_digest(data) is not None:
            return None
        return "digest mismatch: the entry matches neither a CRC32C nor a CRC32 digest"
    try:
        decode_entry(data, digest_type)
    except EntryFormatError as exc:
        return str(exc)
    return None


def _check_index(files: BookieFiles) -> list[Problem]:
    problems = []
    logs = {log.log_id: log for log in files.entry_logs}
    starts = {(log.log_id, r.offset): r for log in files.entry_logs for r in log.records}
    unreadable = {os.path.basename(e.path) for e in files.errors}
    for index in files.indexes:
        for entry_id, location in sorted(index.locations.items()):
            log_id, offset = split_location(location)
            what = f"index of ledger {index.ledger_id} entry {entry_id} points to location {location:#x}"
            log = logs.get(log_id)
            if log is None:
                if f"{log_id:x}{ENTRY_LOG_SUFFIX}" not in unreadable:
                    problems.append(
                        Problem("error", index.path, None, f"{what} in entry log {log_id:x}.log, which is missing")
                    )
                continue
            record = starts.get((log_id, offset))
            if offset >= log.end:
                problems.append(
                    Problem(
                        "error",
                        index.path,
                        None,
                        f"{what}: offset {offset} is past the end of the entries of {log.path} ({log.end})",
                    )
                )
            elif record is None:
                problems.append(
                    Problem("error", index.path, None, f"{what}: no entry starts at offset {offset} of {log.path}")
                )
            elif (record.ledger_id, record.entry_id) != (index.ledger_id, entry_id):
                problems.append(
                    Problem(
                        "error",
                        index.path,
                        None,
                        f"{what}, where {log.path} holds ledger {record.ledger_id} entry {record.entry_id}",
                    )
                )
    return problems


def _check_mark_covers_storage(files: BookieFiles) -> list[Problem]:
    """Every journal record before the lastMark must be in the ledger storage: the mark promises it."""
    mark = files.persisted_mark
    problems = []
    indexes = {i.ledger_id: i for i in files.indexes}
    for journal in files.journals:
        if (journal.file_id, 0) >= (mark.file_id, mark.offset):
            break
        for record in journal.records:
            if LogMark(journal.file_id, record.offset) >= mark or record.kind is RecordKind.LEDGER_KEY:
                continue
            index = indexes.get(record.ledger_id)
            what = f"{record.kind.label} record of ledger {record.ledger_id}"
            if index is None:
                problems.append(
                    Problem(
                        "warning",
                        journal.path,
                        record.offset,
                        f"{what} is before the lastMark but the ledger has no index (deleted since?)",
                    )
                )
            elif record.kind is RecordKind.ENTRY and record.entry_id not in index.locations:
                problems.append(
                    Problem(
                        "error",
                        journal.path,
                        record.offset,
                        f"entry {record.entry_id} of ledger "
                        f"{record.ledger_id} is before the lastMark but not in the index",
                    )
                )
            elif record.kind is RecordKind.FENCE and not index.header.fenced:
                problems.append(
                    Problem(
                        "error",
                        journal.path,
                        record.offset,
                        f"{what} is before the lastMark but the index does not say fenced",
                    )
                )
            elif record.kind is RecordKind.EXPLICIT_LAC and index.header.explicit_lac is None:
                problems.append(
                    Problem(
                        "error",
                        journal.path,
                        record.offset,
                        f"{what} is before the lastMark but the index has no explicit LAC",
                    )
                )
    return problems
