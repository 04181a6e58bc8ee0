"""The reference ledger client on an in-process cluster: write path, reads, ensemble change, recovery, restarts.

Each test drives the cluster step by step, so it states exactly which
request is served, lost or left in flight. Bookies are ``bookie-1 ..``;
entry ids and ensemble indices start at 0, as in BookKeeper.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import attrs
import pytest
from ledgerspec.reference.bookie import DigestType, encode_entry
from ledgerspec.reference.ledger import (
    BookKeeperClient,
    ClientConfig,
    EntryRead,
    InProcessCluster,
    LedgerClosedError,
    LedgerFencedError,
    LedgerSimulation,
    NotEnoughBookiesError,
    OrderedPlacement,
    ReadBeyondLacError,
    RecoveryFailedError,
    Reply,
    ReplyCode,
    Request,
    RequestKind,
    SimulationConfig,
    Step,
    StepKind,
    WriterStatus,
)
from ledgerspec.reference.ledger.cluster import DEFAULT_BOOKIE_CONFIG
from ledgerspec.reference.ledger.refinement import RefinementCheck
from ledgerspec.reference.metadata import EmbeddedMetadataStore, LedgerMetadataStore, LedgerState, Segment
from ledgerspec.spec.vocabulary import EngineEvent
from metadata_backends import MetadataBackend


class World:
    """A cluster, a metadata store, and clients on it: the writer is client 0, recovering clients 1 ..."""

    def __init__(self, root: Path, bookies: int, config: ClientConfig | None = None) -> None:
        self.cluster = InProcessCluster(str(root), bookies, sync_to_disk=False)
        self.ledgers = LedgerMetadataStore(EmbeddedMetadataStore())
        self.config = config or ClientConfig(explicit_lac=False)

    def client(self, client_id: int) -> BookKeeperClient:
        if client_id not in self.cluster.clients:
            client = BookKeeperClient(
                client_id, self.ledgers, self.cluster, config=self.config, placement=OrderedPlacement()
            )
            self.cluster.attach(client)
        return self.cluster.clients[client_id]

    def in_flight(self, kind: RequestKind, entry: int = -1, *, to: str | None = None) -> list[Request]:
        return [
            r
            for r in self.cluster.in_flight
            if r.kind is kind and r.entry_id == entry and (to is None or r.bookie == to)
        ]

    def deliver(self, kind: RequestKind, entry: int = -1, *, to: str | None = None, lose_reply: bool = False) -> None:
        requests = self.in_flight(kind, entry, to=to)
        assert requests, f"no {kind.value} of entry {entry} in flight{' to ' + to if to else ''}"
        for request in requests:
            self.cluster.deliver(request, lose_reply=lose_reply)

    def settle(self) -> None:
        self.cluster.run_until(lambda: not self.cluster.deliverable())

    def stored(self, ledger_id: int) -> dict[str, list[int]]:
        return {address: sorted(node.view(ledger_id).entries) for address, node in self.cluster.nodes.items()}


def test_creating_a_ledger_needs_ensemble_size_writable_bookies(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    world.cluster.crash("bookie-2")
    with pytest.raises(NotEnoughBookiesError, match="need 3, 2 writable: bookie-1, bookie-3"):
        world.client(0).create_ledger(3, 2, 2)
    assert world.ledgers.ledger_ids() == []


def test_entries_are_striped_round_robin(tmp_path: Path) -> None:
    # E=4, Qw=3: entry 0 -> ensemble indices 0, 1, 2; entry 2 -> 2, 3, 0 (the BRIEF's picture, from 0).
    world = World(tmp_path, 4)
    handle = world.client(0).create_ledger(4, 3, 2)
    adds = [handle.add_entry(f"e{i}".encode()) for i in range(4)]
    world.settle()
    assert [f.result() for f in adds] == [0, 1, 2, 3]
    assert world.stored(handle.ledger_id) == {
        "bookie-1": [0, 2, 3],
        "bookie-2": [0, 1, 3],
        "bookie-3": [0, 1, 2],
        "bookie-4": [1, 2, 3],
    }


def test_adds_complete_in_entry_order_on_qa_acks(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    handle = world.client(0).create_ledger(3, 2, 2)
    first, second = handle.add_entry(b"zero"), handle.add_entry(b"one")
    world.deliver(RequestKind.ADD, 1)  # entry 1 has both its acks; entry 0 none
    assert (handle.last_add_confirmed, second.done()) == (-1, False)
    world.deliver(RequestKind.ADD, 0, to="bookie-1")  # one ack of Qa=2
    assert (handle.last_add_confirmed, first.done()) == (-1, False)
    completed: list[int] = []
    first.add_done_callback(lambda f: completed.append(f.result()))
    second.add_done_callback(lambda f: completed.append(f.result()))
    world.deliver(RequestKind.ADD, 0, to="bookie-2")
    assert handle.last_add_confirmed == 1
    assert completed == [0, 1]


def test_each_entry_carries_the_writers_lac(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    handle = world.client(0).create_ledger(3, 3, 2)
    handle.add_entry(b"zero")
    handle.add_entry(b"one")
    world.settle()
    handle.add_entry(b"two")
    (sent,) = world.in_flight(RequestKind.ADD, 2, to="bookie-1")
    assert sent.lac == 1
    world.settle()
    bookie = world.cluster.nodes["bookie-1"].bookie
    assert bookie is not None
    assert bookie.read_entry(handle.ledger_id, 2) == encode_entry(handle.ledger_id, 2, 1, 10, b"two")
    assert bookie.read_piggybacked_lac(handle.ledger_id) == 1


def test_an_idle_writer_sends_its_lac_on_its_own(tmp_path: Path) -> None:
    world = World(tmp_path, 3, ClientConfig(explicit_lac=True))
    handle = world.client(0).create_ledger(3, 2, 2)
    handle.add_entry(b"zero")
    handle.add_entry(b"one")
    world.settle()
    # Bookies know LAC 0 at most from entry 1's header; the writer's LAC is 1.
    steps = world.client(0).local_steps()
    assert [s.kind.value for s in steps] == ["explicit-lac"]
    world.client(0).run_local(steps[0])
    world.settle()
    reader = world.client(7).open_ledger(handle.ledger_id)
    lac = reader.read_last_add_confirmed()
    world.cluster.run_until(lac.done)
    assert lac.result() == 1
    assert world.client(0).local_steps() == []


def test_readers_read_up_to_the_lac_with_digests_checked(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    handle = world.client(0).create_ledger(3, 2, 2)
    for payload in (b"a", b"b", b"c"):
        handle.add_entry(payload)
        world.settle()
    reader = world.client(7).open_ledger(handle.ledger_id)
    with pytest.raises(ReadBeyondLacError, match="entry 0 is past the last readable entry -1"):
        reader.read(0, 0)
    lac = reader.read_last_add_confirmed()
    world.cluster.run_until(lac.done)
    assert lac.result() == 1  # entry 2's header carries LAC 1; entry 2 itself is not confirmed to readers
    payloads = reader.read(0, 1)
    world.cluster.run_until(payloads.done)
    assert payloads.result() == [b"a", b"b"]
    with pytest.raises(ReadBeyondLacError):
        reader.read(0, 2)


def test_a_bad_digest_passes_the_read_to_the_next_bookie(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    handle = world.client(0).create_ledger(3, 2, 2)
    handle.add_entry(b"payload")
    world.settle()
    md = world.ledgers.read(handle.ledger_id).metadata
    read = EntryRead(7, 1, md, DigestType.CRC32C, 0, 0)
    (first,) = read.requests()
    good = encode_entry(handle.ledger_id, 0, -1, 7, b"payload")
    corrupt = good[:-1] + b"X"
    (retry,) = read.on_reply(Reply(first, ReplyCode.OK, data=corrupt))
    assert (first.bookie, retry.bookie) == ("bookie-1", "bookie-2")
    assert read.on_reply(Reply(retry, ReplyCode.OK, data=good)) == []
    assert read.result() == [b"payload"]
    # Both bad: the read fails, saying why for each bookie.
    read = EntryRead(7, 2, md, DigestType.CRC32C, 0, 0)
    (first,) = read.requests()
    (retry,) = read.on_reply(Reply(first, ReplyCode.OK, data=corrupt))
    read.on_reply(Reply(retry, ReplyCode.NO_SUCH_ENTRY))
    with pytest.raises(Exception, match=r"entry 0: bookie-1: crc32c digest mismatch .*, bookie-2: no-such-entry"):
        read.result()


def test_ensemble_change_replaces_a_failed_bookie_from_lac_plus_one(tmp_path: Path) -> None:
    world = World(tmp_path, 4)
    writer = world.client(0)
    handle = writer.create_ledger(3, 2, 2)
    handle.add_entry(b"zero")
    world.settle()
    second = handle.add_entry(b"one")  # entry 1 -> indices 1, 2: bookie-2, bookie-3
    world.cluster.crash("bookie-2")
    world.deliver(RequestKind.ADD, 1, to="bookie-3")
    (stuck,) = world.cluster.timeouts()
    assert stuck.bookie == "bookie-2"
    assert world.cluster.timeout(stuck)
    md = world.ledgers.read(handle.ledger_id).metadata
    assert md.segments == (
        Segment(0, ("bookie-1", "bookie-2", "bookie-3")),
        Segment(1, ("bookie-1", "bookie-4", "bookie-3")),
    )
    assert not second.done()  # bookie-3's ack alone is not Qa=2: the add waits for the replacement
    world.deliver(RequestKind.ADD, 1, to="bookie-4")
    assert second.result() == 1
    assert world.stored(handle.ledger_id)["bookie-4"] == [1]


def test_a_resend_after_an_ensemble_change_carries_the_lac_the_add_was_packaged_with(tmp_path: Path) -> None:
    """PendingAddOp.unsetSuccessAndSendWriteRequest sends toSend again: the LAC of the add, not today's."""
    world = World(tmp_path, 4)
    writer = world.client(0)
    handle = writer.create_ledger(3, 2, 2)
    handle.add_entry(b"zero")
    handle.add_entry(b"one")  # packaged with LAC -1; entry 1 -> bookie-2, bookie-3
    world.deliver(RequestKind.ADD, 0)
    assert handle.last_add_confirmed == 0
    world.cluster.crash("bookie-2")
    world.deliver(RequestKind.ADD, 1, to="bookie-3")
    (stuck,) = world.cluster.timeouts()
    assert world.cluster.timeout(stuck)
    (resent,) = world.in_flight(RequestKind.ADD, 1, to="bookie-4")
    assert resent.lac == -1
    assert resent.data == encode_entry(handle.ledger_id, 1, -1, 7, b"one")


