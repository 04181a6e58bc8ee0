"""The metadata store implementations the shared tests run against, and helpers to watch them.

Watches over ZooKeeper arrive on kazoo's event thread, later than the change
that caused them. ``settle`` waits until every event a session is due has
arrived: it makes a change of its own with a watch on it and waits for that
event, which the server sends to the session after every earlier one.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from ledgerspec.reference.metadata import ANY_VERSION, EmbeddedMetadataStore, MetadataStore
from ledgerspec.reference.metadata.zookeeper import ZooKeeperMetadataStore

__all__ = ["BACKEND_PARAMS", "Events", "MetadataBackend", "settle"]

BACKEND_PARAMS = ["memory", "sqlite", pytest.param("zookeeper", marks=pytest.mark.zookeeper)]
WAIT_SECONDS = 10.0


class MetadataBackend:
    """One test's store: sessions on the same nodes, closed at the end of the test."""

    def __init__(self, kind: str, data_dir: Path, zookeeper_hosts: str | None) -> None:
        self.kind = kind
        self.data_dir = data_dir
        self.hosts = zookeeper_hosts
        self.chroot = ""
        if kind == "zookeeper":
            assert zookeeper_hosts is not None
            # A fresh chroot per test: each test sees an empty tree.
            self.chroot = f"/test-{uuid.uuid4().hex}"
            admin = KazooClient(hosts=zookeeper_hosts)
            admin.start(timeout=WAIT_SECONDS)
            admin.create(self.chroot)
            admin.stop()
            admin.close()
        self.sessions: list[MetadataStore] = []

    def open(self) -> MetadataStore:
        """A new session: the first opens the store, the others join it as further clients."""
        session: MetadataStore
        if self.kind == "zookeeper":
            assert self.hosts is not None
            session = ZooKeeperMetadataStore(self.hosts, chroot=self.chroot)
        elif self.sessions and isinstance(first := self.sessions[0], EmbeddedMetadataStore):
            session = first.open_session()
        else:
            session = EmbeddedMetadataStore(self.data_dir if self.kind == "sqlite" else None)
        self.sessions.append(session)
        return session

    def close(self) -> None:
        for session in reversed(self.sessions):
            session.close()


class Events:
    """A watch callback (or listener) that records what it gets and lets a test wait for it."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self._changed = threading.Condition()

    def __call__(self, event: object) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(self, count: int) -> list[object]:
        """The events once there are ``count`` of them; fails the test after a timeout."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.events) >= count, timeout=WAIT_SECONDS):
                pytest.fail(f"expected {count} watch events within {WAIT_SECONDS} s, got {self.events}")
            return list(self.events)


_barriers = itertools.count()


def settle(store: MetadataStore) -> None:
    """Return once ``store``'s session has received every watch event due for changes made so far."""
    path = f"/settle-{next(_barriers)}"
    barrier = Events()
    store.exists(path, watch=barrier)
    store.create(path)
    barrier.wait_for(1)
    store.delete(path, version=ANY_VERSION)
