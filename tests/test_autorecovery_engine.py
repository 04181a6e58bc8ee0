"""The reference auditor and replication workers, on the in-process cluster and each metadata store.

A closed ledger is written by the reference client; bookies register and
vote in sessions of their own; a bookie stops (its session ends with it),
the elected auditor marks the ledger, and workers copy the lost fragment and
swap the bookie in the metadata, one spec step at a time.
"""

from __future__ import annotations

import random
from pathlib import Path

import attrs
import pytest
from ledgerspec.reference.autorecovery import (
    Auditor,
    AutorecoveryRefinement,
    AutorecoveryRun,
    AutorecoveryZnodeError,
    Fragment,
    ReplicationWorker,
    RunConfig,
    UnderreplicationManager,
    UnderreplicationPaths,
    available_bookies,
    current_auditor,
    fragments,
    lost_fragments,
)
from ledgerspec.reference.autorecovery.bookies import read_last_add_confirmed
from ledgerspec.reference.autorecovery.fragments import last_segment_open_and_missing, write_set
from ledgerspec.reference.autorecovery.trace import random_steps
from ledgerspec.reference.autorecovery.znodes import decode_lock, decode_underreplicated, encode_underreplicated
from ledgerspec.reference.ledger import BookKeeperClient, OrderedPlacement
from ledgerspec.reference.ledger.errors import LedgerFencedError
from ledgerspec.reference.metadata import LedgerMetadata, LedgerState, Segment
from metadata_backends import MetadataBackend

PATHS = UnderreplicationPaths()


class Cluster:
    """An :class:`AutorecoveryRun` of a closed ledger (E=3, Qw=2, Qa=2, entries 0..3 on bookies 1-3) on the store
    under test, each bookie registered and voting in its own session; auditors and workers made by the tests."""

    def __init__(self, root: Path, backend: MetadataBackend) -> None:
        self.backend = backend
        self.run = AutorecoveryRun(str(root), RunConfig(entries=4, max_stops=4), backend.open)
        self.cluster, self.bookies, self.sessions = self.run.cluster, self.run.bookies, self.run.sessions
        self.admin, self.ledgers, self.ledger_id = self.run.admin, self.run.ledgers, self.run.ledger_id

    def bookie_stops(self, address: str) -> None:
        assert self.run.bookie_stops(address)

    def bookie_comes_back(self, address: str) -> None:
        assert self.run.bookie_comes_back(address)

    def auditor(self, mutant: str | None = None) -> Auditor:
        elected = current_auditor(self.admin)
        assert elected is not None
        return Auditor(self.sessions[elected], elected, mutant=mutant)

    def worker(self, bookie: str, mutant: str | None = None) -> ReplicationWorker:
        return ReplicationWorker(self.backend.open, self.bookies, bookie, mutant=mutant)

    def metadata(self) -> LedgerMetadata:
        return self.ledgers.read(self.ledger_id).metadata

    def holds(self, address: str) -> list[int]:
        return sorted(self.cluster.nodes[address].view(self.ledger_id).entries)

    def live_replicas(self) -> dict[int, list[str]]:
        """Each entry's bookies that its write set names, that are up and hold it."""
        metadata = self.metadata()
        return {
            e: sorted(b for b in write_set(metadata, e) if self.cluster.nodes[b].up and e in self.holds(b))
            for e in range(metadata.last_entry_id + 1)
        }


@pytest.fixture
def world(tmp_path: Path, metadata_backend: MetadataBackend) -> Cluster:
    return Cluster(tmp_path / "bookies", metadata_backend)


# -- znodes --------------------------------------------------------------------------------
def test_znode_paths_are_bookkeepers() -> None:
    assert PATHS.mark(1) == "/ledgers/underreplication/ledgers/0000/0000/0000/0001/urL0000000001"
    assert PATHS.mark(0x0001_0002_0003_ABCD).startswith("/ledgers/underreplication/ledgers/0001/0002/0003/abcd/urL")
    assert PATHS.lock(42) == "/ledgers/underreplication/locks/urL0000000042"
    assert PATHS.ledger_of(PATHS.mark(0x0001_0002_0003_ABCD)) == 0x0001_0002_0003_ABCD
    assert PATHS.vote_number("V_0000000007") == 7


def test_znode_data_is_text_format_protobuf_and_bad_data_names_the_znode() -> None:
    data = encode_underreplicated(["bookie-1:3181", "bookie-2:3181"], 1700000000000)
    assert data.decode().splitlines() == [
        'replica: "bookie-1:3181"',
        'replica: "bookie-2:3181"',
        "ctime: 1700000000000",
    ]
    assert decode_underreplicated("/m", data) == ["bookie-1:3181", "bookie-2:3181"]
    with pytest.raises(AutorecoveryZnodeError, match=r"^/ledgers/x: its data is not a UnderreplicatedLedgerFormat"):
        decode_underreplicated("/ledgers/x", b"replica: 12 13")
    with pytest.raises(AutorecoveryZnodeError, match="not an under-replication znode"):
        PATHS.ledger_of("/ledgers/underreplication/ledgers/0000/0000/0000/0001/L0001")
    with pytest.raises(AutorecoveryZnodeError, match="not an auditor vote"):
        PATHS.vote_number("V_x")