def test_ensemble_change_of_a_ledger_in_recovery_fences_the_writer(tmp_path: Path) -> None:
    world = World(tmp_path, 4)
    handle = world.client(0).create_ledger(3, 2, 2)
    pending = handle.add_entry(b"zero")
    world.cluster.crash("bookie-1")
    world.client(1).recover_ledger(handle.ledger_id)  # OPEN -> IN_RECOVERY
    (stuck,) = [r for r in world.cluster.timeouts() if r.client == 0]
    world.cluster.timeout(stuck)
    assert handle.status is WriterStatus.FENCED
    assert isinstance(pending.exception(), LedgerFencedError)
    assert world.ledgers.read(handle.ledger_id).metadata.segments == (Segment(0, ("bookie-1", "bookie-2", "bookie-3")),)


def test_recovery_keeps_what_could_have_been_acked_and_fences_the_writer(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    handle = world.client(0).create_ledger(3, 2, 2)
    handle.add_entry(b"zero")
    world.settle()
    handle.add_entry(b"one")  # to bookie-2 and bookie-3
    handle.add_entry(b"two")  # to bookie-3 and bookie-1
    world.deliver(RequestKind.ADD, 1, to="bookie-2", lose_reply=True)  # stored once: recovery keeps it
    recovery = world.client(1).recover_ledger(handle.ledger_id)
    assert world.ledgers.read(handle.ledger_id).metadata.state is LedgerState.IN_RECOVERY
    for bookie in ("bookie-1", "bookie-2", "bookie-3"):
        world.deliver(RequestKind.FENCE, to=bookie)
    assert recovery.recovery.start == 0  # the highest LAC the bookies know
    world.cluster.run_until(recovery.future.done)
    closed = world.ledgers.read(handle.ledger_id).metadata
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, 1, 7)
    # The writer's adds still in flight reach fenced bookies: EFENCED stops the handle.
    world.settle()
    assert handle.status is WriterStatus.FENCED
    reader = recovery.future.result()
    payloads = reader.read(0, 1)
    world.cluster.run_until(payloads.done)
    assert payloads.result() == [b"zero", b"one"]


