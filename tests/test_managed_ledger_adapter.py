"""The managed-ledger adapter without Java: recordings of Pulsar's managed ledger mapped and checked again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.adapters.managed_ledger import CursorMappingError, CursorTraceMapper
from ledgerspec.conformance.adapters.managed_ledger_topic import TopicMappingError, TopicTraceMapper
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording.real_systems import ScenarioRecording, check_cursor_recording
from recording_support import Edit, edited_copy

RECORDINGS = Path(__file__).parent / "data" / "managed-ledger-4.0.7"
MANAGED_LEDGER = "ledgerspec/real/persistent/crash-twice"


def recheck(tmp_path: Path, name: str, edit: Edit | None = None) -> ScenarioRecording:
    """Check a stored recording again in a copy; ``edit`` may change or drop (None) each observation."""
    return check_cursor_recording(edited_copy(RECORDINGS / name, tmp_path, edit))


#: The stored recordings that show a finding of Pulsar 4.0.7 (conformance/adapters/findings.py).
SHOWS = {"reset-back-restart": "reset-record-keeps-acks"}


@pytest.mark.parametrize("name", sorted(p.name for p in RECORDINGS.iterdir()))
def test_each_recording_conforms_or_shows_its_finding(tmp_path: Path, name: str) -> None:
    recording = recheck(tmp_path, name)
    expected = "known" if name in SHOWS else "conforms"
    assert recording.status == expected, [r.verdict.reason for r in recording.ledgers]
    written = [orjson.loads(line) for line in (tmp_path / name / "trace.ndjson").read_bytes().splitlines()]
    assert written and {line["process"] for line in written} == {"consumer"}


def test_a_cursor_restored_past_an_unacknowledged_message_is_caught(tmp_path: Path) -> None:
    """After the first crash the restored cursor claims message (35, 0), which nobody acknowledged yet."""
    restores = 0

    def skip_a_message(obs: dict[str, Any]) -> dict[str, Any]:
        nonlocal restores
        if obs["ev"] == "cursor-opened" and obs["covered"]:
            restores += 1
            obs["covered"] = sorted([*obs["covered"], [35, 0]])
        return obs

    recording = recheck(tmp_path, "crash-twice", skip_a_message)
    (ledger,) = [r for r in recording.ledgers if r.spec == "cursor"]
    assert restores == 2 and ledger.verdict.status == "violates"
    assert "CursorRecovers" in ledger.verdict.reason and "covered" in ledger.verdict.reason


@pytest.mark.parametrize("name", sorted(p.name for p in RECORDINGS.iterdir()))
def test_each_recording_is_checked_against_the_managed_ledger_spec_too(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the topic's clients see it: the harness is one producer without deduplication, the cursor one
    subscription. A reset is no step of that spec, so that recording is checked against the cursor spec only, and
    says why."""
    recording = recheck(tmp_path, name)
    if name == "reset-back-restart":
        assert [r.spec for r in recording.ledgers] == ["cursor"] and not (tmp_path / name / "topic").exists()
        assert "the cursor is reset" in recording.not_checked["managed_ledger"]
        return
    (topic,) = [r for r in recording.ledgers if r.spec == "managed_ledger"]
    assert topic.verdict.status == "conforms", topic.verdict.reason
    assert topic.constants["Dedup"] is False and topic.constants["MaxCrashes"] >= 1
    lines = [orjson.loads(line) for line in (tmp_path / name / "topic" / "trace.ndjson").read_bytes().splitlines()]
    assert {line["type"] for line in lines} >= {"Init", "ProducerSends", "BookKeeperCompletesAdd", "ConsumerAcks"}
    assert main(["check", str(tmp_path / name / "topic"), "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["spec"] == "managed_ledger"


def test_a_restore_past_an_unconsumed_message_leaves_the_managed_ledger_spec(tmp_path: Path) -> None:
    """The second restore of crash-twice, moved one entry on (to 38:0, past 35:0, which nobody acknowledged yet):
    the reopen's consumer resumes where no behaviour of the spec puts it."""

    def skip_35_0(obs: dict[str, Any]) -> dict[str, Any]:
        if obs["ev"] == "cursor-opened" and obs["mark_delete"] == [34, 2]:
            obs["mark_delete"], obs["covered"] = [38, 0], sorted([*obs["covered"], [35, 0]])
        return obs

    recording = recheck(tmp_path, "crash-twice", skip_35_0)
    (topic,) = [r for r in recording.ledgers if r.spec == "managed_ledger"]
    failure = topic.verdict.failure
    assert topic.verdict.status == "violates" and failure is not None
    assert failure.event_type == "ManagedLedgerOpens" and "observed consumed = [[3,0]]" in failure.reason


def test_bad_observations_are_named_in_the_managed_ledger_mapping_too() -> None:
    mapper = TopicTraceMapper("t", MANAGED_LEDGER, "subscription", 3)
    with pytest.raises(TopicMappingError, match="observation 5: unknown kind 'gossip'"):
        mapper.feed_all([{"ev": "gossip", "name": MANAGED_LEDGER, "n": 5}])
    with pytest.raises(TopicMappingError, match="observation 6: ledger 99 is no data ledger the broker created"):
        mapper.feed_all([{"ev": "published", "name": MANAGED_LEDGER, "position": [99, 0], "n": 6}])
    with pytest.raises(TopicMappingError, match="observation 8: a published observation with a field missing"):
        mapper.feed_all([{"ev": "published", "name": MANAGED_LEDGER, "n": 8}])
    created = {"custom": {"pulsar/managed-ledger": MANAGED_LEDGER}}
    mapper.feed_all([{"ev": "metadata", "op": "create", "ok": True, "ledger": 7, "written": created, "n": 9}])
    with pytest.raises(TopicMappingError, match="observation 10: entry 1 of ledger 7 published, but it held 0"):
        mapper.feed_all([{"ev": "published", "name": MANAGED_LEDGER, "position": [7, 1], "n": 10}])
    assert [line["type"] for line in mapper.lines] == ["Init"]


def test_bad_observations_are_named() -> None:
    mapper = CursorTraceMapper("t", MANAGED_LEDGER, "subscription")
    with pytest.raises(CursorMappingError, match="observation 5: unknown kind 'gossip'"):
        mapper.feed({"ev": "gossip", "name": MANAGED_LEDGER, "n": 5})
    with pytest.raises(CursorMappingError, match="observation 6: ledger 99 was never created by the broker"):
        mapper.feed({"ev": "published", "name": MANAGED_LEDGER, "position": [99, 0], "n": 6})
    with pytest.raises(CursorMappingError, match=r"observation 8: a published observation with a field missing"):
        mapper.feed({"ev": "published", "name": MANAGED_LEDGER, "n": 8})
    with pytest.raises(CursorMappingError, match=r"observation 9: a send observation .*'x'"):
        mapper.feed({"ev": "send", "op": "add", "ledger": "x", "entry": 0, "n": 9})
    mapper.feed({"ev": "published", "name": "another/managed-ledger", "position": [99, 0], "n": 7})
    assert mapper.lines == []


def test_stored_recordings_are_checked_again_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = edited_copy(RECORDINGS / "crash-twice", tmp_path)
    assert main(["record", "managed-ledger", "--out", str(tmp_path / "out"), "--recheck", str(copy)]) == 0
    assert "1 conforms of 1 scenarios" in capsys.readouterr().out
    lines = (copy / "observations.ndjson").read_bytes().splitlines()
    (copy / "observations.ndjson").write_bytes(b"\n".join([*lines, b"[1, 2]"]) + b"\n")
    assert main(["record", "managed-ledger", "--out", str(tmp_path / "out"), "--recheck", str(copy)]) == 2
    assert f"observations.ndjson:{len(lines) + 1}: not an observation" in capsys.readouterr().err


def test_a_reset_back_then_a_restart_skips_what_the_reset_made_unacknowledged(tmp_path: Path) -> None:
    """Pulsar 4.0.7: acks of 0:0, 0:1 and 1:0, a reset to read from 0:1, a crash. The reset's record kept the
    individual ack of 1:0, so the restored cursor covers it, though the reset was to deliver it again."""
    recording = recheck(tmp_path, "reset-back-restart")
    (ledger,) = recording.ledgers
    assert recording.expects == "reset-record-keeps-acks" and recording.failure is not None
    assert ledger.verdict.status == "violates" and ledger.verdict.finding == "bug"
    assert [p.name for p in ledger.verdict.broken_promises] == ["CursorSkipsNoUnackedMessage"]
    assert "message 1:0" in ledger.verdict.reason
    lines = [
        orjson.loads(line) for line in (tmp_path / "reset-back-restart" / "trace.ndjson").read_bytes().splitlines()
    ]
    reset = [line for line in lines if line["type"] == "CursorResetStarts"]
    assert [line["params"] for line in reset] == [{"target": [0, 0]}]


def test_the_same_reset_conforms_where_the_record_drops_the_acks(tmp_path: Path) -> None:
    """The same run, but a restore as the spec's reset record gives it (mark-delete 0:0, no individual acks):
    nothing is skipped, and the trace conforms."""

    def record_without_acks(obs: dict[str, Any]) -> dict[str, Any]:
        if obs["ev"] == "cursor-opened" and obs.get("covered"):
            obs["covered"] = [p for p in obs["covered"] if tuple(p) <= tuple(obs["mark_delete"])]
        return obs

    recording = recheck(tmp_path, "reset-back-restart", record_without_acks)
    (ledger,) = recording.ledgers
    assert ledger.verdict.status == "conforms", ledger.verdict.reason


def test_a_rollover_waits_for_the_publish_of_the_entry_that_filled_the_ledger() -> None:
    """The broker may create the next ledger before the producer is told of the entry that filled the last one: the
    rollover goes after that publish, where the spec's ledger is full."""
    from ledgerspec.conformance.adapters.managed_ledger import MANAGED_LEDGER_KEY

    def created(ledger: int, n: int) -> dict[str, object]:
        written = {"custom": {MANAGED_LEDGER_KEY: MANAGED_LEDGER}}
        return {"ev": "metadata", "op": "create", "ok": True, "ledger": ledger, "written": written, "n": n}

    def published(ledger: int, entry: int, n: int) -> dict[str, object]:
        return {"ev": "published", "name": MANAGED_LEDGER, "position": [ledger, entry], "n": n}

    mapper = CursorTraceMapper("t", MANAGED_LEDGER, "subscription")
    mapper.feed_all(
        [created(7, 1), published(7, 0, 2), published(7, 1, 3), created(8, 4), published(7, 2, 5), published(8, 0, 6)]
    )
    assert [(line["type"], line["x-obs"]) for line in mapper.lines] == [
        ("EntryPublished", 2),
        ("EntryPublished", 3),
        ("EntryPublished", 5),
        ("LedgerRollsOver", 4),
        ("EntryPublished", 6),
    ]
    # a creation with nothing after it still rolls over, at the end of the observations
    mapper = CursorTraceMapper("t", MANAGED_LEDGER, "subscription")
    mapper.feed_all([created(7, 1), published(7, 0, 2), created(8, 3)])
    assert [line["type"] for line in mapper.lines] == ["EntryPublished", "LedgerRollsOver"]


def test_a_cursor_ledger_closed_short_of_a_record_it_sent_is_a_fault(tmp_path: Path) -> None:
    """cursor-ledger-write-fails: four of five bookies killed, the cursor ledger's third record failed and the broker
    closed the ledger at its second (the state went to the znode); a broker that recovers a ledger after a crash
    closes it short of what the dead broker sent, which is no fault."""
    name = "cursor-ledger-write-fails"
    observations = [
        orjson.loads(line) for line in (RECORDINGS / name / "observations.ndjson").read_bytes().splitlines()
    ]
    run = orjson.loads((RECORDINGS / name / "run.json").read_bytes())
    mapper = CursorTraceMapper("t", run["managed_ledger"], run["cursor"])
    mapper.feed_all(observations)
    assert mapper.failed_appends == 1 and mapper.constants(3, 2)["MaxFaults"] == 1
    assert [line["type"] for line in mapper.lines].count("BrokerCrashes") == 1  # the bookies' outage is no step

    def closed_whole(obs: dict[str, Any]) -> dict[str, Any]:
        written = obs.get("written", {})
        if obs["ev"] == "metadata" and written.get("state") == "CLOSED" and "pulsar/cursor" in written["custom"]:
            return {**obs, "written": {**written, "last_entry": 2}}
        return obs

    whole = CursorTraceMapper("t", run["managed_ledger"], run["cursor"])
    whole.feed_all(o for o in (closed_whole(dict(x)) for x in observations))
    assert whole.failed_appends == 0
    assert recheck(tmp_path, name).status == "conforms"


def test_ledgers_rolled_over_by_age_conform_where_the_specs_let_ledgers_age(tmp_path: Path) -> None:
    """Pulsar 4.0.7 with maximumRolloverTimeMs = 2 s and ledgers of up to 10 entries: the first ledger rolled over
    after two entries, the others after one. With RolloverByTime (cursor spec) and an age limit the hidden clock
    reaches (managed-ledger spec) both traces conform; without it the cursor spec rejects the first rollover."""
    recording = recheck(tmp_path / "aging", "time-rollover")
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    cursor, topic = recording.ledgers
    assert cursor.constants["RolloverByTime"] is True and topic.constants["MaximumRolloverTime"] == 1
    trace = (tmp_path / "aging" / "time-rollover" / "trace.ndjson").read_bytes().splitlines()
    published = [orjson.loads(line)["observed"]["published"] for line in trace if b'"EntryPublished"' in line]
    assert published[-1] == [[0, 0], [0, 1], [1, 0], [2, 0], [3, 0]]  # ledgers of two entries, then of one
    copy = edited_copy(RECORDINGS / "time-rollover", tmp_path / "not-aging")
    run = orjson.loads((copy / "run.json").read_bytes())
    del run["maximum_rollover_ms"]  # as a recording made before run.json named it
    (copy / "run.json").write_bytes(orjson.dumps(run))
    (cursor, _) = check_cursor_recording(copy).ledgers
    failure = cursor.verdict.failure
    assert cursor.verdict.status == "violates" and failure is not None and failure.event_type == "LedgerRollsOver"
    assert "holds 2 of 10 entries: it is not full" in failure.reason


def test_a_cursor_ledger_deleted_when_the_znode_refused_to_name_it_is_a_fault(tmp_path: Path) -> None:
    """cursor-switch-fails: the cursor's znode was read-only when its full ledger was switched; the broker deleted
    the new cursor ledger (3), which held its first record (switchToNewLedger's failure), and persisted the next
    acks through a ledger created again (4). That deletion is the one fault; the deletions of the older ledgers
    that a switch (2) and the restore (4) retired are none."""
    name = "cursor-switch-fails"
    recording = recheck(tmp_path, name)
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    assert recording.ledgers[0].constants["MaxFaults"] == 1
    observations = [
        orjson.loads(line) for line in (RECORDINGS / name / "observations.ndjson").read_bytes().splitlines()
    ]
    assert [o["ledger"] for o in observations if o["ev"] == "ledger-deleted"] == [3, 2, 4]
    run = orjson.loads((RECORDINGS / name / "run.json").read_bytes())
    for unseen, faults in ((None, 1), (3, 0), (2, 1)):
        mapper = CursorTraceMapper("t", run["managed_ledger"], run["cursor"])
        mapper.feed_all(o for o in observations if not (o["ev"] == "ledger-deleted" and o["ledger"] == unseen))
        assert (mapper.failed_switches, mapper.failed_appends) == (faults, 0), unseen


def test_a_takeover_is_a_crash_to_the_cursor_and_a_move_of_the_topic_to_its_clients(tmp_path: Path) -> None:
    """second-broker-takes-over (Pulsar 4.0.7): broker 2 opens the managed ledger while broker 1 runs; broker 1's
    next add fails (ManagedLedgerFencedException: its ledger-list write was refused), and it deletes the ledger its
    rollover created. Broker 3, after broker 2's crash, publishes into the managed-ledger spec's ledger 4: the
    third ledger is the old broker's, which the spec's hidden OldBrokerRollsOver created and deleted."""
    name = "second-broker-takes-over"
    path = RECORDINGS / name / "observations.ndjson"
    observations = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    (moved,) = [o["n"] for o in observations if o["ev"] == "topic-moved"]
    old = [o for o in observations if o.get("broker") == 1 and o["n"] > moved]
    (failed,) = [o for o in old if o["ev"] == "publish-failed"]
    assert failed["error"].startswith("ManagedLedgerFencedException")
    (rolled,) = [o["ledger"] for o in old if o["ev"] == "metadata" and o["op"] == "create"]
    assert [o["ledger"] for o in old if o["ev"] == "ledger-deleted"] == [rolled]
    recording = recheck(tmp_path, name)
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    cursor, topic = recording.ledgers
    assert (cursor.constants["MaxCrashes"], topic.constants["MaxCrashes"], topic.constants["MaxTakeovers"]) == (2, 1, 1)
    lines = [orjson.loads(line) for line in (tmp_path / name / "topic" / "trace.ndjson").read_bytes().splitlines()]
    kinds = [line["type"] for line in lines]
    assert kinds.index("TopicMovesToAnotherBroker") + 1 == kinds.index("ManagedLedgerOpens")
    assert lines[-1]["observed"]["last_id"][:2] == [4, 0]


def test_an_add_acknowledged_by_the_broker_that_lost_the_topic_is_caught(tmp_path: Path) -> None:
    """The same recording, but broker 1 acknowledges its add after the takeover, as the third entry of its ledger,
    which broker 2's recovery had closed after two: no reader will get that message. The managed-ledger spec names
    the promise broken; the cursor spec, with one broker, finds a publish it cannot place."""

    def split_brain(obs: dict[str, Any]) -> dict[str, Any]:
        if obs["ev"] == "publish-failed":
            return {**obs, "ev": "published", "position": [0, 2]}
        return obs

    recording = recheck(tmp_path, "second-broker-takes-over", split_brain)
    verdicts = {r.spec: r.verdict for r in recording.ledgers}
    assert recording.status == "violates"
    assert {spec: v.status for spec, v in verdicts.items()} == {"cursor": "violates", "managed_ledger": "violates"}
    assert verdicts["managed_ledger"].promise_names == ("NoAcknowledgedMessageLost",)
    assert verdicts["managed_ledger"].failure is not None
    assert verdicts["managed_ledger"].failure.event_type == "BookKeeperCompletesAdd"
    assert "message 1:2 was acknowledged to its producer" in verdicts["managed_ledger"].reason
    assert verdicts["cursor"].failure is not None and verdicts["cursor"].failure.event_type == "EntryPublished"


def test_what_only_the_owner_can_do_is_refused_from_a_broker_that_lost_the_topic() -> None:
    moved = {"ev": "topic-moved", "from": 1, "to": 2, "n": 3}
    mapper = CursorTraceMapper("t", MANAGED_LEDGER, "subscription")
    mapper.feed(moved)
    acked = {"ev": "acked", "name": MANAGED_LEDGER, "cursor": "subscription", "broker": 1, "n": 4}
    with pytest.raises(CursorMappingError, match="observation 4: broker 1, which lost the topic to another, reported"):
        mapper.feed(acked)
    mapper.feed({"ev": "publish-failed", "name": MANAGED_LEDGER, "error": "Fenced", "broker": 1, "n": 5})
    with pytest.raises(CursorMappingError, match="observation 6: the broker that owns the topic failed an add"):
        mapper.feed({"ev": "publish-failed", "name": MANAGED_LEDGER, "error": "Timeout", "broker": 2, "n": 6})
    topic = TopicTraceMapper("t", MANAGED_LEDGER, "subscription", 3)
    topic.feed_all([moved])
    with pytest.raises(TopicMappingError, match="observation 7: the topic moves to another broker while none"):
        topic.feed_all([{"ev": "topic-moved", "from": 2, "to": 3, "n": 7}])
    with pytest.raises(TopicMappingError, match="observation 8: the broker that owns the topic failed an add"):
        topic.feed_all([{"ev": "publish-failed", "name": MANAGED_LEDGER, "error": "Timeout", "broker": 2, "n": 8}])
    with pytest.raises(TopicMappingError, match="observation 4: broker 1, which lost the topic to another, reported"):
        topic.feed_all([acked])
    assert [line["type"] for line in topic.lines] == ["Init", "TopicMovesToAnotherBroker"]


def test_what_a_restored_cursor_dispatches_is_what_it_covers_and_a_skip_is_named(tmp_path: Path) -> None:
    """rewind-read-restart (Pulsar 4.0.7): acks of 0:0 (cumulative), 0:2 and 1:1; the consumer reads 0:1, 1:0 and
    1:2, the cursor rewinds and it reads them again; after a crash the restored cursor dispatches the same three.
    The mapping takes that dispatch as the restore's ``covered``; with 0:1 missing from it the restored cursor
    skips a message nobody acknowledged."""
    name = "rewind-read-restart"
    recording = recheck(tmp_path, name)
    assert recording.status == "conforms", [r.verdict.reason for r in recording.ledgers]
    lines = [orjson.loads(line) for line in (tmp_path / name / "trace.ndjson").read_bytes().splitlines()]
    (restore,) = [line for line in lines if line["type"] == "CursorRecovers"]
    assert "x-delivered" in restore and restore["observed"]["covered"] == [[0, 0, 0], [0, 2, 0], [1, 1, 0]]
    restored_at = restore["x-obs"]

    def skip_0_1(obs: dict[str, Any]) -> dict[str, Any]:
        if obs["ev"] == "delivered" and obs["n"] > restored_at:
            obs["positions"] = [p for p in obs["positions"] if p != [0, 1]]
        return obs

    skipped = recheck(tmp_path / "skipped", name, skip_0_1)
    cursor = skipped.ledgers[0].verdict
    assert cursor.status == "violates" and cursor.failure is not None
    assert cursor.failure.event_type == "CursorRecovers"
    assert cursor.promise_names == ("CursorSkipsNoUnackedMessage",)
