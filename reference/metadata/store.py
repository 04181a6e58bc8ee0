"""The metadata store interface: a tree of versioned nodes, as ZooKeeper keeps it.

BookKeeper keeps ledger metadata in ZooKeeper (or another store behind the
same ``MetadataStore`` idea) and relies on four of its properties; every
implementation here gives all four, with ZooKeeper's own rules:

- **Nodes and paths.** A node has a path (``/ledgers/00/0000/L0001``), a
  value (bytes) and children; its parent must exist (``make_parents`` creates
  missing ancestors, as ``ZkUtils.asyncCreateFullPathOptimistic`` does).
  Paths are checked as ``org.apache.zookeeper.common.PathUtils.validatePath``
  checks them.
- **Versions and compare-and-set.** A new node has version 0; every ``set``
  adds one. ``set`` and ``delete`` take the version the caller last read and
  fail with :class:`BadVersionError` when the node has moved on
  (:data:`ANY_VERSION` skips the check). This is what makes metadata updates
  safe between a writer and a recovering client.
- **Sequential and ephemeral nodes.** A sequential create appends a 10-digit
  counter to the name: the number of children the parent has ever had
  created (ZooKeeper's ``DataNode`` keeps exactly this count; deletes do not
  lower it). BookKeeper draws ledger ids from it. An ephemeral node belongs
  to the session that created it and disappears when that session closes;
  it cannot have children.
- **Watches.** A watch is a callback for one change.

  * one-shot watches, set by ``get``/``exists``/``children`` with
    ``watch=``, fire at most once and are then gone (ZooKeeper's rule):

    ===============================  ==========================================
    set by                           fires on
    ===============================  ==========================================
    ``get(path, watch=w)``           ``CHANGED`` (set) or ``DELETED``
    ``exists(path, watch=w)``        as ``get`` if the node exists, else
                                     ``CREATED``
    ``children(path, watch=w)``      ``CHILDREN_CHANGED`` (a child created or
                                     deleted) or ``DELETED``
    ===============================  ==========================================

    ``get`` and ``children`` on a missing node raise :class:`NoNodeError` and
    set no watch. The same callback set on one path several times (by
    ``get`` and ``exists``, say) fires once per event.
  * persistent watches, set by ``watch(path, callback)``, fire for every
    event on the path (``CREATED``, ``CHANGED``, ``DELETED``,
    ``CHILDREN_CHANGED``) until cancelled, and survive the node's deletion.
    Over ZooKeeper they are re-armed one-shot watches (the client library
    has no persistent watches), so changes that follow each other closely
    may come as one event: a callback must read the current state rather
    than count events.
  * ``DISCONNECTED`` (ZooKeeper only) says the connection to the server was
    lost: the watch that receives it is gone, persistent or not; re-read and
    watch again.

  Embedded stores call watches on the thread that made the change, after the
  change and before the call that made it returns; the callbacks may use the
  store. ZooKeeper calls them on the client library's event thread, later.

What this interface leaves out: ACLs, multi-operation transactions,
recursive watches, TTL and container nodes; the ledger layer needs none of
them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import NamedTuple, Protocol

import attrs

__all__ = [
    "ANY_VERSION",
    "BadVersionError",
    "EventType",
    "InvalidPathError",
    "MetadataStore",
    "MetadataStoreError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionClosedError",
    "Stat",
    "StoreUnavailableError",
    "Versioned",
    "WatchEvent",
    "WatchHandle",
    "Watcher",
    "parent_path",
    "validate_path",
]

ANY_VERSION = -1
"""Pass as ``version`` to ``set`` or ``delete`` to skip the version check (ZooKeeper's -1)."""


class EventType(enum.Enum):
    """What happened to a watched node."""

    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILDREN_CHANGED = "children_changed"
    DISCONNECTED = "disconnected"


@attrs.frozen
class WatchEvent:
    """One change seen by a watch: its kind and the path of the watched node."""

    type: EventType
    path: str


Watcher = Callable[[WatchEvent], None]


class WatchHandle(Protocol):
    """A persistent watch, as returned by :meth:`MetadataStore.watch`."""

    def cancel(self) -> None:
        """Stop the watch: no event comes after this returns, except on ZooKeeper one already being delivered."""
        ...


@attrs.frozen
class Stat:
    """A node's bookkeeping, as ZooKeeper's ``Stat`` reports it."""

    version: int  # 0 at creation, +1 on every set
    child_version: int  # +1 on every child created or deleted (ZooKeeper's cversion)
    num_children: int
    ephemeral_owner: int  # session id of the owner of an ephemeral node, 0 for a persistent one
    created_ms: int  # creation time, milliseconds since the epoch
    modified_ms: int  # time of the last set (the creation time until then)

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


class Versioned(NamedTuple):
    """A node's value and its stat, read together. ``value, stat = store.get(path)``."""

    value: bytes
    stat: Stat

    @property
    def version(self) -> int:
        """The version to pass back to ``set`` or ``delete``."""
        return self.stat.version


class MetadataStoreError(Exception):
    """An operation on the metadata store failed; ``path`` names the node."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class NoNodeError(MetadataStoreError):
    """The node (or, for ``create``, its parent) does not exist."""

    def __init__(self, path: str, message: str | None = None) -> None:
        super().__init__(message or f"no node at {path}", path)


class NodeExistsError(MetadataStoreError):
    """``create`` found a node at the path already."""

    def __init__(self, path: str, message: str | None = None) -> None:
        super().__init__(message or f"node {path} already exists", path)


class BadVersionError(MetadataStoreError):
    """A compare-and-set lost: the node's version is not the one the caller read."""

    def __init__(self, path: str, expected: int, actual: int | None) -> None:
        found = "a newer version" if actual is None else f"version {actual}"
        super().__init__(f"version conflict on {path}: expected version {expected}, the node has {found}", path)
        self.expected = expected
        self.actual = actual


class NotEmptyError(MetadataStoreError):
    """``delete`` of a node that still has children."""

    def __init__(self, path: str) -> None:
        super().__init__(f"cannot delete {path}: it has children", path)


class NoChildrenForEphemeralsError(MetadataStoreError):
    """``create`` under an ephemeral node."""

    def __init__(self, path: str, parent: str) -> None:
        super().__init__(f"cannot create {path}: its parent {parent} is ephemeral", path)


class InvalidPathError(MetadataStoreError, ValueError):
    """A path ZooKeeper would refuse."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid path {path!r}: {reason}", path)


class SessionClosedError(MetadataStoreError):
    """An operation on a store (session) that was closed."""

    def __init__(self, operation: str, path: str) -> None:
        super().__init__(f"cannot {operation} {path}: the metadata store session is closed", path)


class StoreUnavailableError(MetadataStoreError):
    """The store cannot be reached or opened (no ZooKeeper server, data directory in use, ...)."""


class MetadataStore(Protocol):
    """A session on a tree of versioned nodes; see the module documentation for the rules."""

    @property
    def session_id(self) -> int:
        """This session's id: the ``ephemeral_owner`` of the ephemeral nodes it creates."""
        ...

    def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node and return its path (with the counter appended if ``sequential``).

        Raises :class:`NodeExistsError`, :class:`NoNodeError` (no parent and
        not ``make_parents``) or :class:`NoChildrenForEphemeralsError`.
        """
        ...

    def get(self, path: str, *, watch: Watcher | None = None) -> Versioned:
        """The node's value and stat; raises :class:`NoNodeError`."""
        ...

    def set(self, path: str, value: bytes, *, version: int) -> Stat:
        """Replace the value if the node is at ``version``; return the new stat.

        Raises :class:`BadVersionError` or :class:`NoNodeError`.
        """
        ...

    def delete(self, path: str, *, version: int) -> None:
        """Delete the node if it is at ``version``.

        Raises :class:`BadVersionError`, :class:`NoNodeError` or :class:`NotEmptyError`.
        """
        ...

    def exists(self, path: str, *, watch: Watcher | None = None) -> Stat | None:
        """The node's stat, or None; the watch is set either way."""
        ...

    def children(self, path: str, *, watch: Watcher | None = None) -> list[str]:
        """Names (not paths) of the node's children, sorted; raises :class:`NoNodeError`."""
        ...

    def watch(self, path: str, callback: Watcher) -> WatchHandle:
        """A persistent watch on ``path`` (which need not exist yet)."""
        ...

    def close(self) -> None:
        """End the session: its ephemeral nodes go, its watches stop. Closing twice is allowed."""
        ...


def _invalid_character(code: int) -> bool:
    # PathUtils.validatePath works on UTF-16 code units: control characters,
    # the surrogates (every character beyond the BMP), the private use area
    # and U+FFF0..U+FFFF are refused.
    return 0 < code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF or code >= 0xFFF0


def validate_path(path: str, *, sequential: bool = False) -> None:
    """Refuse a path as ZooKeeper's ``PathUtils.validatePath`` does, with its reasons.

    A sequential create may end in ``/`` (the counter becomes the last name).
    """
    checked = path + "1" if sequential else path
    if not checked:
        raise InvalidPathError(path, "the path is empty")
    if checked[0] != "/":
        raise InvalidPathError(path, "a path must start with /")
    if checked == "/":
        return
    if checked.endswith("/"):
        raise InvalidPathError(path, "a path must not end with /")
    for index, name in enumerate(checked[1:].split("/")):
        if not name:
            raise InvalidPathError(path, f"empty node name (name {index + 1})")
        if name in (".", ".."):
            raise InvalidPathError(path, f"relative paths are not allowed (name {index + 1} is {name!r})")
        for char in name:
            if char == "\0":
                raise InvalidPathError(path, "null character not allowed")
            if _invalid_character(ord(char)):
                raise InvalidPathError(path, f"invalid character {char!r} (U+{ord(char):04X})")


def parent_path(path: str) -> str:
    """The parent of a (valid, non-root) path: ``/a/b`` -> ``/a``, ``/a`` -> ``/``."""
    parent = path.rsplit("/", 1)[0]
    return parent or "/"