def test_recovery_replaces_a_bookie_that_fails_a_write_back_and_its_close_writes_the_new_ensemble(
    tmp_path: Path,
) -> None:
    """ReadOnlyLedgerHandle.handleBookieFailure: the new ensemble starts at the recovering handle's LAC + 1."""
    world = World(tmp_path, 4)
    handle = world.client(0).create_ledger(3, 3, 3)  # every write-back needs all three bookies
    for payload in (b"zero", b"one"):
        handle.add_entry(payload)
        world.settle()  # the add of entry 1 carries LAC 0: recovery starts after entry 0
    world.cluster.crash("bookie-1")
    recovery = world.client(1).recover_ledger(handle.ledger_id)
    world.cluster.run_until(recovery.future.done)
    assert recovery.recovery.ensembles == [(1, ("bookie-4", "bookie-2", "bookie-3"))]
    closed = world.ledgers.read(handle.ledger_id).metadata
    assert (closed.state, closed.last_entry_id) == (LedgerState.CLOSED, 1)
    assert closed.segments == (
        Segment(0, ("bookie-1", "bookie-2", "bookie-3")),
        Segment(1, ("bookie-4", "bookie-2", "bookie-3")),
    )
    assert world.stored(handle.ledger_id)["bookie-4"] == [1]


