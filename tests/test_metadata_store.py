"""The metadata store's rules, checked alike on the in-memory store, the SQLite store and a real ZooKeeper.

Where the embedded stores imitate ZooKeeper (sequential names, child
versions, which watch fires when), the expected values were read off the
real server; running the same test against it keeps them honest.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ledgerspec.reference.metadata import (
    ANY_VERSION,
    BadVersionError,
    EventType,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    WatchEvent,
)
from ledgerspec.reference.metadata.store import MetadataStore, Stat
from metadata_backends import Events, MetadataBackend, settle

CREATED, DELETED, CHANGED, CHILDREN = (
    EventType.CREATED,
    EventType.DELETED,
    EventType.CHANGED,
    EventType.CHILDREN_CHANGED,
)


def stat_of(store: MetadataStore, path: str) -> Stat:
    stat = store.exists(path)
    assert stat is not None, f"{path} does not exist"
    return stat


def test_create_then_get_returns_the_value_at_version_0(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    assert store.create("/a", b"value") == "/a"
    value, stat = store.get("/a")
    assert (value, stat.version, stat.num_children, stat.ephemeral) == (b"value", 0, 0, False)
    assert store.exists("/a") == stat
    assert store.exists("/missing") is None


def test_create_refuses_an_existing_node_and_a_missing_parent(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a", b"first")
    with pytest.raises(NodeExistsError, match="/a already exists"):
        store.create("/a", b"second")
    assert store.get("/a").value == b"first"
    with pytest.raises(NoNodeError, match="/x/y"):
        store.create("/x/y")
    assert store.exists("/x") is None


def test_make_parents_creates_empty_ancestors(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    assert store.create("/p/q/r", b"leaf", make_parents=True) == "/p/q/r"
    assert store.get("/p").value == b""
    assert store.children("/p") == ["q"]
    assert store.get("/p/q/r").value == b"leaf"


def test_set_succeeds_only_at_the_version_read(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a", b"v0")
    assert store.set("/a", b"v1", version=0).version == 1
    with pytest.raises(BadVersionError) as lost:
        store.set("/a", b"stale write", version=0)
    assert (lost.value.path, lost.value.expected, lost.value.actual) == ("/a", 0, 1)
    assert "expected version 0, the node has version 1" in str(lost.value)
    assert store.get("/a")[0] == b"v1"
    assert store.set("/a", b"v2", version=ANY_VERSION).version == 2


def test_compare_and_set_between_two_clients(metadata_backend: MetadataBackend) -> None:
    writer, recoverer = metadata_backend.open(), metadata_backend.open()
    writer.create("/ledger", b"OPEN")
    _, seen_by_writer = writer.get("/ledger")
    _, seen_by_recoverer = recoverer.get("/ledger")
    recoverer.set("/ledger", b"IN_RECOVERY", version=seen_by_recoverer.version)
    with pytest.raises(BadVersionError):
        writer.set("/ledger", b"OPEN, new ensemble", version=seen_by_writer.version)
    assert writer.get("/ledger") == recoverer.get("/ledger")
    assert writer.get("/ledger").value == b"IN_RECOVERY"


def test_delete_checks_the_version_and_the_children(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a/b", make_parents=True)
    store.set("/a/b", b"x", version=0)
    with pytest.raises(BadVersionError):
        store.delete("/a/b", version=0)
    with pytest.raises(NotEmptyError, match="/a"):
        store.delete("/a", version=0)
    store.delete("/a/b", version=1)
    assert store.exists("/a/b") is None
    store.delete("/a", version=ANY_VERSION)
    with pytest.raises(NoNodeError, match="/a"):
        store.delete("/a", version=ANY_VERSION)
    with pytest.raises(NoNodeError):
        store.set("/a", b"", version=ANY_VERSION)
    with pytest.raises(NoNodeError):
        store.get("/a")


def test_children_are_names_in_order(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    for name in ["b", "a", "c10", "c9"]:
        store.create(f"/dir/{name}", make_parents=True)
    assert store.children("/dir") == ["a", "b", "c10", "c9"]
    assert stat_of(store, "/dir").num_children == 4
    with pytest.raises(NoNodeError):
        store.children("/nothing")


def test_sequential_names_count_every_child_ever_created(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/s")
    assert store.create("/s/x-", sequential=True) == "/s/x-0000000000"
    assert stat_of(store, "/s").child_version == 1
    store.create("/s/a")
    store.create("/s/b")
    assert stat_of(store, "/s").child_version == 3
    assert store.create("/s/x-", sequential=True) == "/s/x-0000000003"
    store.delete("/s/a", version=0)
    # A delete bumps the child version but not the sequential counter (ZooKeeper's DataNode).
    assert stat_of(store, "/s").child_version == 5
    assert store.create("/s/x-", sequential=True) == "/s/x-0000000004"
    assert store.create("/s/", sequential=True) == "/s/0000000005"


def test_sequential_create_with_parents_starts_at_zero(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    assert store.create("/ids/gen/ID-", sequential=True, make_parents=True) == "/ids/gen/ID-0000000000"


def test_ephemeral_node_goes_with_its_session(metadata_backend: MetadataBackend) -> None:
    owner, other = metadata_backend.open(), metadata_backend.open()
    owner.create("/locks", b"")
    owner.create("/locks/auditor", b"bookie-1", ephemeral=True)
    stat = other.exists("/locks/auditor")
    assert stat is not None and stat.ephemeral
    assert stat.ephemeral_owner == owner.session_id
    with pytest.raises(NoChildrenForEphemeralsError, match="/locks/auditor"):
        owner.create("/locks/auditor/child")
    gone = Events()
    other.exists("/locks/auditor", watch=gone)
    owner.close()
    assert gone.wait_for(1) == [WatchEvent(DELETED, "/locks/auditor")]
    assert other.children("/locks") == []


def test_get_watch_fires_once_for_the_next_change(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a", b"0")
    events = Events()
    store.get("/a", watch=events)
    store.set("/a", b"1", version=0)
    store.set("/a", b"2", version=1)
    settle(store)
    assert events.events == [WatchEvent(CHANGED, "/a")]


def test_a_change_by_another_client_fires_the_watch(metadata_backend: MetadataBackend) -> None:
    reader, writer = metadata_backend.open(), metadata_backend.open()
    writer.create("/a", b"0")
    events = Events()
    reader.get("/a", watch=events)
    writer.set("/a", b"1", version=0)
    assert events.wait_for(1) == [WatchEvent(CHANGED, "/a")]
    assert reader.get("/a").value == b"1"


def test_exists_watch_on_a_missing_node_fires_on_creation(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    events = Events()
    assert store.exists("/later", watch=events) is None
    store.create("/later")
    store.delete("/later", version=0)
    settle(store)
    assert events.events == [WatchEvent(CREATED, "/later")]


def test_get_on_a_missing_node_sets_no_watch(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    events = Events()
    with pytest.raises(NoNodeError):
        store.get("/later", watch=events)
    with pytest.raises(NoNodeError):
        store.children("/later", watch=events)
    store.create("/later")
    store.create("/later/child")
    settle(store)
    assert events.events == []


def test_children_watch_fires_on_child_creation_not_on_child_data(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/dir")
    store.create("/dir/a")
    events = Events()
    store.children("/dir", watch=events)
    store.set("/dir/a", b"new data", version=0)
    store.set("/dir", b"new data of the parent", version=0)
    settle(store)
    assert events.events == []
    store.create("/dir/b")
    store.create("/dir/c")
    settle(store)
    assert events.events == [WatchEvent(CHILDREN, "/dir")]


def test_one_callback_set_three_ways_fires_once_on_delete(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a")
    events = Events()
    store.get("/a", watch=events)
    store.exists("/a", watch=events)
    store.children("/a", watch=events)
    store.delete("/a", version=0)
    settle(store)
    assert events.events == [WatchEvent(DELETED, "/a")]


def test_data_and_child_watches_of_one_path_fire_apart(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a")
    data, child = Events(), Events()
    store.get("/a", watch=data)
    store.children("/a", watch=child)
    store.create("/a/x")
    settle(store)
    assert (data.events, child.events) == ([], [WatchEvent(CHILDREN, "/a")])
    store.set("/a", b"1", version=0)
    settle(store)
    assert (data.events, child.events) == ([WatchEvent(CHANGED, "/a")], [WatchEvent(CHILDREN, "/a")])


def test_a_watch_set_again_in_its_callback_sees_the_next_change(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a", b"0")
    values: list[bytes] = []
    events = Events()

    def reread(event: WatchEvent) -> None:
        values.append(store.get("/a", watch=reread).value)
        events(event)

    store.get("/a", watch=reread)
    store.set("/a", b"1", version=0)
    events.wait_for(1)
    store.set("/a", b"2", version=1)
    events.wait_for(2)
    assert values == [b"1", b"2"]


def test_persistent_watch_sees_every_change_until_cancelled(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    events = Events()
    handle = store.watch("/p", events)
    steps: list[tuple[Callable[[], object], EventType]] = [
        (lambda: store.create("/p", b"0"), CREATED),
        (lambda: store.set("/p", b"1", version=0), CHANGED),
        (lambda: store.create("/p/child"), CHILDREN),
        (lambda: store.delete("/p/child", version=0), CHILDREN),
        (lambda: store.delete("/p", version=1), DELETED),
        (lambda: store.create("/p", b"again"), CREATED),
    ]
    # One step at a time: over ZooKeeper the watch is re-armed after each event.
    for count, (step, _) in enumerate(steps, start=1):
        step()
        events.wait_for(count)
    store.create("/p/child")
    store.set("/p/child", b"a child's data is not the parent's event", version=0)
    events.wait_for(len(steps) + 1)
    handle.cancel()
    store.set("/p", b"after cancel", version=0)
    settle(store)
    assert events.events == [WatchEvent(kind, "/p") for _, kind in steps] + [WatchEvent(CHILDREN, "/p")]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("a/b", "must start with /"),
        ("/a/", "must not end with /"),
        ("/a//b", "empty node name"),
        ("/a/./b", "relative paths"),
        ("/a/..", "relative paths"),
        ("/a\0b", "null character"),
        ("/a\x07", "invalid character"),
    ],
)
def test_invalid_paths_are_refused_with_the_reason(metadata_backend: MetadataBackend, path: str, reason: str) -> None:
    store = metadata_backend.open()
    with pytest.raises(InvalidPathError, match=reason):
        store.create(path)
    with pytest.raises(InvalidPathError, match=reason):
        store.exists(path)


def test_the_root_cannot_be_deleted(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    with pytest.raises(InvalidPathError, match="root"):
        store.delete("/", version=ANY_VERSION)
    assert store.exists("/") is not None


def test_a_closed_session_refuses_operations(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/a")
    store.close()
    store.close()
    with pytest.raises(SessionClosedError, match="cannot get /a: the metadata store session is closed"):
        store.get("/a")
    with pytest.raises(SessionClosedError):
        store.create("/b")