# -- fragments -----------------------------------------------------------------------------
def _closed(segments: list[tuple[int, tuple[str, ...]]], last: int) -> LedgerMetadata:
    return LedgerMetadata(
        7, 3, 2, 2, [Segment(first, ensemble) for first, ensemble in segments], LedgerState.CLOSED, last, 10
    )


def test_fragments_follow_round_robin_striping_per_segment() -> None:
    # Entry e goes to ensemble indices e % 3 and (e + 1) % 3 of its segment's ensemble.
    metadata = _closed([(0, ("a", "b", "c")), (3, ("d", "b", "c"))], 4)
    assert [(f.first_entry_id, f.bookie, f.entries) for f in fragments(metadata)] == [
        (0, "a", (0, 2)),
        (0, "b", (0, 1)),
        (0, "c", (1, 2)),
        (3, "d", (3,)),
        (3, "b", (3, 4)),
        (3, "c", (4,)),
    ]


def test_a_fragment_is_lost_when_its_bookie_is_away_or_lacks_its_first_or_last_entry() -> None:
    metadata = _closed([(0, ("a", "b", "c"))], 3)  # a: 0, 2, 3; b: 0, 1, 3; c: 1, 2
    held = {"a": {0, 2, 3}, "b": {0, 1}, "c": {1, 2}}  # b lacks its last entry, 3
    lost = lost_fragments(metadata, {"b", "c"}, lambda bookie, _, e: e in held[bookie])
    assert [(f.bookie, f.entries) for f in lost] == [("a", (0, 2, 3)), ("b", (0, 1, 3))]
    with pytest.raises(ValueError, match="not closed"):
        fragments(LedgerMetadata(7, 3, 2, 2, [Segment(0, ("a", "b", "c"))]))


def test_a_bookie_a_short_segment_stores_nothing_on_is_lost_only_while_it_is_away() -> None:
    metadata = _closed([(0, ("a", "b", "c")), (1, ("d", "b", "c"))], 2)  # entry 0 on a, b only
    assert [(f.first_entry_id, f.bookie, f.entries) for f in fragments(metadata)][:3] == [
        (0, "a", (0,)),
        (0, "b", (0,)),
        (0, "c", ()),
    ]
    everything = lambda *_: True  # noqa: E731
    assert [(f.first_entry_id, f.bookie) for f in lost_fragments(metadata, {"a", "b", "d"}, everything)] == [
        (0, "c"),
        (1, "c"),
    ]
    assert lost_fragments(metadata, {"a", "b", "c", "d"}, lambda *_: False)[0].bookie == "a"


# -- election and marks ----------------------------------------------------------------------
def test_the_lowest_vote_is_the_auditor_and_the_next_takes_over_when_its_session_ends(world: Cluster) -> None:
    assert current_auditor(world.admin) == "bookie-1"
    assert available_bookies(world.admin) == {"bookie-1", "bookie-2", "bookie-3", "bookie-4"}
    world.bookie_stops("bookie-1")
    assert current_auditor(world.admin) == "bookie-2"
    assert available_bookies(world.admin) == {"bookie-2", "bookie-3", "bookie-4"}
    world.bookie_comes_back("bookie-1")  # its new vote is the newest: it stands last in line
    assert current_auditor(world.admin) == "bookie-2"


def test_a_mark_gains_the_bookies_found_lost_later_and_survives_a_worker_that_locked_it_before(
    world: Cluster,
) -> None:
    marks = UnderreplicationManager(world.admin)
    assert marks.mark(world.ledger_id, ["bookie-1"]) is True
    lock = UnderreplicationManager(world.backend.open(), owner="bookie-4").try_lock(world.ledger_id)
    assert lock is not None
    assert marks.mark(world.ledger_id, ["bookie-1"]) is False  # named already: nothing changes
    assert marks.mark(world.ledger_id, ["bookie-2"]) is True
    assert marks.lost_bookies(world.ledger_id) == ["bookie-1", "bookie-2"]
    # The worker saw the mark before bookie-2 was added: it may not remove it.
    assert marks.mark_replicated(lock) is False
    assert marks.marked_ledgers() == [world.ledger_id]
    assert decode_lock(PATHS.lock(world.ledger_id), world.admin.get(PATHS.lock(world.ledger_id)).value) == "bookie-4"


def test_a_lock_is_held_by_one_session_and_goes_with_it(world: Cluster) -> None:
    UnderreplicationManager(world.admin).mark(world.ledger_id, ["bookie-1"])
    first, second = world.backend.open(), world.backend.open()
    assert UnderreplicationManager(first).try_lock(world.ledger_id) is not None
    assert UnderreplicationManager(second).try_lock(world.ledger_id) is None
    first.close()
    assert UnderreplicationManager(second).try_lock(world.ledger_id) is not None


