"""The SQLite-backed embedded store: what survives a restart, and clear errors for a busy or broken file."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledgerspec.reference.metadata import (
    BadVersionError,
    EmbeddedMetadataStore,
    LedgerMetadata,
    LedgerMetadataStore,
    StoreUnavailableError,
)
from ledgerspec.reference.metadata.node_tables import SQLITE_FILE_NAME


def test_nodes_versions_and_counters_survive_a_restart(tmp_path: Path) -> None:
    with EmbeddedMetadataStore(tmp_path) as store:
        store.create("/a/b", b"persistent", make_parents=True)
        store.set("/a/b", b"updated", version=0)
        store.create("/a/seq-", sequential=True)
        store.create("/a/session-lock", b"mine", ephemeral=True)
        before = store.get("/a/b")
    with EmbeddedMetadataStore(tmp_path) as store:
        assert store.get("/a/b") == before
        assert store.get("/a/b").value == b"updated"
        with pytest.raises(BadVersionError):
            store.set("/a/b", b"stale", version=0)
        # The ephemeral node ended with its session; the counter of /a did not restart.
        assert store.children("/a") == ["b", "seq-0000000001"]
        assert store.create("/a/seq-", sequential=True) == "/a/seq-0000000003"


def test_ledger_metadata_survives_a_restart(tmp_path: Path) -> None:
    metadata = LedgerMetadata(7, 3, 3, 2, [(0, ["bk1:3181", "bk2:3181", "bk3:3181"])])
    with EmbeddedMetadataStore(tmp_path) as store:
        ledgers = LedgerMetadataStore(store)
        created = ledgers.create(metadata)
        ledgers.write(created.metadata.in_recovery(), created.version)
    with EmbeddedMetadataStore(tmp_path) as store:
        ledgers = LedgerMetadataStore(store)
        recovered, version = ledgers.read(7)
        assert (recovered.state.name, version) == ("IN_RECOVERY", 1)
        assert ledgers.ledger_ids() == [7]


def test_sessions_of_one_store_share_the_file(tmp_path: Path) -> None:
    with EmbeddedMetadataStore(tmp_path) as first:
        second = first.open_session()
        second.create("/from-second", b"2")
        assert first.get("/from-second").value == b"2"
        assert second.session_id != first.session_id
        second.close()
        first.create("/after", b"the file stays open while a session is")
    with EmbeddedMetadataStore(tmp_path) as store:
        assert store.children("/") == ["after", "from-second"]


def test_session_ids_are_not_reused_after_a_restart(tmp_path: Path) -> None:
    with EmbeddedMetadataStore(tmp_path) as store:
        first_id = store.session_id
    with EmbeddedMetadataStore(tmp_path) as store:
        assert store.session_id > first_id


def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    with EmbeddedMetadataStore(tmp_path), pytest.raises(StoreUnavailableError, match=f"{SQLITE_FILE_NAME} is in use"):
        EmbeddedMetadataStore(tmp_path)
    with EmbeddedMetadataStore(tmp_path) as store:  # free again once closed
        assert store.children("/") == []


def test_a_file_that_is_not_sqlite_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / SQLITE_FILE_NAME).write_bytes(b"this is not an SQLite database" * 100)
    with pytest.raises(StoreUnavailableError, match=f"{tmp_path / SQLITE_FILE_NAME} is not a readable SQLite file"):
        EmbeddedMetadataStore(tmp_path)
