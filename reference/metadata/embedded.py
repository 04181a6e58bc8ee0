"""The embedded metadata store: ZooKeeper's rules in-process, in memory or in SQLite.

``EmbeddedMetadataStore()`` keeps its nodes in memory;
``EmbeddedMetadataStore(data_dir)`` keeps them in an SQLite file in
``data_dir`` (see ``node_tables.py``) and finds them there again after a
restart. Either way the rules are ZooKeeper's, as ``store.py`` states them,
and the tests run one suite against these stores and a real ZooKeeper.

Each store object is one session. :meth:`EmbeddedMetadataStore.open_session`
opens another on the same nodes, as a second ZooKeeper client would: it sees
the same nodes, its watches fire on the first session's changes, its
ephemeral nodes go when it closes. Sessions may be used from several
threads; one lock serializes all operations on the nodes, and watches are
called with that lock held, on the thread that made the change (a callback
may use the store, but must not wait for another thread that does). A
callback that raises is logged and the others still run, as ZooKeeper's
client does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs
from ledgerspec.reference.metadata.node_tables import InMemoryNodeTable, NodeRecord, NodeTable, SqliteNodeTable
from ledgerspec.reference.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    EventType,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    Stat,
    Versioned,
    Watcher,
    WatchEvent,
    parent_path,
    validate_path,
)

__all__ = ["Clock", "EmbeddedMetadataStore"]

_log = logging.getLogger(__name__)

Clock = Callable[[], int]
"""Milliseconds since the epoch; node creation and modification times come from it."""


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _int32(value: int) -> int:
    # ZooKeeper keeps the child counter in a Java int: it wraps.
    return (value + 2**31) % 2**32 - 2**31


@attrs.define(eq=False)
class _PersistentWatch:
    """A persistent watch; ``cancel`` takes it out of its session's table."""

    tree: _SharedTree
    session_id: int
    path: str
    callback: Watcher

    cancelled: bool = False

    def cancel(self) -> None:
        with self.tree.lock:
            self.cancelled = True
            session = self.tree.sessions.get(self.session_id)
            if session is not None:
                watches = session.persistent.get(self.path, [])
                if self in watches:
                    watches.remove(self)


@attrs.define
class _SessionWatches:
    """The watches one session has set. Dicts keyed by callback keep order and drop repeats."""

    data: dict[str, dict[Watcher, None]] = attrs.Factory(dict)  # get, and exists (also on a missing node)
    child: dict[str, dict[Watcher, None]] = attrs.Factory(dict)  # children
    persistent: dict[str, list[_PersistentWatch]] = attrs.Factory(dict)


class _SharedTree:
    """The nodes, the open sessions and their watches: what sessions of one store share."""

    def __init__(self, table: NodeTable, clock: Clock) -> None:
        self.lock = threading.RLock()
        self.table = table
        self.clock = clock
        self.sessions: dict[int, _SessionWatches] = {}

    def open_session(self) -> int:
        with self.lock:
            session_id = self.table.new_session_id()
            self.sessions[session_id] = _SessionWatches()
            return session_id

    def close_session(self, session_id: int) -> None:
        with self.lock:
            del self.sessions[session_id]
            ephemeral = self.table.ephemeral_paths(session_id)
            with self.table.transaction():  # ZooKeeper's closeSession deletes them in one transaction
                for path in ephemeral:
                    self.table.remove(path)
            for path in ephemeral:
                self.fire(EventType.DELETED, path)
                self.fire(EventType.CHILDREN_CHANGED, parent_path(path))
            if not self.sessions:
                self.table.close()

    def stat(self, record: NodeRecord) -> Stat:
        num_children = self.table.count_children(record.path)
        return Stat(
            version=record.version,
            # ZooKeeper's DataNode.copyStat reports creates + deletes this way.
            child_version=_int32(record.creations * 2 - num_children),
            num_children=num_children,
            ephemeral_owner=record.ephemeral_owner,
            created_ms=record.created_ms,
            modified_ms=record.modified_ms,
        )

    def fire(self, kind: EventType, path: str) -> None:
        """Deliver one event to every session's watches on ``path``; one-shot watches are used up."""
        event = WatchEvent(kind, path)
        for session_id, session in list(self.sessions.items()):
            one_shot: dict[Watcher, None] = {}
            if kind in (EventType.CREATED, EventType.CHANGED, EventType.DELETED):
                one_shot.update(session.data.pop(path, {}))
            if kind in (EventType.CHILDREN_CHANGED, EventType.DELETED):
                one_shot.update(session.child.pop(path, {}))
            persistent = [w for w in session.persistent.get(path, []) if w.callback not in one_shot]
            for callback in one_shot:
                if session_id in self.sessions:  # an earlier callback may have closed the session
                    self._call(callback, event)
            for watch in persistent:
                if session_id in self.sessions and not watch.cancelled:
                    self._call(watch.callback, event)

    @staticmethod
    def _call(callback: Watcher, event: WatchEvent) -> None:
        try:
            callback(event)
        except Exception:
            _log.exception("watch callback %r failed on %s", callback, event)