# -- the auditor and the workers -------------------------------------------------------------
def test_a_lost_bookie_is_marked_copied_and_replaced_and_the_mark_removed(world: Cluster) -> None:
    assert world.metadata().segments == (Segment(0, ("bookie-1", "bookie-2", "bookie-3")),)
    assert world.holds("bookie-1") == [0, 2, 3]
    world.bookie_stops("bookie-1")
    assert {e: len(r) for e, r in world.live_replicas().items()} == {0: 1, 1: 2, 2: 1, 3: 1}

    auditor = world.auditor()
    assert auditor.bookie_id == "bookie-2"
    assert auditor.check_bookies() == {"bookie-1": {world.ledger_id}}
    assert UnderreplicationManager(world.admin).lost_bookies(world.ledger_id) == ["bookie-1"]

    worker = world.worker("bookie-3")
    steps = worker.run()
    assert steps == [
        "WorkerTakesLock",
        "WorkerStartsFragment",
        *["WorkerCopiesEntry"] * 3,
        "WorkerUpdatesEnsemble",
        "WorkerReleasesLock",
    ]
    assert world.metadata().segments == (Segment(0, ("bookie-4", "bookie-2", "bookie-3")),)
    assert world.metadata().state is LedgerState.CLOSED
    assert world.holds("bookie-4") == [0, 2, 3]
    assert all(len(r) == 2 for r in world.live_replicas().values())
    assert UnderreplicationManager(world.admin).marked_ledgers() == []
    assert world.admin.exists(PATHS.lock(world.ledger_id)) is None
    # The copies are the stored entries, readable by a client through the new metadata.
    reader = BookKeeperClient(9, world.ledgers, world.cluster, placement=OrderedPlacement())
    world.cluster.attach(reader)
    handle = reader.open_ledger(world.ledger_id)
    assert handle.last_add_confirmed == 3


