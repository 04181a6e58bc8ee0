"""Where the embedded store keeps its nodes: in memory, or in an SQLite file.

A node table stores node records and answers lookups; it knows nothing of
ZooKeeper's rules (versions, sequential names, watches), which live in
``embedded.py`` and are the same for both tables. Every change the embedded
store makes for one operation runs inside one :meth:`NodeTable.transaction`,
so the SQLite table commits it whole, with an fsync, or not at all.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import attrs
from ledgerspec.reference.metadata.store import StoreUnavailableError, parent_path

__all__ = ["SQLITE_FILE_NAME", "InMemoryNodeTable", "NodeRecord", "NodeTable", "SqliteNodeTable"]

SQLITE_FILE_NAME = "metadata.sqlite3"
_SCHEMA_VERSION = 1


@attrs.frozen
class NodeRecord:
    """One node as stored."""

    path: str
    value: bytes
    version: int  # 0 at creation, +1 on every set
    creations: int  # children ever created under this node: the sequential-name counter
    ephemeral_owner: int  # owning session id, 0 for a persistent node
    created_ms: int
    modified_ms: int


class NodeTable(Protocol):
    """Storage of node records, keyed by path. The root ``/`` always exists."""

    def get(self, path: str) -> NodeRecord | None: ...

    def child_names(self, path: str) -> list[str]:
        """Names of the children of ``path``, sorted."""
        ...

    def count_children(self, path: str) -> int: ...

    def put(self, record: NodeRecord) -> None:
        """Insert the record, or replace the one at its path."""
        ...

    def remove(self, path: str) -> None: ...

    def ephemeral_paths(self, owner: int) -> list[str]:
        """Paths of the ephemeral nodes of session ``owner``, sorted."""
        ...

    def new_session_id(self) -> int:
        """A session id never handed out before by this table (ids start at 1)."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def close(self) -> None: ...


class InMemoryNodeTable:
    """Nodes in a dict; gone when the process ends."""

    def __init__(self, root: NodeRecord) -> None:
        self._nodes: dict[str, NodeRecord] = {"/": root}
        self._children: dict[str, set[str]] = {"/": set()}
        self._last_session_id = 0

    def get(self, path: str) -> NodeRecord | None:
        return self._nodes.get(path)

    def child_names(self, path: str) -> list[str]:
        return sorted(self._children.get(path, ()))

    def count_children(self, path: str) -> int:
        return len(self._children.get(path, ()))

    def put(self, record: NodeRecord) -> None:
        if record.path not in self._nodes and record.path != "/":
            self._children[parent_path(record.path)].add(record.path.rsplit("/", 1)[1])
            self._children[record.path] = set()
        self._nodes[record.path] = record

    def remove(self, path: str) -> None:
        del self._nodes[path]
        del self._children[path]
        self._children[parent_path(path)].discard(path.rsplit("/", 1)[1])

    def ephemeral_paths(self, owner: int) -> list[str]:
        return sorted(path for path, record in self._nodes.items() if record.ephemeral_owner == owner)

    def new_session_id(self) -> int:
        self._last_session_id += 1
        return self._last_session_id

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        # The embedded store checks every precondition before it changes
        # anything, under its lock: there is nothing to roll back.
        yield

    def close(self) -> None:
        self._nodes.clear()
        self._children.clear()


class SqliteNodeTable:
    """Nodes in ``<data_dir>/metadata.sqlite3``; they survive the process.

    The file is opened in SQLite's exclusive locking mode, so one process at a
    time owns a data directory; a second opener gets
    :class:`StoreUnavailableError`. Every transaction is fsynced before it
    returns (``synchronous=FULL`` with a write-ahead log). Ephemeral nodes of
    sessions that ended with an earlier process are deleted on open, as
    ZooKeeper deletes them when the session expires.
    """

    def __init__(self, data_dir: Path, root: NodeRecord) -> None:
        self.file = data_dir / SQLITE_FILE_NAME
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.file, timeout=0, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailableError(f"cannot open the metadata store {self.file}: {exc}", "/") from exc
        try:
            self._open(root)
        except sqlite3.OperationalError as exc:
            self._db.close()
            if "locked" in str(exc):
                raise StoreUnavailableError(
                    f"the metadata store {self.file} is in use by another store or process", "/"
                ) from exc
            raise StoreUnavailableError(f"cannot open the metadata store {self.file}: {exc}", "/") from exc
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreUnavailableError(
                f"the metadata store {self.file} is not a readable SQLite file: {exc}", "/"
            ) from exc

    def _open(self, root: NodeRecord) -> None:
        db = self._db
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        with self.transaction():
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            db.execute(
                "CREATE TABLE IF NOT EXISTS znodes ("
                " path TEXT PRIMARY KEY, parent TEXT NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL,"
                " creations INTEGER NOT NULL, ephemeral_owner INTEGER NOT NULL,"
                " created_ms INTEGER NOT NULL, modified_ms INTEGER NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS znodes_by_parent ON znodes (parent)")
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (_SCHEMA_VERSION,))
            db.execute("INSERT OR IGNORE INTO meta VALUES ('last_session_id', 0)")
            (schema,) = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if schema != _SCHEMA_VERSION:
                raise StoreUnavailableError(
                    f"the metadata store {self.file} has schema version {schema}; this code reads {_SCHEMA_VERSION}",
                    "/",
                )
            if self.get("/") is None:
                self.put(root)
            # Sessions of an earlier process are over: their ephemeral nodes go.
            # Ephemeral nodes have no children, so no order is needed.
            db.execute("DELETE FROM znodes WHERE ephemeral_owner != 0")

    def get(self, path: str) -> NodeRecord | None:
        row = self._db.execute(
            "SELECT path, value, version, creations, ephemeral_owner, created_ms, modified_ms"
            " FROM znodes WHERE path = ?",
            (path,),
        ).fetchone()
        return None if row is None else NodeRecord(*row)

    def child_names(self, path: str) -> list[str]:
        prefix = 1 if path == "/" else len(path) + 1
        rows = self._db.execute("SELECT path FROM znodes WHERE parent = ?", (path,)).fetchall()
        return sorted(row[0][prefix:] for row in rows)

    def count_children(self, path: str) -> int:
        (count,) = self._db.execute("SELECT COUNT(*) FROM znodes WHERE parent = ?", (path,)).fetchone()
        return int(count)

    def put(self, record: NodeRecord) -> None:
        parent = "" if record.path == "/" else parent_path(record.path)
        self._db.execute(
            "INSERT OR REPLACE INTO znodes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.path,
                parent,
                record.value,
                record.version,
                record.creations,
                record.ephemeral_owner,
                record.created_ms,
                record.modified_ms,
            ),
        )

    def remove(self, path: str) -> None:
        self._db.execute("DELETE FROM znodes WHERE path = ?", (path,))

    def ephemeral_paths(self, owner: int) -> list[str]:
        rows = self._db.execute("SELECT path FROM znodes WHERE ephemeral_owner = ?", (owner,)).fetchall()
        return sorted(row[0] for row in rows)

    def new_session_id(self) -> int:
        with self.transaction():
            self._db.execute("UPDATE meta SET value = value + 1 WHERE key = 'last_session_id'")
            (session_id,) = self._db.execute("SELECT value FROM meta WHERE key = 'last_session_id'").fetchone()
        return int(session_id)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._db.in_transaction:  # nested: the outer transaction commits
            yield
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()