class EmbeddedMetadataStore:
    """A metadata store session in this process; in memory, or in SQLite under ``data_dir``."""

    def __init__(self, data_dir: Path | str | None = None, *, clock: Clock = _wall_clock_ms) -> None:
        now = clock()
        root = NodeRecord("/", b"", 0, 0, 0, now, now)
        table: NodeTable = InMemoryNodeTable(root) if data_dir is None else SqliteNodeTable(Path(data_dir), root)
        self._attach(_SharedTree(table, clock))

    def _attach(self, tree: _SharedTree) -> None:
        self._tree = tree
        self._session_id = tree.open_session()
        self._closed = False

    @property
    def session_id(self) -> int:
        return self._session_id

    def open_session(self) -> EmbeddedMetadataStore:
        """Another session on the same nodes (a second client of the same store)."""
        self._check_open("open a session on", "/")
        other = EmbeddedMetadataStore.__new__(EmbeddedMetadataStore)
        other._attach(self._tree)
        return other

    def __enter__(self) -> EmbeddedMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self, operation: str, path: str) -> None:
        if self._closed:
            raise SessionClosedError(operation, path)

    def _record_at(self, path: str, version: int, operation: str) -> NodeRecord:
        """The node at ``path`` for an operation that expects ``version`` (or any); the tree's lock is held."""
        self._check_open(operation, path)
        record = self._tree.table.get(path)
        if record is None:
            raise NoNodeError(path)
        if version not in (ANY_VERSION, record.version):
            raise BadVersionError(path, version, record.version)
        return record

    def _watches(self) -> _SessionWatches:
        return self._tree.sessions[self._session_id]

    def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        validate_path(path, sequential=sequential)
        tree, table = self._tree, self._tree.table
        with tree.lock:
            self._check_open("create", path)
            parent = parent_path(path + "1" if sequential else path)
            # Every check comes before the first change, so a failed create changes nothing.
            missing: list[str] = []
            ancestor = parent
            while table.get(ancestor) is None:
                if not make_parents:
                    raise NoNodeError(path, f"cannot create {path}: its parent {parent} does not exist")
                missing.append(ancestor)
                ancestor = parent_path(ancestor)
            parent_record = table.get(ancestor)
            assert parent_record is not None
            if parent_record.ephemeral_owner:
                raise NoChildrenForEphemeralsError(path, ancestor)
            now = tree.clock()
            if not missing:
                if sequential:
                    path = f"{path}{_int32(parent_record.creations):010d}"
                if table.get(path) is not None:
                    raise NodeExistsError(path)
            elif sequential:
                path = f"{path}{0:010d}"  # a parent made here has had no children yet
            created = [*reversed(missing), path]
            with table.transaction():
                for node in created:
                    above = table.get(parent_path(node))
                    assert above is not None
                    table.put(attrs.evolve(above, creations=above.creations + 1))
                    owner = self._session_id if ephemeral and node == path else 0
                    table.put(NodeRecord(node, value if node == path else b"", 0, 0, owner, now, now))
            for node in created:
                tree.fire(EventType.CREATED, node)
                tree.fire(EventType.CHILDREN_CHANGED, parent_path(node))
            return path

    def get(self, path: str, *, watch: Watcher | None = None) -> Versioned:
        validate_path(path)
        with self._tree.lock:
            self._check_open("get", path)
            record = self._tree.table.get(path)
            if record is None:
                raise NoNodeError(path)
            if watch is not None:
                self._watches().data.setdefault(path, {})[watch] = None
            return Versioned(record.value, self._tree.stat(record))

    def set(self, path: str, value: bytes, *, version: int) -> Stat:
        validate_path(path)
        tree = self._tree
        with tree.lock:
            record = self._record_at(path, version, "set")
            updated = attrs.evolve(record, value=value, version=_int32(record.version + 1), modified_ms=tree.clock())
            with tree.table.transaction():
                tree.table.put(updated)
            tree.fire(EventType.CHANGED, path)
            return tree.stat(updated)

    def delete(self, path: str, *, version: int) -> None:
        validate_path(path)
        if path == "/":
            raise InvalidPathError(path, "the root cannot be deleted")
        tree = self._tree
        with tree.lock:
            self._record_at(path, version, "delete")
            if tree.table.count_children(path):
                raise NotEmptyError(path)
            with tree.table.transaction():
                tree.table.remove(path)
            tree.fire(EventType.DELETED, path)
            tree.fire(EventType.CHILDREN_CHANGED, parent_path(path))

    def exists(self, path: str, *, watch: Watcher | None = None) -> Stat | None:
        validate_path(path)
        with self._tree.lock:
            self._check_open("check", path)
            record = self._tree.table.get(path)
            if watch is not None:
                self._watches().data.setdefault(path, {})[watch] = None
            return None if record is None else self._tree.stat(record)

    def children(self, path: str, *, watch: Watcher | None = None) -> list[str]:
        validate_path(path)
        with self._tree.lock:
            self._check_open("list the children of", path)
            if self._tree.table.get(path) is None:
                raise NoNodeError(path)
            if watch is not None:
                self._watches().child.setdefault(path, {})[watch] = None
            return self._tree.table.child_names(path)

    def watch(self, path: str, callback: Watcher) -> _PersistentWatch:
        validate_path(path)
        with self._tree.lock:
            self._check_open("watch", path)
            handle = _PersistentWatch(self._tree, self._session_id, path, callback)
            self._watches().persistent.setdefault(path, []).append(handle)
            return handle

    def close(self) -> None:
        with self._tree.lock:
            if self._closed:
                return
            self._closed = True
            self._tree.close_session(self._session_id)
