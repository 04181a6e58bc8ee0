"""The metadata store on a real ZooKeeper server, through the kazoo client.

A thin adapter: ZooKeeper already has the rules ``store.py`` states, so this
module translates calls and errors and nothing more, except for watches:

- kazoo keeps a path's data and child watchers in two lists and calls a
  callback found in both twice for one ``DELETED`` event; ZooKeeper's Java
  client calls it once. This adapter keeps its own one-shot watch tables
  with the Java client's rules (``ZKWatchManager.materialize``) and gives
  kazoo a single dispatcher per path.
- kazoo has no persistent watches (ZooKeeper 3.6's ``addWatch``), so
  :meth:`ZooKeeperMetadataStore.watch` re-arms one-shot watches after each
  event. Changes that come while it re-arms are seen as one event.
- When the connection drops, kazoo forgets every watch; the adapter tells
  each one with a ``DISCONNECTED`` event.

``chroot`` roots the store at a node of the server (it must exist), as
BookKeeper's ``zkServers`` setting ``host:port/chroot`` does; paths and
events are then relative to it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Iterator

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError as KazooBadVersionError
from kazoo.exceptions import KazooException
from kazoo.exceptions import NoChildrenForEphemeralsError as KazooNoChildrenForEphemeralsError
from kazoo.exceptions import NodeExistsError as KazooNodeExistsError
from kazoo.exceptions import NoNodeError as KazooNoNodeError
from kazoo.exceptions import NotEmptyError as KazooNotEmptyError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KazooEventType
from kazoo.protocol.states import WatchedEvent, ZnodeStat
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
    StoreUnavailableError,
    Versioned,
    Watcher,
    WatchEvent,
    parent_path,
    validate_path,
)

__all__ = ["ZooKeeperMetadataStore"]

_log = logging.getLogger(__name__)

_EVENT_TYPES = {
    KazooEventType.CREATED: EventType.CREATED,
    KazooEventType.DELETED: EventType.DELETED,
    KazooEventType.CHANGED: EventType.CHANGED,
    KazooEventType.CHILD: EventType.CHILDREN_CHANGED,
}


def _call_watcher(callback: Watcher, event: WatchEvent) -> None:
    try:
        callback(event)
    except Exception:
        _log.exception("watch callback %r failed on %s", callback, event)


def _stat(stat: ZnodeStat) -> Stat:
    return Stat(
        version=stat.version,
        child_version=stat.cversion,
        num_children=stat.numChildren,
        ephemeral_owner=stat.ephemeralOwner,
        created_ms=stat.ctime,
        modified_ms=stat.mtime,
    )


class _SeenEvents:
    """Recognizes the second delivery of one kazoo event object.

    kazoo hands the same ``WatchedEvent`` object to every watcher of the path
    it found for one server event, one after the other.
    """

    def __init__(self) -> None:
        self._recent: collections.deque[WatchedEvent] = collections.deque(maxlen=16)

    def first_time(self, event: WatchedEvent) -> bool:
        if any(seen is event for seen in self._recent):
            return False
        self._recent.append(event)
        return True


class _PersistentZkWatch:
    """A persistent watch made of one-shot watches re-armed after each event."""

    def __init__(self, store: ZooKeeperMetadataStore, path: str, callback: Watcher) -> None:
        self._store = store
        self._path = path
        self._callback = callback
        self._seen = _SeenEvents()
        self._active = True

    def cancel(self) -> None:
        # kazoo cannot remove a watch from the server; the next event finds it inactive and stops.
        self._active = False

    def arm(self) -> None:
        client = self._store.client
        if client.exists(self._path, watch=self._on_node) is not None:
            with contextlib.suppress(KazooNoNodeError):  # deleted meanwhile: the exists watch reports it
                client.get_children(self._path, watch=self._on_children)

    def _on_node(self, event: WatchedEvent) -> None:
        self._handle(event)

    def _on_children(self, event: WatchedEvent) -> None:
        self._handle(event)

    def _handle(self, event: WatchedEvent) -> None:
        if not self._active or self._store.closed or not self._seen.first_time(event):
            return
        if event.type == KazooEventType.NONE:
            self._active = False
            _call_watcher(self._callback, WatchEvent(EventType.DISCONNECTED, self._path))
            return
        try:
            if event.type == KazooEventType.CHILD:
                self._store.client.get_children(self._path, watch=self._on_children)
            elif event.type == KazooEventType.DELETED:
                self._store.client.exists(self._path, watch=self._on_node)
            else:
                self.arm()
        except KazooNoNodeError:
            pass  # the node went while re-arming: the exists watch set by arm reports it
        except KazooException:
            self._active = False
            _call_watcher(self._callback, WatchEvent(EventType.DISCONNECTED, self._path))
            return
        _call_watcher(self._callback, WatchEvent(_EVENT_TYPES[event.type], self._path))


class ZooKeeperMetadataStore:
    """A metadata store session on a ZooKeeper server (``hosts`` as ``host:port[,host:port...]``)."""

    def __init__(self, hosts: str, *, chroot: str = "", timeout: float = 10.0) -> None:
        if chroot:
            validate_path(chroot)
        self.hosts = hosts
        self.chroot = chroot
        self.closed = False
        self.client = KazooClient(hosts=hosts + chroot, timeout=timeout)
        self._lock = threading.Lock()
        self._data_watchers: dict[str, dict[Watcher, None]] = {}
        self._child_watchers: dict[str, dict[Watcher, None]] = {}
        self._seen = _SeenEvents()
        try:
            self.client.start(timeout=timeout)
        except KazooTimeoutError as exc:
            self.client.stop()
            self.client.close()
            raise StoreUnavailableError(f"no ZooKeeper server answered at {hosts} within {timeout:g} s", "/") from exc
        if chroot and self.client.exists("/") is None:
            self.close()
            raise NoNodeError(chroot, f"the chroot {chroot} does not exist on the ZooKeeper server at {hosts}")

    @property
    def session_id(self) -> int:
        session_id: int = self.client.client_id[0]
        return session_id

    def __enter__(self) -> ZooKeeperMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _call(self, operation: str, path: str, version: int = ANY_VERSION) -> Iterator[None]:
        if self.closed:
            raise SessionClosedError(operation, path)
        try:
            yield
        except KazooNoNodeError as exc:
            if operation == "create":
                raise NoNodeError(path, f"cannot create {path}: its parent does not exist") from exc
            raise NoNodeError(path) from exc
        except KazooNodeExistsError as exc:
            raise NodeExistsError(path) from exc
        except KazooBadVersionError as exc:
            raise BadVersionError(path, version, self._current_version(path)) from exc
        except KazooNotEmptyError as exc:
            raise NotEmptyError(path) from exc
        except KazooNoChildrenForEphemeralsError as exc:
            raise NoChildrenForEphemeralsError(path, parent_path(path)) from exc
        except (KazooException, KazooTimeoutError) as exc:
            reason = type(exc).__name__ + (f": {exc}" if str(exc) else "")
            raise StoreUnavailableError(
                f"cannot {operation} {path} on ZooKeeper at {self.hosts}: {reason}", path
            ) from exc

    def _current_version(self, path: str) -> int | None:
        """The version found just after a lost compare-and-set, for the error message."""
        try:
            stat = self.client.exists(path)
        except KazooException:
            return None
        return None if stat is None else int(stat.version)

    def _dispatch(self, event: WatchedEvent) -> None:
        """kazoo's one watcher for every one-shot watch set through this store."""
        if self.closed or not self._seen.first_time(event):
            return
        fired: list[tuple[Watcher, WatchEvent]] = []
        with self._lock:
            if event.type == KazooEventType.NONE:  # connection lost: kazoo dropped every watch
                for table in (self._data_watchers, self._child_watchers):
                    for path, callbacks in table.items():
                        fired += [(callback, WatchEvent(EventType.DISCONNECTED, path)) for callback in callbacks]
                    table.clear()
            else:
                due: dict[Watcher, None] = {}
                if event.type in (KazooEventType.CREATED, KazooEventType.CHANGED, KazooEventType.DELETED):
                    due.update(self._data_watchers.pop(event.path, {}))
                if event.type in (KazooEventType.CHILD, KazooEventType.DELETED):
                    due.update(self._child_watchers.pop(event.path, {}))
                fired = [(callback, WatchEvent(_EVENT_TYPES[event.type], event.path)) for callback in due]
        for callback, watch_event in fired:
            _call_watcher(callback, watch_event)

    def _arm(self, table: dict[str, dict[Watcher, None]], path: str, watch: Watcher | None) -> bool:
        """Enter the watch before the request, so that no event can come before it; True if it is new."""
        if watch is None:
            return False
        with self._lock:
            callbacks = table.setdefault(path, {})
            if watch in callbacks:
                return False
            callbacks[watch] = None
            return True

    def _disarm(self, table: dict[str, dict[Watcher, None]], path: str, watch: Watcher) -> None:
        """Take back a watch entered by ``_arm``: get and children set none on a missing node."""
        with self._lock:
            callbacks = table.get(path, {})
            callbacks.pop(watch, None)
            if not callbacks:
                table.pop(path, None)

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
        with self._call("create", path):
            created: str = self.client.create(
                path, value, ephemeral=ephemeral, sequence=sequential, makepath=make_parents
            )
            return created

    def get(self, path: str, *, watch: Watcher | None = None) -> Versioned:
        validate_path(path)
        armed = self._arm(self._data_watchers, path, watch)
        try:
            with self._call("get", path):
                value, stat = self.client.get(path, watch=None if watch is None else self._dispatch)
        except NoNodeError:
            if armed and watch is not None:
                self._disarm(self._data_watchers, path, watch)
            raise
        return Versioned(value, _stat(stat))

    def set(self, path: str, value: bytes, *, version: int) -> Stat:
        validate_path(path)
        with self._call("set", path, version):
            return _stat(self.client.set(path, value, version=version))

    def delete(self, path: str, *, version: int) -> None:
        validate_path(path)
        if path == "/":
            raise InvalidPathError(path, "the root cannot be deleted")
        with self._call("delete", path, version):
            self.client.delete(path, version=version)

    def exists(self, path: str, *, watch: Watcher | None = None) -> Stat | None:
        validate_path(path)
        self._arm(self._data_watchers, path, watch)
        with self._call("check", path):
            stat = self.client.exists(path, watch=None if watch is None else self._dispatch)
        return None if stat is None else _stat(stat)

    def children(self, path: str, *, watch: Watcher | None = None) -> list[str]:
        validate_path(path)
        armed = self._arm(self._child_watchers, path, watch)
        try:
            with self._call("list the children of", path):
                names: list[str] = self.client.get_children(path, watch=None if watch is None else self._dispatch)
        except NoNodeError:
            if armed and watch is not None:
                self._disarm(self._child_watchers, path, watch)
            raise
        return sorted(names)

    def watch(self, path: str, callback: Watcher) -> _PersistentZkWatch:
        validate_path(path)
        handle = _PersistentZkWatch(self, path, callback)
        with self._call("watch", path):
            handle.arm()
        return handle

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.client.stop()
        finally:
            self.client.close()
