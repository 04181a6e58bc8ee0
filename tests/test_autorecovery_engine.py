"""The reference auditor and replication workers, on the in-process cluster and each metadata store.

A closed ledger is written by the reference client; bookies register and
vote in sessions of their own; a bookie stops (its session ends with it),
the elected auditor marks the ledger, and workers copy the lost fragment and
swap the bookie in the metadata, one spec step at a time.
"""

from __future__ import annotations

import random
from pathlib import Path

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
from ledgerspec.reference.autorecovery.fragments import write_set
from ledgerspec.reference.autorecovery.trace import random_steps
from ledgerspec.reference.autorecovery.znodes import decode_lock, decode_underreplicated, encode_underreplicated
from ledgerspec.reference.ledger import BookKeeperClient, OrderedPlacement
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
    with pytest.raises(ValueError, match="unknown worker mutant 'x'; known: metadata_before_copy, failed_pass_unmarks"):
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
