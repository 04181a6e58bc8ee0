"""A topic's entries in Pulsar's bytes, and its deduplication across restarts and trims."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from ledgerspec.reference.managed_ledger.entry_format import EntryFormatError, Message, decode_message, encode_message
from ledgerspec.reference.managed_ledger.message_id import MessageId
from ledgerspec.reference.managed_ledger.refinement import TopicRefinement
from ledgerspec.reference.managed_ledger.topic import DEDUP_CURSOR, DUPLICATE
from ledgerspec.reference.managed_ledger.topic_run import TopicRun, TopicRunConfig


# -- entries -----------------------------------------------------------------------------
def test_an_entry_is_metadata_and_payload_behind_a_crc32c() -> None:
    message = Message("producer-1", 7, 1700, b"hello", 3)
    data = encode_message(message)
    # MessageMetadata: producer_name (1), sequence_id (2), publish_time (3), num_messages_in_batch (11)
    metadata = b"\x0a\x0aproducer-1" + b"\x10\x07" + b"\x18\xa4\x0d" + b"\x58\x03"
    body = struct.pack(">I", len(metadata)) + metadata + b"hello"
    assert data == struct.pack(">HI", 0x0E01, crc32c.crc32c(body)) + body
    assert decode_message(data) == message


def test_broker_entry_metadata_in_front_is_skipped() -> None:
    message = Message("p", 1, 2, b"x")
    assert decode_message(struct.pack(">HI", 0x0E02, 2) + b"\x08\x01" + encode_message(message)) == message


@pytest.mark.parametrize(
    ("mangle", "words"),
    [
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC32C mismatch at byte 2"),
        (lambda d: d[:4], "the checksum at byte 2 is cut short"),
        (lambda d: struct.pack(">I", 99) + b"\x0a", "the metadata at byte 4 is 99 bytes long, but 1 follow"),
        (lambda d: struct.pack(">I", 2) + b"\x10\x01", "lacks required fields: producer_name, publish_time"),
    ],
)
def test_a_bad_entry_says_what_and_where(mangle: object, words: str) -> None:
    data = encode_message(Message("producer-1", 1, 2, b"payload"))
    with pytest.raises(EntryFormatError, match=words):
        decode_message(mangle(data))  # type: ignore[operator]


# -- deduplication -------------------------------------------------------------------------
def _publish(run: TopicRun, p: int = 1) -> None:
    run.send(p)
    run.receive(p)
    if run.topic is not None and run.topic.waiting:
        run.complete_add()


def test_a_batch_resent_after_a_crash_is_answered_not_written_again(tmp_path: Path) -> None:
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=10))
    _publish(run)
    run.send(1)
    run.receive(1)
    run.crash_at = "add-ack"
    assert run.complete_add()  # written, never answered
    run.restart()
    assert run.topic is not None and run.topic.highest_pushed == {"producer-1": 1}
    answers: list[list[MessageId]] = []
    run.topic.receive("producer-1", 1, b"m", lambda seq, ids: answers.append(ids))
    assert answers == [[DUPLICATE]] and not run.topic.waiting


def test_the_dedup_snapshot_outlives_a_trim_of_the_ledgers_it_covers(tmp_path: Path) -> None:
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=1, messages=5))
    for _ in range(2):
        _publish(run)
        run.roll_over()
    while run.consume(1):
        pass
    assert run.skip_consumed() and run.trim()
    assert run.ml is not None
    assert run.ml.cursors[DEDUP_CURSOR].properties == {"producer-1": 1}
    run.crash()
    run.restart()
    assert run.topic is not None and run.topic.highest_pushed == {"producer-1": 1}


def test_a_topic_that_forgets_its_dedup_state_writes_a_duplicate(tmp_path: Path) -> None:
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=10, topic_mutant="forget_dedup_on_open"))
    run.send(1)
    run.receive(1)
    run.crash_at = "add-ack"
    assert run.complete_add()
    run.restart()
    run.resend(1)
    run.receive(1)
    assert run.topic is not None and [w.sequence_id for w in run.topic.waiting] == [0]  # written twice


def test_message_ids_carry_the_partition_and_batch_indexes(tmp_path: Path) -> None:
    run = TopicRun(str(tmp_path), TopicRunConfig(batch_size=3, partitioned=True))
    _publish(run)
    assert run.last_id == MessageId(0, 0, 0, 2)


def test_a_reopened_topic_confirms_the_last_entry_written_and_holds_a_cursor_at_its_mark_delete(
    tmp_path: Path,
) -> None:
    """The skip over a consumed ledger moves only the position the managed ledger holds for the subscription
    (maybeUpdateCursorBeforeTrimmingConsumedLedger), not its mark-delete; initializeBookKeeper steps
    lastConfirmedEntry back over the empty ledger dropped, and the open holds the cursor at its restored
    mark-delete again (addCursor)."""
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=1, messages=2))
    check = TopicRefinement(run)
    _publish(run)
    assert run.roll_over() and run.consume(1) and run.persist(1) and run.skip_consumed()
    assert run.ml is not None
    first, dropped = run.ml.ids()
    assert run.subscription(1).mark_delete == (first, 0) and run.ml.positions["sub-1"] == (dropped, -1)
    assert check.state.mark_delete == check.state.persistent_mark_delete == ((1, 0),)
    assert check.state.slowest_position == ((2, -1),)
    run.crash()
    assert check.state.slowest_position == ((-1, -1),)
    run.restart()
    assert run.ml is not None and run.ml.ids()[0] == first and dropped not in run.ml.ids()
    assert run.ml.last_confirmed() == (first, 0) == run.subscription(1).mark_delete == run.ml.positions["sub-1"]
    assert check.state.last_confirmed == (1, 0) and check.state.mark_delete == check.state.slowest_position == ((1, 0),)


def test_an_acknowledgement_not_persisted_before_a_crash_is_lost_and_comes_again(tmp_path: Path) -> None:
    """The mark-delete moves in memory when the consumer acknowledges, and in the durable state when the persist
    completes (persistentMarkDeletePosition); the managed ledger holds the cursor at the persisted one. A crash in
    between loses the acknowledgement: the restored cursor resumes before it."""
    run = TopicRun(str(tmp_path), TopicRunConfig(messages=2, max_entries_per_ledger=10))
    check = TopicRefinement(run)
    _publish(run)
    _publish(run)
    assert run.consume(1) and run.persist(1) and run.consume(1)
    assert run.ml is not None
    (ledger,) = run.ml.ids()
    assert run.subscription(1).mark_delete == (ledger, 1) and run.ml.positions["sub-1"] == (ledger, 0)
    assert check.state.mark_delete == check.state.acknowledged == ((1, 1),)
    assert check.state.persistent_mark_delete == check.state.slowest_position == ((1, 0),)
    run.crash()
    run.restart()
    assert run.subscription(1).mark_delete == (ledger, 0)
    assert check.state.mark_delete == ((1, 0),) and check.state.acknowledged == ((1, 1),)


def test_the_batch_that_fills_the_ledger_is_its_last_and_later_ones_wait_for_the_next(tmp_path: Path) -> None:
    """internalAsyncAddEntry counts the add and those in flight: the one that fills the ledger is written to it,
    the ledger closes after it, and the batches that arrive meanwhile go to the next ledger."""
    run = TopicRun(str(tmp_path), TopicRunConfig(producers=2, messages=2, max_entries_per_ledger=2))
    check = TopicRefinement(run)
    for p in (1, 1, 2, 2):
        run.send(p)
    for p in (1, 1, 2):
        run.receive(p)
    assert run.topic is not None and run.topic.closing
    assert [w.sequence_id for w in run.topic.waiting] == [0, 1] and [w.producer for w in run.topic.queued] == [
        "producer-2"
    ]
    assert not run.roll_over()  # the ledger's last add is still in flight
    run.complete_add()
    run.complete_add()
    assert run.roll_over() and run.ml is not None and len(run.ml.ids()) == 2
    assert [w.producer for w in run.topic.waiting] == ["producer-2"] and not run.topic.queued
    assert not run.topic.closing and check.state.pending == ((2, 0),)


def test_a_limit_of_zero_fills_the_ledger_at_once_as_in_pulsar(tmp_path: Path) -> None:
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=0, maximum_rollover=0))
    TopicRefinement(run)
    run.send(1)
    run.receive(1)
    assert run.topic is not None and run.topic.closing  # the first add is the ledger's last


def test_a_batch_sent_again_while_its_add_is_in_flight_is_unknown_and_the_send_fails(tmp_path: Path) -> None:
    """isDuplicate: above the highest persisted, at most the highest pushed, is Unknown; the producer's connection
    closes, and once the add is persisted and answered it has nothing left to send again."""
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=10, disconnects=1))
    check = TopicRefinement(run)
    run.send(1)
    run.receive(1)
    run.drop_connection(1)
    run.resend(1)
    run.receive(1)
    assert run.producers[0].reconnecting and run.producers[0].acked == -1
    assert check.state.reconnecting == (True,) and check.state.pending == ((1, 0),)
    run.complete_add()
    assert run.producers[0].acked == 0
    run.resend(1)
    assert run.producers[0].net == [] and not run.producers[0].reconnecting
    assert [m for es in check.state.entries for m in es] == [(1, 0)]


def test_without_deduplication_a_batch_sent_again_after_a_crash_is_written_twice(tmp_path: Path) -> None:
    run = TopicRun(str(tmp_path), TopicRunConfig(max_entries_per_ledger=10, deduplication=False))
    check = TopicRefinement(run)
    run.send(1)
    run.receive(1)
    run.crash_at = "add-ack"
    assert run.complete_add()  # written, never answered
    run.restart()
    run.resend(1)
    run.receive(1)
    run.complete_add()
    assert [m for es in check.state.entries for m in es] == [(1, 0), (1, 0)]


def test_a_failed_ledger_creation_fails_the_queued_batches_and_the_next_add_creates_a_ledger(tmp_path: Path) -> None:
    """createComplete with an error: the queued adds fail (clearPendingAddEntries), the pushed ids go back to the
    persisted ones (resetHighestSequenceIdPushed), and a batch sent again waits for a ledger created for it."""
    run = TopicRun(
        str(tmp_path), TopicRunConfig(producers=2, messages=1, max_entries_per_ledger=1, creation_failures=1)
    )
    check = TopicRefinement(run)
    for p in (1, 2):
        run.send(p)
        run.receive(p)
    run.complete_add()  # producer 1's batch fills ledger 1; producer 2's is queued
    assert run.fail_creation() and run.ml is not None and run.ml.current is None
    assert run.producers[1].reconnecting and run.topic is not None and run.topic.highest_pushed == {"producer-1": 0}
    assert check.state.current == -1 and check.state.create_failures == 1
    run.resend(2)
    run.receive(2)  # no ledger open: it waits for one
    assert run.roll_over() and len(run.ml.ids()) == 2
    run.complete_add()
    assert check.state.entries == (((1, 0),), ((2, 0),)) and run.producers[1].acked == 0
