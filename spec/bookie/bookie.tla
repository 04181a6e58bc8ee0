------------------------------- MODULE bookie -------------------------------
(***************************************************************************)
(* One Apache BookKeeper bookie's storage: the journal, the memtable, the  *)
(* entry log and index, the LastLogMark, crashes and the journal replay.   *)
(* The twin of spec/bookie/bookie.py: same variables, actions and invariants by   *)
(* the same names; TLC and the Python explorer reach the same states.      *)
(*                                                                         *)
(* Modelled (bookkeeper-server/.../bookie/, BRIEF section 3):              *)
(*  - the journal (Journal.java, JournalChannel.java): files with          *)
(*    increasing ids, each a sequence of records.  A record is written to  *)
(*    the OS when the request arrives and is durable once a force write    *)
(*    (fsync) covers it; the force-write thread then sets the in-memory    *)
(*    LastLogMark to the end of what it synced and acknowledges the batch; *)
(*    the journal thread keeps writing meanwhile, so a force write covers  *)
(*    a prefix of what was written.  Entries, fence records and explicit   *)
(*    LAC records all go through the journal and each reply waits for the  *)
(*    fsync; a fence request for a ledger already fenced is answered at    *)
(*    once when the fence is durable (fenceAndLogInJournal);               *)
(*  - rollover after RecordsPerJournal records (maxJournalSize);           *)
(*  - the ledger storage (SortedLedgerStorage over                         *)
(*    InterleavedLedgerStorage, or DbLedgerStorage and its write cache,    *)
(*    whose flushers come next): an entry goes into the memtable before    *)
(*    its journal record is written; a flush writes the memtable to the    *)
(*    entry log and the index, with the per-ledger index headers           *)
(*    (FileInfo: the fenced bit and the explicit LAC), and syncs them;     *)
(*  - two flushers, each taking a mark, flushing the ledger storage and    *)
(*    persisting the mark it took, concurrently: the sync thread's         *)
(*    checkpoint (SyncThread.checkpoint) and the write cache's flush when  *)
(*    it fills (SingleDirectoryDbLedgerStorage.flush, from the add path's  *)
(*    triggerFlushAndAddEntry).  The flushes themselves take turns         *)
(*    (flushMutex); the marks they persist need not come in order, so      *)
(*    Journal.checkpointComplete skips a mark older than the last one it   *)
(*    persisted (apache/bookkeeper#4105, fixed in 4.18.0; 4.17.2 writes    *)
(*    it, the seeded bug mark_moves_backwards);                            *)
(*  - the lastMark file in each of NumLedgerDirs ledger directories,       *)
(*    written one after the other (LastLogMark.rollLog), so a crash may    *)
(*    leave the copies apart; a start reads the largest (readLog).  With   *)
(*    several directories the write cache's flush persists no mark         *)
(*    (SingleDirectoryDbLedgerStorage.flush: singleLedgerDirs);            *)
(*  - journal files wholly before the persisted mark may be deleted,       *)
(*    oldest first (JournalRollingFilter: id below the mark's file id);    *)
(*  - crashes: memory and every unsynced record are lost, except a prefix  *)
(*    of the unsynced records that reached the disk (a torn tail);         *)
(*  - restart (BookieImpl.readJournal, replay): replay every record at or  *)
(*    after the persisted mark (the last explicit LAC record replayed      *)
(*    wins, as FileInfo.setExplicitLac overwrites), advance the mark to    *)
(*    the end of the replayed journal (the fix of apache/bookkeeper#2087), *)
(*    start a new journal file, serve;                                     *)
(*  - reads are not steps: ReadPath says whether the memtable (tailing     *)
(*    read) or the index and entry log (catch-up read) serves an entry.    *)
(*                                                                         *)
(* Positions are <<journal file id, record index in the file>>, compared   *)
(* lexicographically (the real bookie keeps a byte offset; it maps to the  *)
(* number of whole records before it).                                     *)
(*                                                                         *)
(* Left out, and why that is sound here (spec/bookie/bookie.py says more): *)
(*  - payloads, digests, ledger key records: (ledger, entry) names the     *)
(*    content, and key records matter to nothing checked here;             *)
(*  - so the replay restores a fence from its fence record alone.  Real    *)
(*    4.17.2 needs the ledger's master key for it (BookieImpl.readJournal: *)
(*    masterKeyCache, else readMasterKey from the index on disk) and skips *)
(*    the record when it has none; a fencing read journals no key record   *)
(*    (only a first add does).  A ledger fenced with no entry on the       *)
(*    bookie and no index header flushed before a crash is then unfenced:  *)
(*    not a behaviour of this spec, so the oracle flags the old writer's   *)
(*    add it lets through (docs/real-systems.md,                           *)
(*    fence-of-empty-ledger-lost);                                         *)
(*  - recovery adds, duplicate adds, ledger deletion, entry log            *)
(*    compaction: none removes an acknowledged entry unasked;              *)
(*  - group commit timers: a force write syncs any prefix of the unsynced  *)
(*    records (those written before it began) and acknowledges them;       *)
(*    when it happens is left open;                                        *)
(*  - a flush is one step: the mark moves only after a whole flush, and    *)
(*    the replay restores what a partial flush missed;                     *)
(*  - the write cache's flush starts only with entries in the cache (the   *)
(*    real one when the cache is full), the sync thread's only when the    *)
(*    mark is past the persisted one.  A flusher whose mark is older than  *)
(*    the last flush's skips its flush                                     *)
(*    (SingleDirectoryDbLedgerStorage.checkpoint: lastCheckpoint); here it *)
(*    flushes again, which keeps all that the skip relied on;              *)
(*  - a ledger directory that is full (not writable) gets no lastMark;     *)
(*    here every persist writes every copy, in directory order;            *)
(*  - a crash keeps a prefix of the unsynced records: the replay scan      *)
(*    stops at the first record not wholly on disk;                        *)
(*  - a crash is a power loss; one journal directory, untorn lastMark      *)
(*    files, maxBackupJournals = 0; the flush the real bookie does right   *)
(*    after the replay is an ordinary flusher's here.                      *)
(*                                                                         *)
(* Bug selects a seeded bug ("none" for the real bookie) so that tests can *)
(* show that the checkers catch it.                                        *)
(*                                                                         *)
(* For TLC: guards are written with IF, => and ~ rather than \/, so that   *)
(* TLC generates each successor once and its "states generated" equals     *)
(* the explorer's count of steps.                                          *)
(***************************************************************************)
EXTENDS Naturals, Integers, Sequences, FiniteSets

CONSTANTS
    NumLedgers,         \* ledgers written to the bookie, 1 .. NumLedgers
    MaxEntries,         \* entries per ledger, ids 0 .. MaxEntries-1
    RecordsPerJournal,  \* records a journal file holds before the journal rolls over
    MaxCrashes,         \* crashes of the bookie
    NumLedgerDirs,      \* ledger directories, each with its copy of the lastMark file
    Bug                 \* "none" or a seeded bug (BUGS in spec/bookie/bookie.py)

Bugs == {"none", "ack_before_fsync", "mark_before_flush", "fence_not_journaled",
         "mark_not_advanced_in_replay", "delete_journal_at_mark", "mark_moves_backwards"}

ASSUME /\ NumLedgers >= 1 /\ MaxEntries >= 1 /\ RecordsPerJournal >= 1
       /\ MaxCrashes \in Nat /\ NumLedgerDirs >= 1
       /\ Bug \in Bugs

VARIABLES
    \* -- on disk: survives a crash
    journal,             \* sequence of <<file id, sequence of records>>, ids consecutive;
                         \* a record is <<"entry", l, e>>, <<"fence", l, -1>> or <<"lac", l, lac>>
    synced,              \* records at positions before it are durable (fsynced)
    flushed,             \* <<l, e>> flushed to the entry log and the index: catch-up reads find them
    fenced_flushed,      \* ledgers whose fenced bit is flushed with the index
    lac_flushed,         \* ledger -> explicit LAC flushed with the index header (-1: none)
    last_marks,          \* the lastMark file of each ledger directory (ZERO_MARK when never written)
    \* -- in memory: lost by a crash
    memtable,            \* <<l, e>> added (or replayed) and not yet flushed: the write cache
    fenced,              \* ledgers fenced: normal adds are rejected
    lac,                 \* ledger -> explicit LAC (-1: none)
    mark,                \* in-memory LastLogMark: end of what the last force write synced; NONE while down
    flusher_mark,        \* flusher -> the mark it took and has yet to persist; NONE when idle
    flusher_flushed,     \* flushers that flushed the ledger storage since they took their mark
    flusher_copies,      \* flusher -> lastMark copies it has written of its mark, directory order
    up,                  \* the bookie serves requests: FALSE from a crash until the replay is done
    \* -- history
    acked,               \* <<l, e>> acknowledged to a client
    fence_acked,         \* ledgers whose fence was acknowledged
    crashes              \* crashes so far

vars == <<journal, synced, flushed, fenced_flushed, lac_flushed, last_marks,
          memtable, fenced, lac, mark, flusher_mark, flusher_flushed, flusher_copies, up,
          acked, fence_acked, crashes>>

-----------------------------------------------------------------------------
Ledgers == 1 .. NumLedgers
Entries == 0 .. MaxEntries - 1

ZERO_MARK == <<0, 0>>   \* LastLogMark(0, 0): before every record (file ids start at 1)
NONE == <<-1, -1>>      \* no mark: the flusher is idle, or the bookie is down

SYNC_THREAD == 1        \* SyncThread's periodic checkpoint
WRITE_CACHE == 2        \* DbLedgerStorage's flush when its write cache fills
Flushers == {SYNC_THREAD, WRITE_CACHE}
LedgerDirs == 1 .. NumLedgerDirs
IDLE_FLUSHERS == <<NONE, NONE>>

Min(a, b) == IF a <= b THEN a ELSE b

\* Position p is before position q (lexicographic order).
Before(p, q) == IF p[1] = q[1] THEN p[2] < q[2] ELSE p[1] < q[1]

\* The mark a start reads: the largest lastMark copy (Journal.java, LastLogMark.readLog, release-4.17.2).
PersistedMark == CHOOSE m \in {last_marks[d] : d \in LedgerDirs} : \A d \in LedgerDirs : ~Before(m, last_marks[d])

Newest == journal[Len(journal)]

\* Every record with its position: <<<<file id, index>>, record>>.
Records == UNION {{<< <<journal[k][1], i - 1>>, journal[k][2][i] >> : i \in 1 .. Len(journal[k][2])} :
                  k \in 1 .. Len(journal)}

\* The position after the last record of the newest file: where the next record goes.
EndOfJournal == <<Newest[1], Len(Newest[2])>>

\* Records written but not yet fsynced: their replies wait for the force write.
Unsynced == {r \in Records : ~Before(r[1], synced)}

\* Where a force write ends: just after an unsynced record (the records written after it began wait).
SyncEnds == {<<r[1][1], r[1][2] + 1>> : r \in Unsynced}

CurrentFileFull == Len(Newest[2]) >= RecordsPerJournal

AppendRecord(rec) == [journal EXCEPT ![Len(journal)] = <<@[1], Append(@[2], rec)>>]

\* Which path serves a read of <<l, e>>: the memtable, the index and entry log, or none.
ReadPath(l, e) ==
    IF ~up THEN "none"
    ELSE IF <<l, e>> \in memtable THEN "memtable"
    ELSE IF <<l, e>> \in flushed THEN "entry_log"
    ELSE "none"

\* <<l, value>> of the synced records of a kind at or after the persisted mark.
Replayable(kind) ==
    {<<r[2][2], r[2][3]>> : r \in {x \in Records : /\ x[2][1] = kind
                                                   /\ ~Before(x[1], PersistedMark)
                                                   /\ Before(x[1], synced)}}

\* How many of the n records of file f are before the cut.
Kept(f, n, cut) == IF f < cut[1] THEN n ELSE IF f = cut[1] THEN Min(n, cut[2]) ELSE 0

\* Where a crash cuts the journal: at an unsynced record (it and all after it are lost), or at the end.
CutPoints == {r[1] : r \in Unsynced} \cup {EndOfJournal}

-----------------------------------------------------------------------------
Init ==
    /\ journal = << <<1, << >>>> >>
    /\ synced = <<1, 0>>
    /\ flushed = {}
    /\ fenced_flushed = {}
    /\ lac_flushed = [l \in Ledgers |-> -1]
    /\ last_marks = [d \in LedgerDirs |-> ZERO_MARK]
    /\ memtable = {}
    /\ fenced = {}
    /\ lac = [l \in Ledgers |-> -1]
    /\ mark = ZERO_MARK
    /\ flusher_mark = IDLE_FLUSHERS
    /\ flusher_flushed = {}
    /\ flusher_copies = <<0, 0>>
    /\ up = TRUE
    /\ acked = {}
    /\ fence_acked = {}
    /\ crashes = 0

-----------------------------------------------------------------------------
(* Requests.                                                               *)

\* addEntry: into the memtable first, then a journal record; the ack waits for the fsync.
BookieAddsEntry(ledger, entry) ==
    /\ up
    /\ ledger \notin fenced
    /\ ~CurrentFileFull
    /\ <<ledger, entry>> \notin memtable
    /\ <<ledger, entry>> \notin flushed
    /\ memtable' = memtable \cup {<<ledger, entry>>}
    /\ journal' = AppendRecord(<<"entry", ledger, entry>>)
    /\ acked' = IF Bug = "ack_before_fsync" THEN acked \cup {<<ledger, entry>>} ELSE acked
    /\ UNCHANGED <<synced, flushed, fenced_flushed, lac_flushed, last_marks, fenced, lac,
                   mark, flusher_mark, flusher_flushed, flusher_copies, up, fence_acked, crashes>>

\* fenceAndLogInJournal: set the fenced flag, journal a fence record; the reply waits for the fsync.
\* Real 4.17.2 journals no master key here; this spec assumes the fence record is replayable alone.
\* A ledger already fenced is answered at once once its fence is durable; until then the request
\* waits for the fence record already written, which is no step.
BookieFencesLedger(ledger) ==
    /\ up
    /\ IF ledger \in fenced
       THEN /\ ledger \notin fence_acked
            /\ \A r \in Unsynced : r[2] # <<"fence", ledger, -1>>
            /\ fence_acked' = fence_acked \cup {ledger}
            /\ UNCHANGED <<journal, fenced>>
       ELSE /\ fenced' = fenced \cup {ledger}
            /\ IF Bug = "fence_not_journaled"
               THEN /\ fence_acked' = fence_acked \cup {ledger}
                    /\ UNCHANGED journal
               ELSE /\ ~CurrentFileFull
                    /\ journal' = AppendRecord(<<"fence", ledger, -1>>)
                    /\ UNCHANGED fence_acked
    /\ UNCHANGED <<synced, flushed, fenced_flushed, lac_flushed, last_marks, memtable, lac,
                   mark, flusher_mark, flusher_flushed, flusher_copies, up, acked, crashes>>

\* setExplicitLac: keep the writer's newer explicit LAC and journal it (the reply waits for the fsync).
BookieSetsExplicitLac(ledger, new_lac) ==
    /\ up
    /\ new_lac > lac[ledger]
    /\ ~CurrentFileFull
    /\ lac' = [lac EXCEPT ![ledger] = new_lac]
    /\ journal' = AppendRecord(<<"lac", ledger, new_lac>>)
    /\ UNCHANGED <<synced, flushed, fenced_flushed, lac_flushed, last_marks, memtable, fenced,
                   mark, flusher_mark, flusher_flushed, flusher_copies, up, acked, fence_acked, crashes>>

-----------------------------------------------------------------------------
(* The journal.                                                            *)

\* Force-write thread: fsync the records written before upto, set the mark there, acknowledge them.
JournalForceWrites(upto) ==
    /\ up
    /\ LET batch == {x \in Unsynced : Before(x[1], upto)}
       IN /\ batch # {}
          /\ acked' = acked \cup {<<r[2][2], r[2][3]>> : r \in {x \in batch : x[2][1] = "entry"}}
          /\ fence_acked' = fence_acked \cup {r[2][2] : r \in {x \in batch : x[2][1] = "fence"}}
    /\ synced' = upto
    /\ mark' = upto
    /\ UNCHANGED <<journal, flushed, fenced_flushed, lac_flushed, last_marks, memtable, fenced,
                   lac, flusher_mark, flusher_flushed, flusher_copies, up, crashes>>

\* The current file reached maxJournalSize: the journal thread starts the next file.
JournalRollsOver ==
    /\ up
    /\ CurrentFileFull
    /\ journal' = Append(journal, <<Newest[1] + 1, << >>>>)
    /\ UNCHANGED <<synced, flushed, fenced_flushed, lac_flushed, last_marks, memtable, fenced,
                   lac, mark, flusher_mark, flusher_flushed, flusher_copies, up, acked, fence_acked, crashes>>

-----------------------------------------------------------------------------
(* The flushers: SyncThread's checkpoint and the write cache's flush, each *)
(* taking a mark, flushing, then persisting the mark it took.              *)

\* Journal.newCheckpoint, called by SyncThread's periodic task (BookieImpl's SyncThread.start,
\* doCheckpoint(checkpointSource.newCheckpoint())) or by SingleDirectoryDbLedgerStorage.flush when the
\* add path finds the write cache full (triggerFlushAndAddEntry), release-4.17.2: the flusher takes the
\* in-memory mark; everything journaled before it is in the write cache or flushed. The write cache's
\* flush starts only with entries in the cache; the sync thread's only when the mark is past the persisted one.
FlusherTakesMark(flusher) ==
    /\ up
    /\ flusher_mark[flusher] = NONE
    /\ IF flusher = WRITE_CACHE THEN memtable # {} ELSE Before(PersistedMark, mark)
    /\ flusher_mark' = [flusher_mark EXCEPT ![flusher] = mark]
    /\ UNCHANGED <<journal, synced, flushed, fenced_flushed, lac_flushed, last_marks, memtable,
                   fenced, lac, mark, flusher_flushed, flusher_copies, up, acked, fence_acked, crashes>>

\* SingleDirectoryDbLedgerStorage.checkpoint (release-4.17.2), called by SyncThread.checkpoint and by
\* SingleDirectoryDbLedgerStorage.flush: under flushMutex, one flush at a time, swap the write cache and
\* write it to the entry log and the index, with the fenced bits and explicit LACs; fsync.
LedgerStorageFlushes(flusher) ==
    /\ up
    /\ flusher_mark[flusher] # NONE
    /\ flusher \notin flusher_flushed
    /\ flushed' = flushed \cup memtable
    /\ memtable' = {}
    /\ fenced_flushed' = fenced
    /\ lac_flushed' = lac
    /\ flusher_flushed' = flusher_flushed \cup {flusher}
    /\ UNCHANGED <<journal, synced, last_marks, fenced, lac, mark, flusher_mark, flusher_copies, up,
                   acked, fence_acked, crashes>>

\* The flusher is done: idle again.
FlusherDone(flusher) ==
    /\ flusher_mark' = [flusher_mark EXCEPT ![flusher] = NONE]
    /\ flusher_flushed' = flusher_flushed \ {flusher}
    /\ flusher_copies' = [flusher_copies EXCEPT ![flusher] = 0]

\* Journal.checkpointComplete after the flusher's flush (SyncThread.checkpoint;
\* SingleDirectoryDbLedgerStorage.flush, only with a single ledger directory): LastLogMark.rollLog
\* writes the mark to the lastMark file of each ledger directory in turn, one copy a step, release-4.17.2.
\* A mark older than the persisted one is skipped, as 4.18.0 does (#4105); 4.17.2 writes it.
CheckpointPersistsMark(flusher) ==
    /\ up
    /\ flusher_mark[flusher] # NONE
    /\ Bug # "mark_before_flush" => flusher \in flusher_flushed
    /\ LET copy == flusher_copies[flusher] + 1
           m == flusher_mark[flusher]
       IN IF \/ flusher = WRITE_CACHE /\ NumLedgerDirs > 1
             \/ copy = 1 /\ Bug # "mark_moves_backwards" /\ Before(m, PersistedMark)
          THEN /\ FlusherDone(flusher)
               /\ UNCHANGED last_marks
          ELSE /\ last_marks' = [last_marks EXCEPT ![copy] = m]
               /\ IF copy = NumLedgerDirs
                  THEN FlusherDone(flusher)
                  ELSE /\ flusher_copies' = [flusher_copies EXCEPT ![flusher] = copy]
                       /\ UNCHANGED <<flusher_mark, flusher_flushed>>
    /\ UNCHANGED <<journal, synced, flushed, fenced_flushed, lac_flushed, memtable, fenced, lac,
                   mark, up, acked, fence_acked, crashes>>

\* Journal garbage collection, oldest file first: a file wholly before the persisted mark is not
\* needed by any replay.
JournalFileDeleted(f) ==
    /\ up
    /\ f = journal[1][1]
    /\ f # Newest[1]
    /\ IF Bug = "delete_journal_at_mark" THEN f <= PersistedMark[1] ELSE f < PersistedMark[1]
    /\ journal' = Tail(journal)
    /\ UNCHANGED <<synced, flushed, fenced_flushed, lac_flushed, last_marks, memtable, fenced,
                   lac, mark, flusher_mark, flusher_flushed, flusher_copies, up, acked, fence_acked, crashes>>

-----------------------------------------------------------------------------
(* Crash and restart.                                                      *)

\* Power loss: memory is gone, and of the unsynced records only those before cut reached the disk.
BookieCrashes(cut) ==
    /\ up
    /\ crashes < MaxCrashes
    /\ LET kept == [k \in 1 .. Len(journal) |->
                       <<journal[k][1], SubSeq(journal[k][2], 1, Kept(journal[k][1], Len(journal[k][2]), cut))>>]
       IN /\ journal' = kept
          /\ synced' = <<kept[Len(kept)][1], Len(kept[Len(kept)][2])>>  \* what is on disk now stays there
    /\ memtable' = {}
    /\ fenced' = {}
    /\ lac' = [l \in Ledgers |-> -1]
    /\ mark' = NONE
    /\ flusher_mark' = IDLE_FLUSHERS
    /\ flusher_flushed' = {}
    /\ flusher_copies' = <<0, 0>>
    /\ up' = FALSE
    /\ crashes' = crashes + 1
    /\ UNCHANGED <<flushed, fenced_flushed, lac_flushed, last_marks, acked, fence_acked>>

\* Restart: replay every record at or after the persisted mark, advance the mark to the end, serve.
\* Every fence record replayed fences its ledger. Real 4.17.2 skips one whose ledger has neither a key
\* record replayed before it nor an index file on disk ("Skip replaying entries of ledger L since it was
\* deleted"): the fence of an empty ledger is then lost, which this spec does not allow.
BookieReplaysJournal ==
    /\ ~up
    /\ LET replayed == {r[2] : r \in {x \in Records : ~Before(x[1], PersistedMark)}}
           \* the explicit LAC records of l replayed; the last one wins (FileInfo.setExplicitLac overwrites)
           lacs(l) == {x \in Records : ~Before(x[1], PersistedMark) /\ x[2][1] = "lac" /\ x[2][2] = l}
       IN /\ memtable' = {<<r[2], r[3]>> : r \in {x \in replayed : x[1] = "entry"}}
          /\ fenced' = fenced_flushed \cup {r[2] : r \in {x \in replayed : x[1] = "fence"}}
          /\ lac' = [l \in Ledgers |->
                        IF lacs(l) = {} THEN lac_flushed[l]
                        ELSE (CHOOSE x \in lacs(l) : \A y \in lacs(l) : ~Before(x[1], y[1]))[2][3]]
    \* #2087: the fixed replay sets the mark to the end of each file it scanned.
    /\ mark' = IF Bug = "mark_not_advanced_in_replay" THEN PersistedMark ELSE EndOfJournal
    /\ journal' = Append(journal, <<Newest[1] + 1, << >>>>)
    /\ up' = TRUE
    /\ UNCHANGED <<synced, flushed, fenced_flushed, lac_flushed, last_marks, flusher_mark,
                   flusher_flushed, flusher_copies, acked, fence_acked, crashes>>

-----------------------------------------------------------------------------
Next ==
    \/ \E ledger \in Ledgers, entry \in Entries : BookieAddsEntry(ledger, entry)
    \/ \E ledger \in Ledgers : BookieFencesLedger(ledger)
    \/ \E ledger \in Ledgers, new_lac \in Entries : BookieSetsExplicitLac(ledger, new_lac)
    \/ \E upto \in SyncEnds : JournalForceWrites(upto)
    \/ JournalRollsOver
    \/ \E flusher \in Flushers : FlusherTakesMark(flusher)
    \/ \E flusher \in Flushers : LedgerStorageFlushes(flusher)
    \/ \E flusher \in Flushers : CheckpointPersistsMark(flusher)
    \/ \E f \in {journal[k][1] : k \in 1 .. Len(journal)} : JournalFileDeleted(f)
    \/ \E cut \in CutPoints : BookieCrashes(cut)
    \/ BookieReplaysJournal

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants.  The rules of the mechanism come first, so that a seeded    *)
(* bug is reported by the rule it breaks; the promises to clients follow.  *)

Kinds == {"entry", "fence", "lac"}

\* Every variable holds a value of its type, within the model's bounds.
TypeOK ==
    /\ Len(journal) >= 1
    /\ \A k \in 1 .. Len(journal) : journal[k][1] = journal[1][1] + k - 1
    /\ \A r \in Records : /\ r[2][1] \in Kinds
                          /\ r[2][2] \in Ledgers
                          /\ IF r[2][1] = "fence" THEN r[2][3] = -1 ELSE r[2][3] \in Entries
    /\ memtable \cup flushed \cup acked \subseteq Ledgers \X Entries
    /\ fenced \cup fenced_flushed \cup fence_acked \subseteq Ledgers
    /\ DOMAIN lac = Ledgers /\ DOMAIN lac_flushed = Ledgers
    /\ crashes \in 0 .. MaxCrashes
    /\ up = (mark # NONE)
    /\ DOMAIN last_marks = LedgerDirs
    /\ DOMAIN flusher_mark = Flushers /\ DOMAIN flusher_copies = Flushers
    /\ flusher_flushed \subseteq Flushers
    /\ \A f \in Flushers : /\ flusher_mark[f] = NONE => f \notin flusher_flushed /\ flusher_copies[f] = 0
                          /\ flusher_copies[f] \in 0 .. NumLedgerDirs - 1

\* Every journal record before the persisted mark is in the flushed ledger storage,
\* since no replay will read it again.
MarkNeverPassesUnflushedData ==
    \A r \in Records :
        Before(r[1], PersistedMark) =>
            LET kind == r[2][1]  l == r[2][2]  v == r[2][3]
            IN /\ kind = "entry" => <<l, v>> \in flushed
               /\ kind = "fence" => l \in fenced_flushed
               /\ kind = "lac" => lac_flushed[l] >= v

\* Every journal file from the persisted mark's file to the newest still exists: deletion
\* only removes files wholly before the mark, whose records are flushed.
JournalKeptFromMark ==
    \A f \in (IF PersistedMark[1] >= 1 THEN PersistedMark[1] ELSE 1) .. Newest[1] :
        \E k \in 1 .. Len(journal) : journal[k][1] = f

\* While the bookie is up with nothing waiting for an fsync, the in-memory mark is past every
\* journal record, so the next checkpoint can let the replayed journal go (#2087).
MarkCoversReplayedJournal ==
    (up /\ Unsynced = {}) => \A r \in Records : Before(r[1], mark)

\* Every acknowledged entry is flushed or in a synced journal record at or after the persisted
\* mark (so any crash and restart keeps it), and while the bookie is up a read finds it.
AckedEntriesSurvive ==
    \A x \in acked :
        /\ x \in flushed \cup Replayable("entry")
        /\ up => ReadPath(x[1], x[2]) # "none"

\* A ledger whose fence was acknowledged is fenced while the bookie is up, and its fence is
\* durable: flushed, or in a synced journal record at or after the persisted mark.
FencedLedgerStaysFenced ==
    \A l \in fence_acked :
        /\ l \in fenced_flushed \/ <<l, -1>> \in Replayable("fence")
        /\ up => l \in fenced

\* The persisted mark only moves forward (checked as a PROPERTY).
MarkNeverMovesBackwards ==
    [][~Before(PersistedMark', PersistedMark)]_vars

=============================================================================