def test_a_recovery_that_cannot_decide_fails_and_another_may_close_the_ledger(tmp_path: Path) -> None:
    """The fencing read, then an entry's read, with every bookie left unheard of down: the recovery fails, the
    ledger stays IN_RECOVERY, and a recovery started once the bookies are back closes it."""
    world = World(tmp_path, 2)
    handle = world.client(0).create_ledger(2, 2, 1)
    handle.add_entry(b"zero")
    world.deliver(RequestKind.ADD, 0, to="bookie-1", lose_reply=True)  # on bookie-1 only
    world.cluster.crash("bookie-1")
    fencing = world.client(1).recover_ledger(handle.ledger_id)
    world.deliver(RequestKind.FENCE, to="bookie-2")  # both write sets need both replies (Qw - Qa + 1 = 2)
    (unanswered,) = [r for r in world.cluster.timeouts() if r.client == 1]
    assert world.cluster.timeout(unanswered)
    assert isinstance(fencing.future.exception(), RecoveryFailedError)
    assert world.ledgers.read(handle.ledger_id).metadata.state is LedgerState.IN_RECOVERY

    world.cluster.restart("bookie-1")
    reading = world.client(2).recover_ledger(handle.ledger_id)
    for bookie in ("bookie-1", "bookie-2"):
        world.deliver(RequestKind.FENCE, to=bookie)
    world.cluster.crash("bookie-1")
    world.deliver(RequestKind.RECOVERY_READ, 0, to="bookie-2")  # NoSuchEntry: one of the two it takes
    (unanswered,) = [r for r in world.cluster.timeouts() if r.client == 2]
    assert world.cluster.timeout(unanswered)
    assert isinstance(reading.future.exception(), RecoveryFailedError)
    assert "the read of entry 0 is undecided" in str(reading.future.exception())

    world.cluster.restart("bookie-1")
    closing = world.client(3).recover_ledger(handle.ledger_id)
    world.cluster.run_until(closing.future.done)
    closed = world.ledgers.read(handle.ledger_id).metadata
    assert (closed.state, closed.last_entry_id) == (LedgerState.CLOSED, 0)


