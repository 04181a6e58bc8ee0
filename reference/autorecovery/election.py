"""Bookie availability and the auditor's election, through ephemeral znodes of the bookies' sessions.

A bookie is available while its registration ``available/<bookie id>``
lives: the node is ephemeral, so it goes when the bookie's session ends (the
bookie stops, or its session expires). Every bookie that runs an auditor
elector also votes: an ephemeral sequential ``V_`` node under
``auditorelection``; the lowest sequence number wins (``ZkLedgerAuditorManager``).
A vote goes with its session, and the next lowest becomes the auditor.
"""

from __future__ import annotations

import contextlib

from ledgerspec.reference.autorecovery.znodes import VOTE_PREFIX, UnderreplicationPaths, decode_vote, encode_vote
from ledgerspec.reference.metadata.store import MetadataStore, NodeExistsError, NoNodeError

__all__ = ["available_bookies", "current_auditor", "register_bookie", "vote_for_auditor"]


def register_bookie(store: MetadataStore, bookie_id: str, paths: UnderreplicationPaths | None = None) -> None:
    """Register the bookie as available, for as long as ``store``'s session lives."""
    paths = paths or UnderreplicationPaths()
    try:
        store.create(paths.bookie(bookie_id), ephemeral=True, make_parents=True)
    except NodeExistsError:
        raise NodeExistsError(paths.bookie(bookie_id), f"bookie {bookie_id} is registered by another session") from None


def available_bookies(store: MetadataStore, paths: UnderreplicationPaths | None = None) -> set[str]:
    """The bookies registered now (``getAvailableBookies``)."""
    paths = paths or UnderreplicationPaths()
    try:
        return set(store.children(paths.available))
    except NoNodeError:
        return set()


def vote_for_auditor(store: MetadataStore, bookie_id: str, paths: UnderreplicationPaths | None = None) -> str:
    """Cast the bookie's vote in ``store``'s session; the vote's node name."""
    paths = paths or UnderreplicationPaths()
    created = store.create(
        paths.vote(VOTE_PREFIX), encode_vote(bookie_id), ephemeral=True, sequential=True, make_parents=True
    )
    return created.rsplit("/", 1)[-1]


def current_auditor(store: MetadataStore, paths: UnderreplicationPaths | None = None) -> str | None:
    """The bookie whose vote is the lowest, or None when nobody votes."""
    paths = paths or UnderreplicationPaths()
    try:
        votes = store.children(paths.election)
    except NoNodeError:
        return None
    for name in sorted(votes, key=UnderreplicationPaths.vote_number):
        with contextlib.suppress(NoNodeError):  # its session ended while we looked
            data, _ = store.get(paths.vote(name))
            return decode_vote(paths.vote(name), data)
    return None
