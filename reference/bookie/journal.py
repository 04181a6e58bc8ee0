"""The journal's writing side: records buffered, written with padding in one write, fsynced in batches.

Group commit as ``Journal.run`` and its ``ForceWriteThread`` do it, in steps
the caller drives:

1. :meth:`JournalWriter.append` buffers a record in memory, with the
   request that waits for it (if any);
2. :meth:`JournalWriter.flush` pads the buffer to the alignment and writes
   it to the OS in one write: a :class:`ForceWriteRequest` carries the
   waiters and the position the fsync will make durable;
3. :meth:`JournalWriter.sync` fsyncs the request's file (each file once per
   batch); the caller then advances the mark and acknowledges the waiters.

A new journal file is created whole (header written, fsynced, renamed into
place, directory fsynced) before any record goes into it, so a crash never
leaves a journal file without a complete header; BookKeeper creates the file
and then writes its header. This module decides nothing about when to flush,
sync or roll over: the bookie and its runner do.
"""

from __future__ import annotations

import struct
from typing import Generic, TypeVar

import attrs
from ledgerspec.reference.bookie.files import FileHandle, FileSystem
from ledgerspec.reference.bookie.formats import JOURNAL_VERSION, LogMark, journal_header, padding_record
from ledgerspec.reference.bookie.layout import BookieLayout

__all__ = ["ForceWriteRequest", "JournalFile", "JournalWriter"]

W = TypeVar("W")  # what waits for a record: the bookie's request type
_LENGTH = struct.Struct(">i")  # a record's length prefix


@attrs.define(eq=False)
class JournalFile:
    """The journal file being written."""

    file_id: int
    handle: FileHandle
    written: int  # bytes written to the OS (header and flushed records)
    records: int = 0  # records the bookie spec counts (entries, fences, explicit LACs) in this file


@attrs.define(eq=False)
class ForceWriteRequest(Generic[W]):
    """One flushed batch waiting for its fsync (``Journal.ForceWriteRequest``)."""

    file: JournalFile
    position: int  # end of the batch: the mark once it is fsynced
    waiters: list[W]  # requests acknowledged after the fsync

    @property
    def mark(self) -> LogMark:
        return LogMark(self.file.file_id, self.position)


class JournalWriter(Generic[W]):
    """Appends records to the current journal file and fsyncs them in batches."""

    def __init__(self, fs: FileSystem, layout: BookieLayout, alignment: int, version: int = JOURNAL_VERSION) -> None:
        self._fs = fs
        self._layout = layout
        self.alignment = alignment
        self.version = version
        self.current: JournalFile | None = None
        self._chunks: list[bytes] = []  # records buffered in memory, written by the next flush
        self._buffered = 0  # their bytes
        self.buffered_waiters: list[W] = []  # requests whose records are in the buffer
        self.buffered_records: list[tuple[str, int, int]] = []  # spec records in the buffer

    def open_file(self, file_id: int) -> JournalFile:
        """Create journal file ``file_id`` with its header, durably, and write into it from now on."""
        header = journal_header(self.version)
        handle = self._fs.create_durably(self._layout.journal_path(file_id), header)
        self.current = JournalFile(file_id, handle, len(header))
        return self.current

    def append(self, record: bytes, spec_record: tuple[str, int, int] | None, waiter: W | None) -> None:
        """Buffer one framed record; ``spec_record`` is how the bookie spec names it (None: not a spec record)."""
        self._chunks.append(record)
        self._buffered += len(record)
        if spec_record is not None:
            self.buffered_records.append(spec_record)
        if waiter is not None:
            self.buffered_waiters.append(waiter)

    def append_entry(self, entry: bytes, ledger_id: int, entry_id: int, waiter: W) -> None:
        """Buffer an entry record (:func:`~.formats.entry_record`) without building it first: the hot path."""
        self._chunks += (_LENGTH.pack(len(entry)), entry)
        self._buffered += 4 + len(entry)
        self.buffered_records.append(("entry", ledger_id, entry_id))
        self.buffered_waiters.append(waiter)

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    def flush(self) -> ForceWriteRequest[W] | None:
        """Write the buffer, padded to the alignment, to the OS in one write; ``None`` if nothing is buffered."""
        if not self._chunks and not self.buffered_waiters:
            return None
        current = self._require_file()
        if self._chunks:
            if self.version >= 5:
                self._chunks.append(padding_record(current.written + self._buffered, self.alignment))
            data = b"".join(self._chunks)
            current.handle.write(current.written, data)
            current.written += len(data)
            current.records += len(self.buffered_records)
        request = ForceWriteRequest(current, current.written, self.buffered_waiters)
        self._chunks, self._buffered = [], 0
        self.buffered_waiters = []
        self.buffered_records = []
        return request

    @staticmethod
    def sync(request: ForceWriteRequest[W]) -> None:
        """Fsync the request's file; safe while another thread writes further batches to it."""
        request.file.handle.fsync()

    def _require_file(self) -> JournalFile:
        if self.current is None:
            raise RuntimeError("no journal file is open")
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.handle.close()
            self.current = None
