"""The reference bookie: BookKeeper's bookie storage in files, driven one explicit step at a time.

Modules, each with one job:

- :mod:`.entry`: the entry layout and its digests (the client's ``DigestManager``);
- :mod:`.formats`: the file formats as bytes (journal, entry log, index, lastMark);
- :mod:`.layout`: where the files go in a bookie directory;
- :mod:`.disk`: a bookie directory read whole and checked, independent of the engine;
- :mod:`.files`: the file layer every byte goes through; :mod:`.faults`: the crashing one;
- :mod:`.journal`, :mod:`.storage`: the journal writer and the ledger storage;
- :mod:`.bookie`: the bookie's steps; :mod:`.runner`: threads driving them;
- :mod:`.report`: a bookie directory's reading as JSON (``ledgerspec inspect-bookie``).

Its check against the bookie spec, as every subsystem keeps one beside it:

- :mod:`.abstraction`: the bookie's files and memory as a state of the bookie spec;
- :mod:`.refinement`: a bookie driven step by step and checked against the spec after every step, crashes
  included;
- :mod:`.workloads`: the scripted runs the crash checks sweep; :mod:`.trace`: those runs as traces of the
  bookie spec, in both observation modes.
"""

from ledgerspec.reference.bookie.bookie import (
    LAST_ADD_CONFIRMED,
    MUTANTS,
    Bookie,
    BookieConfig,
    MemoryState,
    Request,
    RequestKind,
)
from ledgerspec.reference.bookie.disk import BookieFiles, Problem, check_bookie_files, read_bookie_files
from ledgerspec.reference.bookie.entry import DigestType, encode_entry, encode_lac
from ledgerspec.reference.bookie.errors import (
    BadEntryError,
    BookieError,
    BookieFileError,
    BookieRequestError,
    BookieStateError,
    CorruptFileError,
    LedgerFencedError,
    MissingFileError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedError,
    UnexpectedFileError,
)
from ledgerspec.reference.bookie.faults import FaultyFileSystem, FsEvent, SimulatedCrash
from ledgerspec.reference.bookie.files import FileHandle, FileSystem, OsFileSystem, default_scratch
from ledgerspec.reference.bookie.formats import LogMark
from ledgerspec.reference.bookie.layout import BookieLayout

__all__ = [
    "LAST_ADD_CONFIRMED",
    "MUTANTS",
    "BadEntryError",
    "Bookie",
    "BookieConfig",
    "BookieError",
    "BookieFileError",
    "BookieFiles",
    "BookieLayout",
    "BookieRequestError",
    "BookieStateError",
    "CorruptFileError",
    "DigestType",
    "FaultyFileSystem",
    "FileHandle",
    "FileSystem",
    "FsEvent",
    "LedgerFencedError",
    "LogMark",
    "MemoryState",
    "MissingFileError",
    "NoSuchEntryError",
    "NoSuchLedgerError",
    "OsFileSystem",
    "Problem",
    "Request",
    "RequestKind",
    "SimulatedCrash",
    "UnauthorizedError",
    "UnexpectedFileError",
    "check_bookie_files",
    "default_scratch",
    "encode_entry",
    "encode_lac",
    "read_bookie_files",
]
