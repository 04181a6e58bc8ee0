---------------------------- MODULE autorecovery ----------------------------
(***************************************************************************)
(* Apache BookKeeper autorecovery: the auditor, under-replication marking  *)
(* and the re-replication of lost fragments.  The twin of                  *)
(* spec/autorecovery/autorecovery.py: same variables, actions and invariants by the     *)
(* same names; TLC and the Python explorer reach the same states.          *)
(*                                                                         *)
(* Modelled (bookkeeper-server/.../replication/ and client/, BRIEF         *)
(* section 5, seed 001):                                                   *)
(*  - one ledger, each entry on every bookie of its write set, in one     *)
(*    segment or two (the second after an ensemble change that replaced    *)
(*    bookie 1 by bookie E + 1 from entry 1 on); closed, or with           *)
(*    OpenLedger = 1 open, its writer alive or gone;                       *)
(*  - bookies stop (leaving the available set, keeping their data) and     *)
(*    come back; a stopped bookie may lose its disk, and come back         *)
(*    formatted, empty, under the same id;                                 *)
(*  - auditor election (ZkLedgerAuditorManager: the lowest ephemeral       *)
(*    vote wins; the vote goes with the auditor's session);                *)
(*  - the auditor's bookie check (AuditorBookieCheckTask): bookies the     *)
(*    metadata names that are not available are lost, and a ledger with a  *)
(*    fragment on one is marked under-replicated, the mark naming them;    *)
(*  - the auditor's periodic check of all ledgers (AuditorCheckAllLedgers- *)
(*    Task), by LedgerChecker: a fragment is lost when its bookie is not   *)
(*    available or lacks the fragment's first or last entry;              *)
(*  - replication workers (ReplicationWorker.rereplicate): take the        *)
(*    ledger's lock, copy each lost fragment from live replicas to a new   *)
(*    bookie (LedgerFragmentReplicator), then replace the old bookie in    *)
(*    the segment's ensemble by compare-and-set, skipped when the old      *)
(*    bookie is gone (updateEnsembleInfo); remove the mark when nothing is *)
(*    left under-replicated, unless the auditor extended it since the lock *)
(*    was taken (a delete at that version); a worker may crash midway;    *)
(*  - a worker whose pass leaves a fragment it could have copied releases  *)
(*    the lock and leaves the mark for a later pass (deferLedgerLock-      *)
(*    ReleaseOfFailedLedger);                                              *)
(*  - an open ledger: a handle opened without recovery reads the LAC the   *)
(*    last add carried (Lac); LedgerChecker gives the last segment's       *)
(*    fragment the entries up to it, and a fragment is closed when the     *)
(*    ledger is, or when it is not the last and the LAC reaches the last   *)
(*    segment's first entry less one (LedgerFragment.isClosed).  Workers   *)
(*    copy closed fragments only; when an open one is lost or the last     *)
(*    segment misses a bookie, the worker keeps the lock for the grace     *)
(*    period (deferLedgerLockRelease), then opens the ledger with          *)
(*    recovery, which closes it, and releases the lock.  Reading the LAC   *)
(*    and fencing need Qw - Qa + 1 available bookies in every write set    *)
(*    (Covered); the recovery's write-back may replace a bookie that is    *)
(*    down, and must when the others are fewer than Qa.                    *)
(* Left out, and why: see spec/autorecovery/autorecovery.py.                            *)
(*                                                                         *)
(* Bug selects a seeded bug ("none" for the real protocol) so that tests   *)
(* can show that the checkers catch it.                                    *)
(***************************************************************************)
EXTENDS Naturals, Integers, Sequences, FiniteSets

CONSTANTS
    NumBookies,       \* bookies in the cluster, 1 .. NumBookies
    E,                \* ensemble size
    Qw,               \* write quorum: bookies each entry is stored on
    Qa,               \* ack quorum: what the open ledger's LAC read, fencing and write-back need
    NumEntries,       \* entries of the closed ledger, ids 0 .. NumEntries-1
    Segments,         \* 1, or 2 after an ensemble change at entry 1
    NumWorkers,       \* replication workers
    MaxStops,         \* bookie stops in all (a bookie that came back may stop again)
    MaxDiskLosses,    \* stopped bookies that lose their disk
    MaxWorkerCrashes, \* replication worker crashes
    OpenLedger,       \* 1: the ledger starts open, its writer alive or gone; 0: closed
    Bug               \* "none" or a seeded bug: see Bugs

Bugs == {"none", "metadata_before_copy", "auditor_marks_nothing", "copies_open_fragment",
         "grace_ends_without_recovery"}

ASSUME /\ 1 <= Qa /\ Qa <= Qw /\ Qw <= E /\ E <= NumBookies /\ NumEntries >= 1 /\ Segments \in {1, 2}
       /\ \A k \in {NumWorkers, MaxStops, MaxDiskLosses, MaxWorkerCrashes} : k \in Nat
       /\ OpenLedger \in {0, 1} /\ (OpenLedger = 1 => Qa <= 2) /\ Bug \in Bugs

NoOne == 0

VARIABLES
    \* -- metadata store: the ledger's znode and the under-replication znodes
    meta_segments,   \* sequence of <<first entry id, ensemble>>, ensemble a sequence of bookies
    meta_version,    \* bumped by every successful compare-and-set
    closed,          \* the ledger's metadata is closed (by its writer, or by a worker's recovery)
    mark,            \* the bookies the ledger's urL znode names; {}: not marked (no znode)
    lock,            \* the worker holding the ledger's replication lock (ephemeral), or NoOne
    lock_mark,       \* the mark as the lock holder read it (the version it deletes at); {} when unlocked
    auditor,         \* the bookie whose vote won the election, or NoOne
    lost_seen,       \* bookies the auditor's last check found lost and that did not come back since
    \* -- bookies
    data,            \* bookie -> entries it holds on disk
    up,              \* bookies available (registered)
    disk_lost,       \* bookies whose disk was lost; one that came back is empty, formatted
    stops,           \* bookie stops so far (at most MaxStops)
    \* -- replication workers
    workers,         \* worker -> [phase, seg, old, new, left]: the fragment it copies, the writes left
    worker_crashes   \* at most MaxWorkerCrashes

vars == <<meta_segments, meta_version, closed, mark, lock, lock_mark, auditor, lost_seen,
          data, up, disk_lost, stops, workers, worker_crashes>>

-----------------------------------------------------------------------------
Bookies == 1 .. NumBookies
Workers == 1 .. NumWorkers
Entries == 0 .. NumEntries - 1
Range(f) == {f[i] : i \in DOMAIN f}

IdleWorker == [phase |-> "IDLE", seg |-> 0, old |-> 0, new |-> 0, left |-> {}]
DeferredWorker == [IdleWorker EXCEPT !.phase = "DEFERRED"]

\* Bookies 1 .. E; with two segments, the second has bookie E + 1 in place of bookie 1.
InitialSegments ==
    IF Segments = 1 THEN << <<0, [i \in 1 .. E |-> i]>> >>
    ELSE << <<0, [i \in 1 .. E |-> i]>>, <<1, [i \in 1 .. E |-> IF i = 1 THEN E + 1 ELSE i]>> >>

\* The segment holding entry e: the last one whose first entry is <= e.
SegmentOf(segs, e) == 1 + Cardinality({i \in 2 .. Len(segs) : segs[i][1] <= e})

\* Bookies entry e is stored on: ensemble indices (e + k) % E, k < Qw (+ 1 into the sequence).
WriteSetIn(segs, e) == LET ens == segs[SegmentOf(segs, e)][2] IN {ens[((e + k) % E) + 1] : k \in 0 .. Qw - 1}

Ensemble(seg) == Range(meta_segments[seg][2])
Named == UNION {Ensemble(seg) : seg \in 1 .. Len(meta_segments)}

\* The entries of segment seg that its ensemble stores on bookie b.
FragmentEntries(seg, b) ==
    {e \in Entries : SegmentOf(meta_segments, e) = seg /\ b \in WriteSetIn(meta_segments, e)}

\* The LAC a handle opened without recovery reads: the closed ledger's last entry; an open
\* ledger's last add carried the entry before it.
Lac == IF closed THEN NumEntries - 1 ELSE NumEntries - 2

LastSeg == Len(meta_segments)
Max(a, b) == IF a >= b THEN a ELSE b

(* The last entry LedgerChecker.checkLedger gives segment seg's fragment:  *)
(* the next segment's first entry less one; for the last segment the LAC,  *)
(* or its first entry when the LAC is below it (the checker then reads it  *)
(* to learn whether it was written; here every segment's first entry was). *)
FragmentLast(seg) == IF seg < LastSeg THEN meta_segments[seg + 1][1] - 1 ELSE Max(Lac, meta_segments[seg][1])

(* LedgerFragment.isClosed: the ledger is closed, or the segment is not    *)
(* the last and the LAC reaches the last segment's first entry less one.   *)
FragmentClosed(seg) == closed \/ (seg < LastSeg /\ Lac >= meta_segments[LastSeg][1] - 1)

\* The entries of a fragment on bookie b up to its last entry: what the checker reads from and
\* the replicator copies (LedgerFragmentReplicator.replicate).
CopiedEntries(seg, b) == {e \in FragmentEntries(seg, b) : e <= FragmentLast(seg)}

(* The entries LedgerChecker.verifyLedgerFragment (release-4.17.2) reads   *)
(* of a fragment: with auditorLedgerVerificationPercentage at its default  *)
(* 0, the first and the last the bookie stores up to the fragment's last.  *)
CheckedEntries(seg, b) ==
    LET f == CopiedEntries(seg, b)
    IN {e \in f : (\A x \in f : e <= x) \/ (\A x \in f : x <= e)}

\* <<segment, bookie>>: the fragments LedgerChecker finds lost: the bookie is not available, or lacks one it reads.
UnderReplicated ==
    {<<seg, b>> \in (1 .. Len(meta_segments)) \X Bookies :
        /\ b \in Ensemble(seg)
        /\ \/ b \notin up
           \/ ~(CheckedEntries(seg, b) \subseteq data[b])}

\* The segments whose lost fragments a worker copies: closed ones only (ReplicationWorker.rereplicate
\* skips the others); the seeded bug copies open ones too.  (A set, so that TLC takes a guard on it as
\* one condition, not one successor per true disjunct.)
CopyableSegs == {seg \in 1 .. LastSeg : FragmentClosed(seg) \/ Bug = "copies_open_fragment"}

(* ReplicationWorker.isLastSegmentOpenAndMissingBookies: the ledger is     *)
(* open and a bookie of its last ensemble is not available (of the last    *)
(* two, when the LAC is below the last segment's first entry less one).    *)
LastSegmentOpenAndMissing ==
    LET named == IF LastSeg > 1 /\ Lac < meta_segments[LastSeg][1] - 1
                 THEN Ensemble(LastSeg) \cup Ensemble(LastSeg - 1) ELSE Ensemble(LastSeg)
    IN ~closed /\ ~(named \subseteq up)

\* A pass defers the ledger to the grace period: it is open, and a lost fragment is open, or its
\* last segment misses a bookie (written as a negated conjunction: one condition for TLC).
WaitsForClose ==
    /\ ~closed
    /\ ~({f \in UnderReplicated : ~FragmentClosed(f[1])} = {} /\ ~LastSegmentOpenAndMissing)

\* What the bookie check finds: the bookies the metadata names that are not available.
LostBookies == {b \in Named : b \notin up}

\* The bookies of e's write set that are available and hold it.
LiveReplicas(e) == {b \in WriteSetIn(meta_segments, e) : b \in up /\ e \in data[b]}

(* Every write set of the last ensemble has Qw - Qa + 1 available bookies: *)
(* what a LAC read of the open ledger (ReadLastConfirmedOp, for an open    *)
(* without recovery) and the fencing of a recovery wait for.               *)
Covered ==
    LET ens == meta_segments[LastSeg][2] IN
    \A i \in 0 .. E - 1 : Cardinality({k \in 0 .. Qw - 1 : ens[((i + k) % E) + 1] \in up}) >= Qw - Qa + 1

\* openLedgerNoRecovery succeeds: the ledger is closed, or its LAC read is covered (a negation: one
\* condition for TLC).
Opens == ~(~closed /\ ~Covered)

\* Where a recovery writes back the entries past the LAC: their write sets (one entry here).
WriteBackSet == UNION {WriteSetIn(meta_segments, e) : e \in {x \in Entries : x > Lac}}

\* Where the worker reads entry e: the other bookies of its write set.
Sources(w, e) == WriteSetIn(meta_segments, e) \ {workers[w].old, workers[w].new}
HasSource(w, e) == \E b \in Sources(w, e) : b \in up /\ e \in data[b]

\* Some under-replicated fragment has an available bookie outside its ensemble to be copied to (a set
\* compared, not an \E, so that TLC takes it as one condition rather than one successor per witness).
Startable == {f \in UnderReplicated : f[1] \in CopyableSegs /\ \E new \in up : new \notin Ensemble(f[1])} # {}

\* The compare-and-set of updateEnsembleInfo: skipped when the old bookie is no longer in the ensemble.
ReplaceBookie(seg, old, new) ==
    IF old \in Ensemble(seg)
    THEN /\ meta_segments' = [meta_segments EXCEPT ![seg] =
                                <<@[1], [i \in 1 .. E |-> IF @[2][i] = old THEN new ELSE @[2][i]]>>]
         /\ meta_version' = meta_version + 1
    ELSE UNCHANGED <<meta_segments, meta_version>>

-----------------------------------------------------------------------------
Init ==
    /\ meta_segments = InitialSegments
    /\ meta_version = 1
    /\ closed = (OpenLedger = 0)
    /\ mark = {}
    /\ lock = NoOne
    /\ lock_mark = {}
    /\ auditor = NoOne
    /\ lost_seen = {}
    /\ data = [b \in Bookies |-> {e \in Entries : b \in WriteSetIn(InitialSegments, e)}]
    /\ up = Bookies
    /\ disk_lost = {}
    /\ stops = 0
    /\ workers = [w \in Workers |-> IdleWorker]
    /\ worker_crashes = 0

\* -- bookies ------------------------------------------------------------------
\* Bookie b stops: it leaves the available set; its auditor vote goes with its session.
BookieStops(b) ==
    /\ b \in up
    /\ stops < MaxStops
    /\ up' = up \ {b}
    /\ stops' = stops + 1
    /\ auditor' = IF auditor = b THEN NoOne ELSE auditor
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, lost_seen, data, disk_lost, workers,
                   worker_crashes>>

(* A stopped bookie registers again, with all its disk holds.  One whose *)
(* disk was lost comes back empty, under the same id: its cookie is gone  *)
(* from its directories, so it starts only once formatted (LegacyCookie-  *)
(* Validation.checkCookies, BookieShell bookieformat -deleteCookie).       *)
BookieComesBack(b) ==
    /\ b \notin up
    /\ up' = up \cup {b}
    /\ lost_seen' = lost_seen \ {b}
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, auditor, data, disk_lost, stops, workers,
                   worker_crashes>>

\* A stopped bookie's disk is gone, its entries with it.
BookieLosesDisk(b) ==
    /\ closed  \* only once the ledger is closed: see the Python spec's header
    /\ b \notin up
    /\ b \notin disk_lost
    /\ Cardinality(disk_lost) < MaxDiskLosses
    /\ disk_lost' = disk_lost \cup {b}
    /\ data' = [data EXCEPT ![b] = {}]
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, auditor, lost_seen, up, stops, workers,
                   worker_crashes>>

\* -- the open ledger's writer ---------------------------------------------------
(* The writer of the open ledger closes it at its last entry: every entry  *)
(* here was acknowledged.  Not fair: a writer may be gone, which is what   *)
(* the workers' recovery is for.  LedgerHandle.doAsyncCloseInternal        *)
(* (release-4.17.2) writes the metadata by compare-and-set; once a         *)
(* recovery closed it, the fenced writer's close fails: no step.           *)
WriterClosesLedger ==
    /\ ~closed
    /\ closed' = TRUE
    /\ UNCHANGED <<meta_segments, meta_version, mark, lock, lock_mark, auditor, lost_seen, data, up, disk_lost, stops,
                   workers, worker_crashes>>

\* -- auditor ------------------------------------------------------------------
\* With no auditor, an available bookie's vote is the lowest left: it becomes the auditor.
AuditorIsElected(b) ==
    /\ auditor = NoOne
    /\ b \in up
    /\ auditor' = b
    /\ lost_seen' = {}
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, data, up, disk_lost, stops, workers,
                   worker_crashes>>

\* Bookies named and not available are lost; a ledger with a fragment on one is marked
\* under-replicated, its mark naming them too (the seeded bug marks nothing).  A check that
\* changes nothing is no step.
AuditorChecksBookies ==
    LET now == IF Bug = "auditor_marks_nothing" THEN mark ELSE mark \cup LostBookies IN
    /\ auditor # NoOne
    /\ ~(LostBookies = lost_seen /\ now = mark)
    /\ lost_seen' = LostBookies
    /\ mark' = now
    /\ UNCHANGED <<meta_segments, meta_version, closed, lock, lock_mark, auditor, data, up, disk_lost, stops,
                   workers, worker_crashes>>

(* AuditorCheckAllLedgersTask.checkAllLedgers (release-4.17.2), every     *)
(* auditorPeriodicCheckInterval: LedgerChecker checks the ledger, and the  *)
(* bookies of the lost fragments are added to its mark.  Only this check   *)
(* finds an available bookie that lacks what the metadata names it for.    *)
(* A check that changes nothing is no step.                                *)
AuditorChecksAllLedgers ==
    LET found == {f[2] : f \in UnderReplicated} IN
    /\ auditor # NoOne
    /\ Opens  \* a ledger the auditor cannot open is checked next time
    /\ ~(found \subseteq mark)
    /\ mark' = mark \cup found
    /\ UNCHANGED <<meta_segments, meta_version, closed, lock, lock_mark, auditor, lost_seen, data, up, disk_lost,
                   stops, workers,
                   worker_crashes>>

\* -- replication workers ------------------------------------------------------
\* An idle worker takes the lock of a marked ledger and reads its mark (getLedgerToRereplicate).
WorkerTakesLock(w) ==
    /\ mark # {}
    /\ lock = NoOne
    /\ lock' = w
    /\ lock_mark' = mark
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, auditor, lost_seen, data, up, disk_lost, stops, workers,
                   worker_crashes>>

\* The lock holder picks an under-replicated fragment and an available bookie outside the segment's
\* ensemble to copy it to; the seeded bug puts the new bookie in the metadata at once.
WorkerStartsFragment(w, seg, old, new) ==
    /\ <<seg, old>> \in UnderReplicated
    /\ seg \in CopyableSegs
    /\ Opens
    /\ new \notin Ensemble(seg)
    /\ lock = w
    /\ workers[w].phase = "IDLE"
    /\ new \in up
    \* It writes the entries the new bookie lacks now, and counts a write done once it is acknowledged.
    /\ workers' = [workers EXCEPT ![w] = [phase |-> "REPLICATING", seg |-> seg, old |-> old, new |-> new,
                                          left |-> CopiedEntries(seg, old) \ data[new]]]
    /\ IF Bug = "metadata_before_copy" THEN ReplaceBookie(seg, old, new)
       ELSE UNCHANGED <<meta_segments, meta_version>>
    /\ UNCHANGED <<closed, mark, lock, lock_mark, auditor, lost_seen, data, up, disk_lost, stops, worker_crashes>>

\* The worker reads entry e of its fragment from an available bookie that holds it and writes it
\* to the new bookie (replicateLedgerFragment).
WorkerCopiesEntry(w, e) ==
    LET t == workers[w] IN
    /\ t.phase = "REPLICATING"
    /\ t.new \in up
    /\ e \in t.left
    /\ HasSource(w, e)
    /\ data' = [data EXCEPT ![t.new] = @ \cup {e}]
    /\ workers' = [workers EXCEPT ![w].left = @ \ {e}]
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, auditor, lost_seen, up, disk_lost, stops,
                   worker_crashes>>

\* Every write of the fragment acknowledged: the old bookie is replaced by the new one in the
\* segment's ensemble. LedgerFragmentReplicator.SingleFragmentCallback (release-4.17.2) reads
\* nothing back: had the new bookie lost its disk since, it is named all the same.
WorkerUpdatesEnsemble(w) ==
    LET t == workers[w] IN
    /\ t.phase = "REPLICATING"
    /\ t.left = {}
    /\ workers' = [workers EXCEPT ![w] = IdleWorker]
    /\ IF Bug = "metadata_before_copy" THEN UNCHANGED <<meta_segments, meta_version>>
       ELSE ReplaceBookie(t.seg, t.old, t.new)
    /\ UNCHANGED <<closed, mark, lock, lock_mark, auditor, lost_seen, data, up, disk_lost, stops, worker_crashes>>

\* The copy cannot go on: the new bookie stopped, or an entry left to copy has no available replica.
WorkerGivesUp(w) ==
    LET t == workers[w] IN
    /\ t.phase = "REPLICATING"
    /\ t.new \in up => \E e \in t.left : ~HasSource(w, e)
    /\ workers' = [workers EXCEPT ![w] = IdleWorker]
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, auditor, lost_seen, data, up,
                   disk_lost, stops,
                   worker_crashes>>

\* Once no fragment can be started, the lock holder checks the ledger again: with nothing left
\* under-replicated it removes the mark, unless the auditor changed it since the lock was taken
\* (markLedgerReplicated); it releases the lock either way.
WorkerReleasesLock(w) ==
    /\ lock = w
    /\ workers[w].phase = "IDLE"
    /\ Opens
    /\ ~Startable
    /\ ~WaitsForClose
    /\ lock' = NoOne
    /\ lock_mark' = {}
    /\ mark' = IF UnderReplicated = {} /\ mark = lock_mark THEN {} ELSE mark
    /\ UNCHANGED <<meta_segments, meta_version, closed, auditor, lost_seen, data, up, disk_lost, stops, workers,
                   worker_crashes>>

(* ReplicationWorker.rereplicate (release-4.17.2) tries each lost         *)
(* fragment once; when the check after the pass still finds one, it       *)
(* releases the lock after a back-off (deferLedgerLockReleaseOfFailed-     *)
(* Ledger), keeping the mark, for a later pass of any worker.  A copy may  *)
(* fail for a reason the spec does not see (a timeout, a full bookie), so  *)
(* this may follow any pass that leaves a fragment to start.               *)
WorkerReleasesLockAfterFailure(w) ==
    /\ lock = w
    /\ workers[w].phase = "IDLE"
    \* a pass that left a fragment it could start, or that could not open the ledger (openLedgerNoRecovery's
    \* BKException, caught by rereplicate); written as a negation: one condition for TLC
    /\ ~(Opens /\ ~(Startable /\ ~WaitsForClose))
    /\ lock' = NoOne
    /\ lock_mark' = {}
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, auditor, lost_seen, data, up, disk_lost, stops, workers,
                   worker_crashes>>

(* The pass ends on an open ledger that a close would let it repair: the  *)
(* worker keeps the lock for the grace period, in which the writer may     *)
(* close the ledger or replace the bookie itself (deferLedgerLockRelease). *)
(* ReplicationWorker.rereplicate (release-4.17.2) copies the closed        *)
(* fragments first, then defers when foundOpenFragments or isLastSegment-  *)
(* OpenAndMissingBookies, before the check that would unmark or release.   *)
WorkerDefersLock(w) ==
    /\ lock = w
    /\ workers[w].phase = "IDLE"
    /\ Opens
    /\ WaitsForClose
    /\ workers' = [workers EXCEPT ![w] = DeferredWorker]
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, lock, lock_mark, auditor, lost_seen, data, up,
                   disk_lost, stops, worker_crashes>>

(* openLedgerRereplicationGracePeriod is over (the timer task of           *)
(* deferLedgerLockRelease, release-4.17.2).  If the ledger still waits for *)
(* a close, the worker opens it with recovery (admin.openLedger), fencing  *)
(* the writer, and the recovery closes it; a recovery that fails (its      *)
(* fencing not covered) is only logged.  The lock is released either way   *)
(* (releaseUnderreplicatedLedger, never markLedgerReplicated).  The        *)
(* recovery writes the entries past the LAC back to their write set; the   *)
(* write to a bookie that is down fails, before or after the Qa acks       *)
(* (PendingAddOp.writeComplete): before, handleBookieFailure replaces it   *)
(* by nb from the first of them on (ReadOnlyLedgerHandle, an ensemble      *)
(* change kept for the close).  nb = NoOne: not replaced, which needs Qa   *)
(* acks from the others; with no bookie to replace it the recovery fails.  *)
WorkerEndsGracePeriod(w, nb) ==
    LET recovers == WaitsForClose /\ Covered /\ Bug # "grace_ends_without_recovery"
        down == WriteBackSet \ up  \* at most one: coverage leaves Qw - Qa + 1 >= Qw - 1 of it up
        spare == {b \in up : b \notin Ensemble(LastSeg)} # {}
        first == Lac + 1
        ens == meta_segments[LastSeg][2]
        kept == SelectSeq(meta_segments, LAMBDA seg : seg[1] < first)
    IN
    /\ lock = w
    /\ workers[w].phase = "DEFERRED"
    /\ lock' = NoOne
    /\ lock_mark' = {}
    /\ workers' = [workers EXCEPT ![w] = IdleWorker]
    /\ IF ~recovers
       THEN /\ nb = NoOne
            /\ UNCHANGED <<closed, meta_segments, meta_version, data>>
       ELSE IF nb = NoOne
       THEN IF Cardinality(WriteBackSet \cap up) >= Qa
            THEN /\ closed' = TRUE
                 /\ UNCHANGED <<meta_segments, meta_version, data>>
            ELSE /\ ~spare
                 /\ UNCHANGED <<closed, meta_segments, meta_version, data>>
       ELSE /\ down # {}
            /\ nb \in up
            /\ nb \notin Ensemble(LastSeg)
            /\ closed' = TRUE
            /\ meta_segments' = Append(kept, <<first, [i \in 1 .. E |-> IF ens[i] \in down THEN nb ELSE ens[i]]>>)
            /\ meta_version' = meta_version + 1
            /\ data' = [data EXCEPT ![nb] = @ \cup {e \in Entries : e >= first}]
    /\ UNCHANGED <<mark, auditor, lost_seen, up, disk_lost, stops, worker_crashes>>

\* The worker's process dies: its lock goes with its session; what it copied stays.
WorkerCrashes(w) ==
    /\ worker_crashes < MaxWorkerCrashes
    /\ ~(lock # w /\ workers[w].phase = "IDLE")
    /\ lock' = IF lock = w THEN NoOne ELSE lock
    /\ lock_mark' = IF lock = w THEN {} ELSE lock_mark
    /\ workers' = [workers EXCEPT ![w] = IdleWorker]
    /\ worker_crashes' = worker_crashes + 1
    /\ UNCHANGED <<meta_segments, meta_version, closed, mark, auditor, lost_seen, data, up, disk_lost, stops>>

Next ==
    \/ \E b \in Bookies : BookieStops(b) \/ BookieComesBack(b) \/ BookieLosesDisk(b) \/ AuditorIsElected(b)
    \/ WriterClosesLedger
    \/ AuditorChecksBookies
    \/ AuditorChecksAllLedgers
    \/ \E w \in Workers :
          \/ WorkerTakesLock(w)
          \/ \E seg \in 1 .. Len(meta_segments), old \in Bookies, new \in Bookies : WorkerStartsFragment(w, seg, old, new)
          \/ \E e \in Entries : WorkerCopiesEntry(w, e)
          \/ WorkerUpdatesEnsemble(w)
          \/ WorkerGivesUp(w)
          \/ WorkerReleasesLock(w)
          \/ WorkerReleasesLockAfterFailure(w)
          \/ WorkerDefersLock(w)
          \/ \E nb \in {NoOne} \cup Bookies : WorkerEndsGracePeriod(w, nb)
          \/ WorkerCrashes(w)

Spec == Init /\ [][Next]_vars

(* Fairness: the Python spec's fairness="weak" and "strong" actions, for   *)
(* each instance of their parameters.  Starting a fragment is strongly     *)
(* fair: a worker may release the lock after a failed pass, so a fragment  *)
(* is startable only now and then, and is started once the failures stop   *)
(* (the back-off's later passes).                                          *)
Fairness ==
    /\ \A b \in Bookies : WF_vars(AuditorIsElected(b))
    /\ WF_vars(AuditorChecksBookies)
    /\ WF_vars(AuditorChecksAllLedgers)
    /\ \A w \in Workers :
          /\ WF_vars(WorkerTakesLock(w))
          /\ \A seg \in 1 .. Segments, old \in Bookies, new \in Bookies : SF_vars(WorkerStartsFragment(w, seg, old, new))
          /\ \A e \in Entries : WF_vars(WorkerCopiesEntry(w, e))
          /\ WF_vars(WorkerUpdatesEnsemble(w))
          /\ WF_vars(WorkerGivesUp(w))
          /\ WF_vars(WorkerReleasesLock(w))
          /\ WF_vars(WorkerDefersLock(w))
          /\ \A nb \in {NoOne} \cup Bookies : WF_vars(WorkerEndsGracePeriod(w, nb))

LiveSpec == Init /\ [][Next]_vars /\ Fairness

\* Under fairness, once the faults are over, every entry is again on Qw available bookies.
ReplicasRestored == <>[](\A e \in Entries : Cardinality(LiveReplicas(e)) = Qw)

-----------------------------------------------------------------------------
(* Invariants. *)

\* Every variable holds a value of its type, within the model's bounds.
TypeOK ==
    /\ stops <= MaxStops
    /\ Cardinality(disk_lost) <= MaxDiskLosses
    /\ worker_crashes <= MaxWorkerCrashes
    /\ \A seg \in 1 .. Len(meta_segments) : Cardinality(Ensemble(seg)) = E

\* An entry some bookie still holds is held by a bookie its write set names: a reader that
\* follows the metadata finds it once that bookie is available.
NoEntryLostWhileReplicaRemains ==
    \A e \in Entries :
        (\E b \in Bookies : e \in data[b]) => \E b \in WriteSetIn(meta_segments, e) : e \in data[b]

\* A bookie named in a segment's ensemble holds that fragment's entries, unless its disk was lost.
MetadataNamesOnlyHolders ==
    \A seg \in 1 .. Len(meta_segments) : \A b \in Ensemble(seg) :
        b \notin disk_lost => FragmentEntries(seg, b) \subseteq data[b]

\* Once the auditor saw a bookie lost, the ledger's mark names it while the metadata names it.
LostBookiesMarked == (lost_seen \cap LostBookies) \subseteq mark

\* Only the lock holder copies a fragment of the ledger or defers it.
LockHeldByOneWorker == \A w \in Workers : workers[w].phase # "IDLE" => lock = w

=============================================================================