def test_a_worker_that_crashes_mid_copy_loses_its_lock_and_another_finishes(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.auditor().check_bookies()
    first = world.worker("bookie-3")
    for step in ("WorkerTakesLock", "WorkerStartsFragment", "WorkerCopiesEntry"):
        assert first.step(step), step
    assert world.holds("bookie-4") == [0]
    first.WorkerCrashes()
    assert world.admin.exists(PATHS.lock(world.ledger_id)) is None
    assert world.metadata().ensemble_for(0) == ("bookie-1", "bookie-2", "bookie-3")  # nothing swapped yet

    second = world.worker("bookie-2")
    assert second.run().count("WorkerCopiesEntry") == 2  # entry 0 is on bookie-4 already
    assert world.metadata().ensemble_for(0) == ("bookie-4", "bookie-2", "bookie-3")
    assert UnderreplicationManager(world.admin).marked_ledgers() == []
    assert first.run() == []  # the crashed worker, back on a new session, finds nothing to do


def test_a_bookie_back_before_the_worker_leaves_nothing_to_copy(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.auditor().check_bookies()
    world.bookie_comes_back("bookie-1")
    assert world.worker("bookie-4").run() == ["WorkerTakesLock", "WorkerReleasesLock"]
    assert world.metadata().ensemble_for(0) == ("bookie-1", "bookie-2", "bookie-3")
    assert UnderreplicationManager(world.admin).marked_ledgers() == []


def test_a_bookie_back_with_an_empty_disk_is_lost_by_its_first_and_last_entries(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.cluster.nodes["bookie-1"].lose_disk()
    world.auditor().check_bookies()
    world.bookie_comes_back("bookie-1")
    assert world.holds("bookie-1") == []
    steps = world.worker("bookie-4").run()
    assert steps.count("WorkerCopiesEntry") == 3
    assert world.metadata().ensemble_for(0) == ("bookie-4", "bookie-2", "bookie-3")


def test_the_worker_gives_up_when_its_new_bookie_stops(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.auditor().check_bookies()
    worker = world.worker("bookie-2")
    assert worker.step("WorkerTakesLock") and worker.step("WorkerStartsFragment")
    assert worker.task is not None and worker.task.new == "bookie-4"
    world.bookie_stops("bookie-4")
    assert worker.enabled() == ["WorkerGivesUp"]
    assert worker.run() == ["WorkerGivesUp", "WorkerReleasesLock"]  # no bookie left to copy to
    assert UnderreplicationManager(world.admin).marked_ledgers() == [world.ledger_id]


def test_a_failed_pass_releases_the_lock_and_keeps_the_mark_for_the_next_worker(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.auditor().check_bookies()
    first = world.worker("bookie-2")
    assert first.step("WorkerTakesLock")
    # bookie-4 is there to copy to; a pass whose copy failed (a timeout) leaves the fragment and the lock
    assert first.enabled() == ["WorkerStartsFragment", "WorkerReleasesLockAfterFailure"]
    assert first.step("WorkerReleasesLockAfterFailure")
    assert world.admin.exists(PATHS.lock(world.ledger_id)) is None
    assert UnderreplicationManager(world.admin).lost_bookies(world.ledger_id) == ["bookie-1"]
    assert not first.step("WorkerReleasesLockAfterFailure")  # it holds no lock now
    assert world.worker("bookie-3").run()[-2:] == ["WorkerUpdatesEnsemble", "WorkerReleasesLock"]
    assert UnderreplicationManager(world.admin).marked_ledgers() == []


def test_the_failed_pass_unmarks_mutant_leaves_a_lost_bookie_unmarked(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.auditor().check_bookies()
    worker = world.worker("bookie-2", mutant="failed_pass_unmarks")
    assert worker.step("WorkerTakesLock") and worker.step("WorkerReleasesLockAfterFailure")
    assert UnderreplicationManager(world.admin).marked_ledgers() == []
    assert world.metadata().ensemble_for(0) == ("bookie-1", "bookie-2", "bookie-3")  # bookie-1 still named, lost


def test_a_bookie_of_two_segments_leaves_two_fragments_each_sent_outside_its_own_ensemble(tmp_path: Path) -> None:
    run = AutorecoveryRun(str(tmp_path), RunConfig(segments=2, entries=4))
    ledgers = run.ledgers
    assert ledgers.read(run.ledger_id).metadata.segments == (
        Segment(0, ("bookie-1", "bookie-2", "bookie-3")),
        Segment(1, ("bookie-4", "bookie-2", "bookie-3")),  # the writer's ensemble change at entry 1
    )
    AutorecoveryRefinement(run)
    run.bookie_stops("bookie-2")
    run.elect_auditor()
    run.auditor_checks()
    worker = run.workers[0]
    assert worker.run().count("WorkerUpdatesEnsemble") == 2
    assert ledgers.read(run.ledger_id).metadata.segments == (
        Segment(0, ("bookie-1", "bookie-4", "bookie-3")),
        Segment(1, ("bookie-4", "bookie-1", "bookie-3")),
    )
    run.close()


def test_a_run_refuses_a_ledger_the_spec_cannot_model() -> None:
    with pytest.raises(ValueError, match="2 segments need at least 2 entries, got 1"):
        RunConfig(segments=2, entries=1)
    with pytest.raises(ValueError, match="two segments need a bookie outside the first ensemble"):
        RunConfig(bookies=3, segments=2, entries=4)
    with pytest.raises(ValueError, match="unknown autorecovery mutant"):
        RunConfig(mutant="nope")
    with pytest.raises(ValueError, match="an open ledger of two segments needs write_quorum == ensemble"):
        RunConfig(open_ledger=True, segments=2, entries=2)


# -- the mutants -----------------------------------------------------------------------------
def test_the_metadata_before_copy_mutant_names_a_bookie_that_lacks_the_fragment(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    world.auditor().check_bookies()
    worker = world.worker("bookie-3", mutant="metadata_before_copy")
    assert worker.step("WorkerTakesLock") and worker.step("WorkerStartsFragment")
    assert world.metadata().ensemble_for(0) == ("bookie-4", "bookie-2", "bookie-3")
    assert world.holds("bookie-4") == []  # named for entries 0, 2, 3, holding none
    assert worker.task == worker.task.__class__(Fragment(world.ledger_id, 0, "bookie-1", (0, 2, 3)), "bookie-4")


def test_the_marks_nothing_mutant_finds_the_lost_bookie_and_marks_no_ledger(world: Cluster) -> None:
    world.bookie_stops("bookie-1")
    assert world.auditor(mutant="marks_nothing").check_bookies() == {"bookie-1": {world.ledger_id}}
    assert UnderreplicationManager(world.admin).marked_ledgers() == []
    assert world.worker("bookie-4").run() == []


def test_only_the_elected_auditor_checks_and_unknown_mutants_are_refused(world: Cluster) -> None:
    with pytest.raises(RuntimeError, match="bookie-3 is not the elected auditor"):
        Auditor(world.sessions["bookie-3"], "bookie-3").check_bookies()
    with pytest.raises(ValueError, match="unknown auditor mutant 'x'; known: marks_nothing"):
        Auditor(world.admin, "bookie-1", mutant="x")
    known = "metadata_before_copy, failed_pass_unmarks, copies_open_fragment"
    with pytest.raises(ValueError, match=f"unknown worker mutant 'x'; known: {known}"):
        world.worker("bookie-1", mutant="x")
    with pytest.raises(ValueError, match="unknown worker step 'Nap'"):
        world.worker("bookie-1").step("Nap")


def test_the_benchmark_repairs_the_ledger_in_each_setting_and_the_oracle_accepts_its_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The benchmark's own checks: each pass swaps bookie 4 in, and every recorded trace conforms."""
    from ledgerspec.tools.bench.autorecovery import main as bench

    assert bench(["--entries", "30", "--traces", "4"]) == 0
    out = capsys.readouterr().out
    assert out.count("│ 20 ") == 3  # 20 entries copied in each of the three settings
    assert "│ metadata │ 4 " in out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_runs_refine_the_spec_on_each_store(
    seed: int, tmp_path: Path, metadata_backend: MetadataBackend
) -> None:
    """Seeded random runs, as ``simulate autorecovery`` records them, with every session on the store under test
    (ZooKeeper included), checked step by step against the spec."""
    run = AutorecoveryRun(str(tmp_path), RunConfig(workers=2), metadata_backend.open)
    check = AutorecoveryRefinement(run)
    random_steps(run, random.Random(seed), 60)
    assert check.steps >= 5
    assert [e.action for e in run.events].count("AuditorIsElected") >= 1
    run.close()


def test_a_bookie_that_comes_back_empty_is_found_by_the_check_of_all_ledgers_alone(tmp_path: Path) -> None:
    """A bookie whose disk was replaced starts formatted under its id: available, so the bookie check finds
    nothing; the check of all ledgers reads its fragment's first and last entries, marks it, and a worker
    repairs the ledger."""
    run = AutorecoveryRun(str(tmp_path), RunConfig(entries=4))
    AutorecoveryRefinement(run)  # every step below is checked against the spec as it is taken
    try:
        assert run.bookie_stops("bookie-1") and run.bookie_loses_disk("bookie-1")
        assert run.bookie_comes_back("bookie-1")
        assert run.cluster.nodes["bookie-1"].view(run.ledger_id).entries == frozenset()
        assert run.elect_auditor()
        assert not run.auditor_checks()  # every bookie the metadata names is available
        assert UnderreplicationManager(run.admin).marked_ledgers() == []
        assert run.auditor_checks_all_ledgers()
        assert UnderreplicationManager(run.admin).lost_bookies(run.ledger_id) == ["bookie-1"]
        assert not run.auditor_checks_all_ledgers()  # the mark names it already: no step
        assert run.workers[0].run().count("WorkerUpdatesEnsemble") == 1
        assert run.ledgers.read(run.ledger_id).metadata.segments == (Segment(0, ("bookie-4", "bookie-2", "bookie-3")),)
        assert UnderreplicationManager(run.admin).marked_ledgers() == []
    finally:
        run.close()


# -- an open ledger --------------------------------------------------------------------------
# The default ledger (E=3, Qw=2, Qa=2, on four bookies), open: one bookie of an entry's write set down leaves the
# write-back of a recovery one ack short, and the recovery replaces it by the spare bookie 4; two bookies of the
# ensemble down leave a write set without a reply, and the ledger cannot be opened.
DEFAULT_OPEN = RunConfig(workers=2, open_ledger=True)
# Every entry on the three bookies of the ensemble, an add acknowledged by two: one bookie down at a time leaves the
# LAC readable and the ledger recoverable without an ensemble change.
OPEN = RunConfig(write_quorum=3, ack_quorum=2, entries=3, workers=2, max_stops=1, max_disk_losses=0, open_ledger=True)
# Two segments (bookie 4 took bookie 1's place from entry 1), the last starting past the LAC: a recovery's ensemble
# change would replace it in place.
OPEN_TWO_SEGMENTS = RunConfig(write_quorum=3, ack_quorum=2, segments=2, workers=2, open_ledger=True)
OPEN_CONFIGS = {"default": DEFAULT_OPEN, "qw3": OPEN, "two-segments": OPEN_TWO_SEGMENTS}


def test_an_open_ledger_run_is_the_spec_with_open_ledger_and_its_bookies_hold_the_lac_of_the_last_add(
    tmp_path: Path,
) -> None:
    assert OPEN.spec_constants()["OpenLedger"] == 1 and RunConfig().spec_constants()["OpenLedger"] == 0
    assert (OPEN.spec_constants()["Qw"], OPEN.spec_constants()["Qa"]) == (3, 2)
    assert (DEFAULT_OPEN.spec_constants()["Qw"], DEFAULT_OPEN.spec_constants()["Qa"]) == (2, 2)  # Qa: Qw by default
    run = AutorecoveryRun(str(tmp_path), OPEN)
    try:
        metadata = run.ledgers.read(run.ledger_id).metadata
        assert metadata.state is LedgerState.OPEN and run.can_writer_close()
        assert {node.view(run.ledger_id).lac for node in run.cluster.nodes.values()} == {1, -1}  # bookie-4: none
        assert read_last_add_confirmed(metadata, run.bookies) == 1
        # The last segment is open: its fragments end at the LAC, and none is closed.
        assert [(f.bookie, f.entries, f.closed) for f in fragments(metadata, 1)] == [
            ("bookie-1", (0, 1), False),
            ("bookie-2", (0, 1), False),
            ("bookie-3", (0, 1), False),
        ]
    finally:
        run.close()


def test_an_open_ledgers_closed_fragments_are_those_before_the_last_segment_once_the_lac_reaches_it() -> None:
    metadata = LedgerMetadata(7, 3, 2, 2, [Segment(0, ("a", "b", "c")), Segment(3, ("d", "b", "c"))])
    assert [(f.first_entry_id, f.bookie, f.entries, f.closed) for f in fragments(metadata, 3)] == [
        (0, "a", (0, 2), True),
        (0, "b", (0, 1), True),
        (0, "c", (1, 2), True),
        (3, "d", (3,), False),
        (3, "b", (3,), False),
        (3, "c", (), False),
    ]
    assert [f.closed for f in fragments(metadata, 1)] == [False] * 6  # entry 2 may still be written
    assert last_segment_open_and_missing(metadata, 3, {"a", "b", "c", "d"}) is False
    assert last_segment_open_and_missing(metadata, 3, {"b", "c", "d"}) is False  # bookie a: a closed segment
    assert last_segment_open_and_missing(metadata, 1, {"b", "c", "d"}) is True  # the segment before is open too


def _open_run(tmp_path: Path, config: RunConfig = OPEN) -> AutorecoveryRun:
    run = AutorecoveryRun(str(tmp_path), config)
    AutorecoveryRefinement(run)  # every step below is checked against the spec as it is taken
    return run


def _pass(run: AutorecoveryRun, w: int) -> list[str]:
    """Worker w's pass, each step taken through the run (and so checked): the first enabled step, from taking
    the lock to releasing it."""
    taken: list[str] = []
    while steps := run.enabled_worker_steps(w):
        assert run.worker_step(w, steps[0])
        taken.append(steps[0])
        if run.workers[w - 1].lock is None:
            break
    return taken


def _defer(run: AutorecoveryRun, w: int = 1) -> None:
    """The auditor marks the ledger (unless it did already), and worker w's pass defers it to the grace period."""
    assert run.auditor is not None or run.elect_auditor()
    assert not run.auditor_has_news() or run.auditor_checks()
    assert run.worker_step(w, "WorkerTakesLock")
    assert run.enabled_worker_steps(w) == ["WorkerDefersLock"]  # nothing closed to copy, nothing to release
    assert run.worker_step(w, "WorkerDefersLock")
    assert run.enabled_worker_steps(w) == ["WorkerEndsGracePeriod"]


def test_the_grace_period_ends_in_a_recovery_that_closes_the_ledger_and_fences_its_writer(tmp_path: Path) -> None:
    """Qw=3, Qa=2: the write-back of entry 2 gets its Qa acks from bookies 1 and 3, and the recovery closes the
    ledger with its ensemble as it was (the event's nb is NO_ONE)."""
    run = _open_run(tmp_path)
    try:
        assert run.bookie_stops("bookie-2")
        _defer(run)
        assert run.worker_step(1, "WorkerEndsGracePeriod")
        assert run.events[-1].args == (1, 0)
        metadata = run.ledgers.read(run.ledger_id).metadata
        assert metadata.state is LedgerState.CLOSED and metadata.last_entry_id == 2
        assert metadata.segments == (Segment(0, ("bookie-1", "bookie-2", "bookie-3")),)  # no ensemble change
        marks = UnderreplicationManager(run.admin)
        assert marks.lost_bookies(run.ledger_id) == ["bookie-2"] and marks.holder(run.ledger_id) is None
        # The writer was fenced: its close fails, a refused step that logs nothing; so does an add.
        logged = len(run.events)
        assert not run.writer_closes_ledger()
        assert len(run.events) == logged and not run.can_writer_close()
        assert run.writer is not None
        with pytest.raises(LedgerFencedError):
            run.writer.close().result(timeout=0)
        # The closed ledger's fragment on bookie-2 is copied by the next pass.
        assert _pass(run, 2)[-2:] == ["WorkerUpdatesEnsemble", "WorkerReleasesLock"]
        assert marks.marked_ledgers() == []
        assert [e.action for e in run.events].count("WorkerEndsGracePeriod") == 1
    finally:
        run.close()


def test_a_recovery_one_ack_short_replaces_the_bookie_that_is_down_in_a_new_segment(tmp_path: Path) -> None:
    """Qw=Qa=2: bookie 2, of entry 1's write set, is down; the write-back of entry 1 (past the LAC 0) gets one ack,
    and the recovery replaces bookie 2 by bookie 4 from entry 1 on (ReadOnlyLedgerHandle.handleBookieFailure).
    The event names bookie 4; the spec's meta_version counts the change, not the close."""
    run = AutorecoveryRun(str(tmp_path), DEFAULT_OPEN)
    check = AutorecoveryRefinement(run)
    try:
        assert run.bookie_stops("bookie-2")
        _defer(run)
        assert run.worker_step(1, "WorkerEndsGracePeriod")
        assert run.events[-1].action == "WorkerEndsGracePeriod" and run.events[-1].args == (1, 4)
        metadata = run.ledgers.read(run.ledger_id).metadata
        assert metadata.state is LedgerState.CLOSED and metadata.last_entry_id == 1
        assert metadata.segments == (
            Segment(0, ("bookie-1", "bookie-2", "bookie-3")),
            Segment(1, ("bookie-1", "bookie-4", "bookie-3")),
        )
        assert sorted(run.cluster.nodes["bookie-4"].view(run.ledger_id).entries) == [1]
        assert check.state.meta_version == 2 and check.state.closed
        # The next pass copies what bookie 2 holds of the first segment, entry 0, to bookie 4 (outside that
        # segment's ensemble), and the mark goes.
        assert UnderreplicationManager(run.admin).lost_bookies(run.ledger_id) == ["bookie-2"]
        assert _pass(run, 2)[-2:] == ["WorkerUpdatesEnsemble", "WorkerReleasesLock"]
        assert run.ledgers.read(run.ledger_id).metadata.segments == (
            Segment(0, ("bookie-1", "bookie-4", "bookie-3")),
            Segment(1, ("bookie-1", "bookie-4", "bookie-3")),
        )
        assert UnderreplicationManager(run.admin).marked_ledgers() == [] and check.state.meta_version == 3
    finally:
        run.close()


def test_a_recovery_one_ack_short_with_no_spare_bookie_fails_and_a_later_one_replaces(tmp_path: Path) -> None:
    """Bookie 4, the only bookie outside the ensemble, and bookie 2 are down: the write-back cannot get Qa acks nor
    change the ensemble, and the recovery fails (the ledger stays open, in recovery, and the writer fenced). Once
    bookie 4 is back, the next grace period's recovery replaces bookie 2 by it."""
    run = _open_run(tmp_path, DEFAULT_OPEN)
    try:
        assert run.bookie_stops("bookie-4") and run.bookie_stops("bookie-2")
        _defer(run)
        assert run.worker_step(1, "WorkerEndsGracePeriod")
        assert run.events[-1].args == (1, 0)
        metadata = run.ledgers.read(run.ledger_id).metadata
        assert not metadata.closed and metadata.segments == (Segment(0, ("bookie-1", "bookie-2", "bookie-3")),)
        marks = UnderreplicationManager(run.admin)
        assert marks.lost_bookies(run.ledger_id) == ["bookie-2"] and marks.holder(run.ledger_id) is None
        logged = len(run.events)
        assert not run.writer_closes_ledger() and len(run.events) == logged  # in recovery: the writer's close fails
        assert run.bookie_comes_back("bookie-4")
        _defer(run, 2)
        assert run.worker_step(2, "WorkerEndsGracePeriod") and run.events[-1].args == (2, 4)
        assert run.ledgers.read(run.ledger_id).metadata.closed
    finally:
        run.close()


def test_a_worker_that_cannot_open_the_ledger_releases_the_lock_and_keeps_the_mark(tmp_path: Path) -> None:
    """Bookies 2 and 3 down: entry 1's write set has no reply to the LAC read, openLedgerNoRecovery fails, and the
    pass releases the lock (logBKExceptionAndReleaseLedger), the mark kept; the auditor's check of all ledgers
    cannot open it either, and changes nothing."""
    run = _open_run(tmp_path, DEFAULT_OPEN)
    try:
        assert run.bookie_stops("bookie-2") and run.elect_auditor() and run.auditor_checks()
        assert run.worker_step(1, "WorkerTakesLock") and run.bookie_stops("bookie-3")
        metadata = run.ledgers.read(run.ledger_id).metadata
        assert read_last_add_confirmed(metadata, run.bookies) is None
        assert run.enabled_worker_steps(1) == ["WorkerReleasesLockAfterFailure"]
        assert run.worker_step(1, "WorkerReleasesLockAfterFailure")
        marks = UnderreplicationManager(run.admin)
        assert marks.lost_bookies(run.ledger_id) == ["bookie-2"] and marks.holder(run.ledger_id) is None
        assert run.auditor_checks()  # bookie 3 is found lost
        assert not run.auditor_checks_all_ledgers()
        assert not run.ledgers.read(run.ledger_id).metadata.closed
    finally:
        run.close()


def test_a_disk_is_lost_only_once_the_ledger_is_closed(tmp_path: Path) -> None:
    run = _open_run(tmp_path, DEFAULT_OPEN)
    try:
        assert run.bookie_stops("bookie-1")
        logged = len(run.events)
        assert run.can_lose_disk() == [] and not run.bookie_loses_disk("bookie-1") and len(run.events) == logged
        assert run.writer_closes_ledger()
        assert run.can_lose_disk() == ["bookie-1"] and run.bookie_loses_disk("bookie-1")
        assert run.events[-1].action == "BookieLosesDisk"
    finally:
        run.close()


def test_a_writer_fenced_by_the_grace_periods_recovery_fails_its_next_add(tmp_path: Path) -> None:
    run = _open_run(tmp_path)
    try:
        assert run.bookie_stops("bookie-3")
        _defer(run)
        assert run.worker_step(1, "WorkerEndsGracePeriod")
        assert run.writer is not None
        adding = run.writer.add_entry(b"entry 3")
        run.cluster.run_until(lambda: adding.done())
        with pytest.raises(LedgerFencedError):
            adding.result()
        assert all(3 not in node.view(run.ledger_id).entries for node in run.cluster.nodes.values())
    finally:
        run.close()


def test_a_writer_that_closes_in_the_grace_period_leaves_the_worker_nothing_to_recover(tmp_path: Path) -> None:
    run = _open_run(tmp_path)
    try:
        assert run.bookie_stops("bookie-1")
        _defer(run)
        assert run.writer_closes_ledger()
        assert run.events[-1].action == "WriterClosesLedger" and run.events[-1].process == "writer"
        version = run.ledgers.read(run.ledger_id).version
        assert run.worker_step(1, "WorkerEndsGracePeriod") and run.events[-1].args == (1, 0)
        assert run.ledgers.read(run.ledger_id).version == version  # no recovery: the writer closed it
        assert _pass(run, 1)[-2:] == ["WorkerUpdatesEnsemble", "WorkerReleasesLock"]
        assert run.ledgers.read(run.ledger_id).metadata.segments == (Segment(0, ("bookie-4", "bookie-2", "bookie-3")),)
    finally:
        run.close()


def test_a_grace_period_that_cannot_open_the_ledger_ends_in_no_recovery(tmp_path: Path) -> None:
    """Every bookie of the ensemble down: no LAC read, no fencing, no recovery; the lock is released, the ledger
    stays open and marked."""
    run = _open_run(tmp_path, attrs.evolve(OPEN, max_stops=3))
    try:
        assert run.bookie_stops("bookie-1")
        _defer(run)
        assert run.bookie_stops("bookie-2") and run.bookie_stops("bookie-3")
        assert run.worker_step(1, "WorkerEndsGracePeriod")
        assert run.ledgers.read(run.ledger_id).metadata.state is LedgerState.OPEN
        marks = UnderreplicationManager(run.admin)
        assert marks.lost_bookies(run.ledger_id) == ["bookie-1"] and marks.holder(run.ledger_id) is None
    finally:
        run.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("config", sorted(OPEN_CONFIGS))
def test_random_runs_of_an_open_ledger_refine_the_spec(config: str, seed: int, tmp_path: Path) -> None:
    """Bookies stop (two in the default ledger and with two segments), come back, and lose their disks once the
    ledger is closed; every step checked against the spec."""
    run = _open_run(tmp_path, OPEN_CONFIGS[config])
    try:
        random_steps(run, random.Random(seed), 100)
        assert {"AuditorIsElected", "BookieStops"} <= {e.action for e in run.events}
    finally:
        run.close()


@pytest.mark.parametrize(
    ("config", "seeds", "wanted"),
    [
        (
            "default",
            range(0, 20),
            {
                "BookieStops",
                "BookieLosesDisk",
                "WorkerCrashes",
                "WriterClosesLedger",
                "WorkerDefersLock",
                "WorkerReleasesLockAfterFailure",
                "WorkerUpdatesEnsemble",
                "WorkerEndsGracePeriod(nb=0)",
                "WorkerEndsGracePeriod(nb=4)",
            },
        ),
        (
            "qw3",
            range(12, 30),
            {
                "BookieStops",
                "WorkerCrashes",
                "WriterClosesLedger",
                "WorkerDefersLock",
                "WorkerEndsGracePeriod(nb=0)",
                "WorkerUpdatesEnsemble",
            },
        ),
    ],
)
def test_random_runs_of_an_open_ledger_take_each_of_its_steps(
    config: str, seeds: range, wanted: set[str], tmp_path: Path
) -> None:
    """Bookies stop and come back, workers crash, writers close, passes defer or fail to open the ledger, and grace
    periods end in recoveries, with an ensemble change or without: each in some run, every step checked against
    the spec."""
    taken: set[str] = set()
    recovered = 0
    for seed in seeds:
        run = _open_run(tmp_path / str(seed), OPEN_CONFIGS[config])
        try:
            random_steps(run, random.Random(seed), 100)
            actions = [e.action for e in run.events]
            taken.update(actions)
            taken.update(f"{e.action}(nb={e.args[1]})" for e in run.events if e.action == "WorkerEndsGracePeriod")
            closed = run.ledgers.read(run.ledger_id).metadata.state is LedgerState.CLOSED
            recovered += closed and "WriterClosesLedger" not in actions
        finally:
            run.close()
    assert wanted <= taken, wanted - taken
    assert recovered >= 1  # a grace period ended in a recovery that closed the ledger