def test_a_restarted_bookie_replays_its_journal(tmp_path: Path) -> None:
    world = World(tmp_path, 3)
    handle = world.client(0).create_ledger(3, 3, 2)
    handle.add_entry(b"zero")
    world.settle()
    handle.add_entry(b"one")
    world.settle()
    world.client(1).recover_ledger(handle.ledger_id)
    world.deliver(RequestKind.FENCE, to="bookie-1")
    node = world.cluster.nodes["bookie-1"]
    before = node.view(handle.ledger_id)
    assert before.fenced and before.entries == {0, 1} and before.lac == 0
    world.cluster.crash("bookie-1", power_loss=True)
    world.cluster.restart("bookie-1")
    assert node.view(handle.ledger_id) == before


@pytest.mark.parametrize("bookie_mutant", [None, "ack_before_fsync"])
def test_a_power_loss_before_the_fsync_loses_the_add_and_only_an_early_ack_tells_the_writer(
    tmp_path: Path, bookie_mutant: str | None
) -> None:
    world = World(tmp_path, 3)
    if bookie_mutant is not None:
        world.cluster = InProcessCluster(
            str(tmp_path / "mutant"), 3, sync_to_disk=False,
            bookie_config=attrs.evolve(DEFAULT_BOOKIE_CONFIG, mutant=bookie_mutant),
        )  # fmt: skip
    handle = world.client(0).create_ledger(3, 3, 3)
    handle.add_entry(b"zero")
    [request] = world.in_flight(RequestKind.ADD, 0, to="bookie-1")
    node = world.cluster.nodes["bookie-1"]
    assert node.journals_add(request)
    durable = world.cluster.journal_unsynced(request)
    world.cluster.power_off("bookie-1", durable)
    acked = [b for e, bookies in handle.writer.acks.items() if e == 0 for b in bookies]
    if bookie_mutant is None:
        assert request in world.cluster.in_flight  # never answered: for the spec, still in flight
        assert "bookie-1" not in acked
    else:
        assert request not in world.cluster.in_flight
        assert "bookie-1" in acked  # the writer counts an ack for an entry the bookie no longer has
    assert [e.action for e in world.cluster.events.events][-1] == "BookieCrashes"
    world.cluster.restart("bookie-1")
    assert node.view(handle.ledger_id).entries == frozenset()


def test_the_same_seed_gives_the_same_run(tmp_path: Path) -> None:
    config = SimulationConfig(bookies=4, max_entries=4, max_crashes=2, max_loss=2)
    runs = []
    for name in ("a", "b"):
        sim = LedgerSimulation(config, str(tmp_path / name), seed=11)
        sim.run(150)
        runs.append([str(e) for e in sim.events])
    assert runs[0] == runs[1]
    assert len(runs[0]) > 20


def _write_then_recover(sim: LedgerSimulation) -> Future[object]:
    """Two entries acked, a third half-written; then a recovering client closes the ledger."""
    for _ in range(3):
        sim.take(Step(StepKind.ADD))
    for request in [r for r in sim.cluster.in_flight if r.entry_id < 2]:
        sim.take(Step(StepKind.DELIVER, request))
    sim.take(Step(StepKind.DELIVER, next(r for r in sim.cluster.in_flight if r.entry_id == 2)))
    sim.take(Step(StepKind.RECOVER, client=1))
    recovery = sim.recoveries[1].future
    while not recovery.done():
        local = [s for c in sim.cluster.clients.values() for s in c.local_steps()]
        request = next((r for r in sim.cluster.deliverable() if r.client == 1), None)
        sim.take(Step(StepKind.DELIVER, request) if request is not None else Step(StepKind.LOCAL, local=local[0]))
    return recovery  # type: ignore[return-value]


def test_write_and_recovery_on_each_metadata_store(metadata_backend: MetadataBackend, tmp_path: Path) -> None:
    sim = LedgerSimulation(SimulationConfig(max_entries=3), str(tmp_path), store=metadata_backend.open())
    check = RefinementCheck(sim).attach()
    recovery = _write_then_recover(sim)
    assert recovery.exception() is None
    closed = sim.ledgers.read(sim.ledger_id).metadata
    assert (closed.state, closed.last_entry_id) == (LedgerState.CLOSED, 2)
    assert check.steps > 10 and check.state.meta_status == "CLOSED"


def test_close_with_adds_pending_closes_at_the_lac_and_fails_them(tmp_path: Path) -> None:
    """LedgerHandle.doAsyncCloseInternal: pending adds are drained and failed, lastAddPushed drops to the LAC."""
    world = World(tmp_path, 3)
    writer = world.client(0)
    handle = writer.create_ledger(3, 2, 2)
    adds = [handle.add_entry(p) for p in (b"ab", b"cde")]
    world.deliver(RequestKind.ADD, 0)
    closing = handle.close()
    assert closing.done() and closing.result() is None
    assert adds[0].result() == 0 and isinstance(adds[1].exception(), LedgerClosedError)
    closed = world.ledgers.read(handle.ledger_id).metadata
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, 0, 2)
    assert (handle.status, handle.last_add_pushed, handle.last_add_confirmed) == (WriterStatus.CLOSED, 0, 0)
    world.deliver(RequestKind.ADD, 1)  # the bookies still store entry 1; its acks complete nothing
    assert handle.last_add_confirmed == 0 and world.stored(handle.ledger_id)["bookie-2"] == [0, 1]
    assert world.ledgers.read(handle.ledger_id).metadata.last_entry_id == 0


# One entry an ensemble member, a spare bookie: the writer's second entry carries the LAC of its first.
READER_RUNS = SimulationConfig(
    bookies=3, ensemble=2, write_quorum=1, ack_quorum=1, max_entries=3, max_crashes=1, max_loss=1,
    explicit_lac=False, readers=1,
)  # fmt: skip
READER_STEPS = {"ReaderReadsLac", "ReaderReadsEntry"}
# With the explicit LAC, the reader must also learn a LAC that no add piggybacked, which only a bookie's explicit
# LAC can tell it (ReadLacProcessorV3 answers both).
EXPLICIT_STEPS = {"WriterSendsExplicitLac", "BookieReceivesWriteLac", "a LAC only an explicit LAC gave"}


@pytest.mark.parametrize("explicit_lac", [False, True], ids=["piggybacked", "explicit"])
def test_the_plain_reader_refines_the_spec_while_the_writer_writes(explicit_lac: bool) -> None:
    """Seeded runs under the refinement check, until the reader has learned a LAC and read an entry of an open
    ledger (the same seeds give the same runs)."""
    config = attrs.evolve(READER_RUNS, explicit_lac=explicit_lac)
    assert config.spec_constants()["NumReaders"] == 1
    assert config.spec_constants()["ExplicitLac"] == int(explicit_lac)
    wanted = READER_STEPS | (EXPLICIT_STEPS if explicit_lac else set())
    taken: set[str] = set()
    for seed in range(200):
        sim = LedgerSimulation(config, seed=seed)
        try:
            check = RefinementCheck(sim).attach()

            def seen(_: object, events: Sequence[EngineEvent], check: RefinementCheck = check) -> None:
                if check.state.meta_status != "OPEN":  # the state after the step, the reader's step included
                    return
                taken.update(e.action for e in events if e.action.startswith("Reader") or "Lac" in e.action)
                piggybacked = max(check.state.bookie_lac)
                if any(e.action == "ReaderReadsLac" and e.args[1] > piggybacked for e in events):
                    taken.add("a LAC only an explicit LAC gave")

            sim.observers.append(seen)
            sim.run(60)
            assert sim.read_problems == []
            assert check.state.reader_read == (frozenset(sim.reader_read),)
        finally:
            sim.close()
        if taken >= wanted:
            break
    assert taken == wanted


def test_a_simulation_has_one_reader_at_most() -> None:
    with pytest.raises(ValueError, match="readers=2: a simulation has one reader"):
        SimulationConfig(readers=2, explicit_lac=False)
