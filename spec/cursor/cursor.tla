------------------------------- MODULE cursor -------------------------------
(***************************************************************************)
(* A Pulsar durable cursor: acknowledgements, their persistence, a broker  *)
(* crash and the cursor's restore.  The twin of spec/cursor/cursor.py: the same   *)
(* variables, actions and invariants by the same names; TLC and the Python *)
(* explorer reach the same states.  cursor.py's docstring says what is     *)
(* modelled, what is left out and why (pulsar managed-ledger               *)
(* ManagedCursorImpl; BRIEF section 4, seed 003).                          *)
(*                                                                         *)
(* In short: entries (batches of BatchSize messages) are published to the  *)
(* last ledger of the list; the consumer acknowledges single messages; the *)
(* cursor keeps a mark-delete position, individually acked entries after   *)
(* it and acked batch indexes; it persists that state as a PositionInfo   *)
(* record in its own ledger, or in its znode (ManagedCursorInfo) with      *)
(* cursorsLedgerId = -1 when it has no ledger, cannot create one, cannot   *)
(* append to it, or closes; the broker crashes and the cursor is restored  *)
(* from the znode, from its ledger's last record, or rolled back when that *)
(* ledger is gone.  The managed ledger trims by the position it holds for  *)
(* the cursor, set by each completed persist, by the open and by the skip  *)
(* over a consumed ledger, not by the cursor's mark-delete.  A znode       *)
(* write that fails (the switch to a new cursor ledger, or the fallback)   *)
(* fails the mark-delete: the state stays in memory, to persist again.     *)
(* A reset moves the cursor to a chosen position: its mark-delete is       *)
(* persisted as any other, and the cursor changes in memory only when that *)
(* persist completes.                                                      *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, positions

CONSTANTS
    MaxEntries,                   \* entries published in all
    MaxEntriesPerLedger,          \* maxEntriesPerLedger of the data ledgers
    BatchSize,                    \* messages in an entry
    MetadataMaxEntriesPerLedger,  \* the cursor ledger's LAC at which it is replaced
    MaxCrashes,                   \* broker crashes in all
    MaxFaults,                    \* failed writes to BookKeeper (ledger creations, appends) and the znode
    MaxLedgerLoss,                \* cursor ledgers lost (unreadable) in all
    MaxResets,                    \* cursor resets in all
    RolloverByTime,               \* maximumRolloverTimeMs can pass: a ledger holding an entry rolls over
    ZnodeFallback,                \* "no_messages_after" (Pulsar 4.0.7) or "always": cursor.py's ZNODE_FALLBACKS
    Bug                           \* "none" or a seeded bug, as in cursor.py's BUGS

ASSUME /\ \A k \in {MaxEntries, MaxCrashes, MaxFaults, MaxLedgerLoss, MaxResets} : k \in Nat
       /\ \A k \in {MaxEntriesPerLedger, BatchSize, MetadataMaxEntriesPerLedger} : k \in Nat \ {0}
       /\ RolloverByTime \in BOOLEAN
       /\ ZnodeFallback \in {"no_messages_after", "always"}
       /\ Bug \in {"none", "restore_ignores_no_ledger", "no_store_fallback", "restore_skips_unacked",
                   "trim_deletes_needed_ledger", "skip_unconsumed_ledger", "reset_keeps_acks",
                   "ack_persists_over_reset"}

VARIABLES
    \* -- the managed ledger (metadata store) and BookKeeper
    ledgers,         \* the ledger list: <<ledger id, entries>>, increasing ids
    deleted,         \* data ledgers trimmed or dropped: <<ledger id, entries>>
    next_id,         \* the next ledger id BookKeeper hands out (data and cursor ledgers)
    cursor_ledgers,  \* readable cursor ledgers: <<ledger id, <<PositionInfo records>> >>
    znode,           \* the cursor's znode (ManagedCursorInfo)
    \* -- the broker
    broker_up,
    crashes,         \* broker crashes so far
    status,          \* the cursor's state (Uninitialized while the broker is down)
    mark_delete,
    ranges,          \* individually acknowledged entries after the mark-delete
    batch,           \* acknowledged batch indexes of entries not wholly acknowledged
    cursor_ledger,   \* the cursor ledger the cursor holds, or -1
    switching_to,    \* the new cursor ledger written but not yet named in the znode, or -1
    retired,         \* old cursor ledgers to delete
    dirty,           \* acknowledgements in memory that no persist covers yet
    slowest_position, \* the managed ledger's position of the cursor (ManagedCursorContainer), which trimming reads
    resetting,       \* the mark-delete a pending reset persists, or NoPosition
    resets,          \* cursor resets so far
    \* -- the environment
    faults,          \* failed writes to BookKeeper and the znode so far
    lost,            \* cursor ledgers lost so far
    \* -- history (no process reads them; the invariants do)
    acked,           \* every message acknowledged, by the consumer or a reset past it: <<ledger, entry, batch index>>
    durable,         \* acknowledgements covered by a completed persist
    reset_unapplied  \* a reset whose record is persisted, not yet taken by the cursor or a restore, or NoPosition

store_vars == <<ledgers, deleted, next_id, cursor_ledgers, znode>>
cursor_vars == <<status, mark_delete, ranges, batch, cursor_ledger, switching_to, retired, dirty, slowest_position,
                 resetting>>
vars == <<store_vars, broker_up, crashes, cursor_vars, resets, faults, lost, acked, durable, reset_unapplied>>

-----------------------------------------------------------------------------
Uninitialized == "Uninitialized"
NoLedger == "NoLedger"
Open == "Open"
SwitchingLedger == "SwitchingLedger"
Closed == "Closed"
Active == {NoLedger, Open, SwitchingLedger}  \* the cursor takes acks and persists them
None == -1                                  \* no ledger (cursorsLedgerId = -1)

PosMax(a, b) == IF PosLeq(a, b) THEN b ELSE a
PosMin(a, b) == IF PosLeq(a, b) THEN a ELSE b
PosSetMax(S) == CHOOSE p \in S : \A q \in S : PosLeq(q, p)

Ids == [i \in 1 .. Len(ledgers) |-> ledgers[i][1]]
AllLedgers == Range(ledgers) \cup deleted

\* Entries of a data ledger, deleted ones included.
CountOf(l) == LET c == {x[2] : x \in {y \in AllLedgers : y[1] = l}} IN IF c = {} THEN 0 ELSE SetMax(c)

NextLedgerOf(l) == LET later == LaterLedgers(Ids, l) IN IF later = {} THEN None ELSE SetMin(later)

EntryMessages(l, e) == {<<l, e, i>> : i \in 0 .. BatchSize - 1}
AllEntries == UNION {{<<x[1], e>> : e \in 0 .. x[2] - 1} : x \in AllLedgers}
AllMessages == UNION {EntryMessages(p[1], p[2]) : p \in AllEntries}

\* The messages a cursor state acknowledges: up to the mark-delete, the ranges, the batch indexes.
Covered(md, rs, bs) == bs \cup {m \in AllMessages : PosLeq(<<m[1], m[2]>>, md) \/ <<m[1], m[2]>> \in rs}
CursorCovers == Covered(mark_delete, ranges, batch)

Record(md, rs, bs) == [mark_delete |-> md, ranges |-> rs, batch |-> bs]
Snapshot == Record(mark_delete, ranges, batch)
CursorInfo(l, md, rs, bs) == [cursors_ledger |-> l, mark_delete |-> md, ranges |-> rs, batch |-> bs]

HasCursorLedger(l) == \E x \in Range(cursor_ledgers) : x[1] = l
RecordsOf(l) == (CHOOSE x \in Range(cursor_ledgers) : x[1] = l)[2]
WithoutCursorLedger(l) == SelectSeq(cursor_ledgers, LAMBDA x : x[1] # l)

\* The mark-delete jumps over the acknowledged entries that follow it
\* (setAcknowledgedPosition); After then drops every individual ack at or before
\* it, also one in a ledger trimmed since (individualDeletedMessages.removeAtMost).
RECURSIVE Jump(_, _)
Jump(md, rs) ==
    LET nxt == NextPosition(Ids, CountOf, md)
    IN IF nxt # NoPosition /\ nxt \in rs THEN Jump(nxt, rs) ELSE md

After(md, rs) == {p \in rs : PosLess(md, p)}
BatchAfter(md, bs) == {m \in bs : PosLess(md, <<m[1], m[2]>>)}

\* getFirstPosition: before the first entry of the first ledger of the list.
FirstPosition == IF ledgers = <<>> THEN NoPosition ELSE <<ledgers[1][1], -1>>

\* recoveredCursor (positions.tla) over the managed ledger's list.
Recovered(md) == RecoveredPosition(Ids, CountOf, md)

ResetPending == resetting # NoPosition
(* Something in memory for a persist to write: acknowledgements, or a      *)
(* reset.  Nothing while a persisted reset waits to take effect (Pulsar    *)
(* 4.0.7 may write then: the seeded bug ack_persists_over_reset).          *)
ToPersist == reset_unapplied = NoPosition /\ (dirty \/ ResetPending)

(* What a reset to p leaves acknowledged: what precedes p, beside the      *)
(* messages of ledgers trimmed meanwhile, which no reset brings back.      *)
ResetAcked(p) == Covered(p, {}, {}) \cup {m \in acked : m[1] \notin Range(Ids)}

(* The record of a reset: its mark-delete, no individual acks.  Pulsar     *)
(* 4.0.7 writes the acks in memory from before the reset beside it         *)
(* (internalResetCursor clears them only in its callback; the seeded bug   *)
(* reset_keeps_acks).                                                      *)
ResetRecord ==
    IF Bug = "reset_keeps_acks" THEN Record(resetting, ranges, batch) ELSE Record(resetting, {}, {})

\* What the next persist writes: the pending reset's record, else the cursor's state.
Persisted == IF ResetPending THEN ResetRecord ELSE Snapshot

(* A persist of Persisted completed (internalMarkDelete's callback): the   *)
(* managed ledger holds its mark-delete for the cursor.  A pending reset's *)
(* record is now what a restore finds; the cursor takes it in memory next  *)
(* (CursorResetCompletes), or a restore does.                              *)
PersistCompletes ==
    IF ResetPending
    THEN /\ reset_unapplied' = resetting
         /\ durable' = Covered(resetting, {}, {})
         /\ UNCHANGED <<mark_delete, ranges, batch, resetting, slowest_position, acked>>
    ELSE /\ durable' = durable \cup CursorCovers
         /\ slowest_position' = mark_delete
         /\ UNCHANGED <<mark_delete, ranges, batch, resetting, reset_unapplied, acked>>

(* A persist failed: the mark-delete fails and the cursor, its state in    *)
(* memory, is dirty (isDirty); a pending reset fails with it               *)
(* (internalResetCursor's operationFailed).                                *)
PersistFails ==
    /\ dirty' = TRUE
    /\ resetting' = NoPosition
    /\ UNCHANGED reset_unapplied

(* A full cursor ledger's successor is being created (rolloverLedgerIfNeeded: *)
(* SwitchingLedger at once, the creation once the persist that filled it    *)
(* completed), no new ledger written yet.                                   *)
RollingOver == status = SwitchingLedger /\ switching_to = None

(* Is a cursor ledger to be created: a mark-delete found no ledger         *)
(* (internalAsyncMarkDelete in NoLedger queues itself and starts the       *)
(* creation), or a rollover's creation is under way?                       *)
Creates == (status = NoLedger /\ ToPersist) \/ RollingOver

(* createNewMetadataLedger's operationFailed: NoLedger, and the mark-deletes *)
(* queued fail with the creation; with none queued (a rollover no ack      *)
(* followed), nothing else changes.                                        *)
CreationFails ==
    /\ status' = NoLedger
    /\ IF ToPersist THEN PersistFails ELSE UNCHANGED <<dirty, resetting, reset_unapplied>>

(* The positions a reset may move the read position to are the entries of  *)
(* the list (asyncResetCursor moves any other to the next valid one); its  *)
(* mark-delete is the position before (getPreviousPosition): an entry of   *)
(* the list, or the first position.                                        *)
ResetTargets == UNION {{<<x[1], e>> : e \in 0 .. x[2] - 1} : x \in Range(ledgers)} \cup {FirstPosition}

-----------------------------------------------------------------------------
(* The managed ledger's first ledger has id 0 (BookKeeper's first id); the *)
(* subscription is created at its start, with no cursor ledger yet.        *)
Init ==
    /\ ledgers = << <<0, 0>> >>
    /\ deleted = {}
    /\ next_id = 1
    /\ cursor_ledgers = <<>>
    /\ znode = CursorInfo(None, <<0, -1>>, {}, {})
    /\ broker_up = TRUE
    /\ crashes = 0
    /\ status = NoLedger
    /\ mark_delete = <<0, -1>>
    /\ ranges = {}
    /\ batch = {}
    /\ cursor_ledger = None
    /\ switching_to = None
    /\ retired = {}
    /\ dirty = FALSE
    /\ slowest_position = <<0, -1>>
    /\ resetting = NoPosition
    /\ resets = 0
    /\ faults = 0
    /\ lost = 0
    /\ acked = {}
    /\ durable = {}
    /\ reset_unapplied = NoPosition

-----------------------------------------------------------------------------
(* The managed ledger. *)

\* A producer's entry is added to the last ledger of the list.
EntryPublished ==
    /\ status \in Active
    /\ Cardinality(AllEntries) < MaxEntries
    /\ ledgers[Len(ledgers)][2] < MaxEntriesPerLedger
    /\ ledgers' = [ledgers EXCEPT ![Len(ledgers)][2] = @ + 1]
    /\ UNCHANGED <<deleted, next_id, cursor_ledgers, znode, broker_up, crashes, cursor_vars, resets,
                   faults, lost, acked, durable, reset_unapplied>>

\* The last ledger is full: a new ledger is created and added to the list; with
\* RolloverByTime a ledger holding an entry may have aged past the maximum.
LedgerRollsOver ==
    /\ status \in Active
    /\ \/ ledgers[Len(ledgers)][2] >= MaxEntriesPerLedger
       \/ RolloverByTime /\ ledgers[Len(ledgers)][2] > 0
    /\ ledgers' = Append(ledgers, <<next_id, 0>>)
    /\ next_id' = next_id + 1
    /\ UNCHANGED <<deleted, cursor_ledgers, znode, broker_up, crashes, cursor_vars, resets, faults, lost, acked,
                   durable, reset_unapplied>>

-----------------------------------------------------------------------------
(* The consumer. *)

(* An individual ack of one message (asyncDelete); an entry whose batch is *)
(* all acked counts whole; the mark-delete jumps over acked entries.       *)
ConsumerAcks(l, e, i) ==
    /\ status \in Active
    /\ <<l, e, i>> \notin CursorCovers
    /\ LET bs0 == batch \cup {<<l, e, i>>}
           whole == EntryMessages(l, e) \subseteq bs0
           bs1 == IF whole THEN bs0 \ EntryMessages(l, e) ELSE bs0
           rs1 == IF whole THEN ranges \cup {<<l, e>>} ELSE ranges
           md == Jump(mark_delete, rs1)
       IN /\ mark_delete' = md
          /\ ranges' = After(md, rs1)
          /\ batch' = BatchAfter(md, bs1)
    /\ dirty' = TRUE
    /\ acked' = acked \cup {<<l, e, i>>}
    /\ UNCHANGED <<store_vars, broker_up, crashes, status, cursor_ledger, switching_to, retired,
                   slowest_position, resetting, reset_unapplied, resets, faults, lost, durable>>

(* ManagedCursorImpl.asyncResetCursor and internalResetCursor (Pulsar     *)
(* 4.0.7): the application moves the cursor to read from the entry after   *)
(* p.  The reset persists p as a mark-delete (internalAsyncMarkDelete) and *)
(* changes the cursor in memory only when that persist completes; a second *)
(* reset is refused while one is pending.  Its record supersedes the acks  *)
(* not yet persisted: they are redone by the reset, or, when its persist   *)
(* fails, dirty again.  A reset asked for while a new cursor ledger is     *)
(* being switched to waits in pendingMarkDeleteOps: taken here as a reset  *)
(* after the switch.                                                       *)
CursorResetStarts(p) ==
    /\ status \in {NoLedger, Open}
    /\ ~ResetPending
    /\ resets < MaxResets
    /\ resetting' = p
    /\ resets' = resets + 1
    /\ dirty' = FALSE
    /\ UNCHANGED <<store_vars, broker_up, crashes, status, mark_delete, ranges, batch, cursor_ledger, switching_to,
                   retired, slowest_position, reset_unapplied, faults, lost, acked, durable>>

(* internalResetCursor's finalCallback, after the reset's persist: the     *)
(* mark-delete moves to its position, individual and batch acks are        *)
(* cleared (the acks taken since the reset began too), and the managed     *)
(* ledger holds the position for the cursor (onCursorReadPositionUpdated;  *)
(* Pulsar sets it a moment before, in the persist's own callback).  What   *)
(* is acknowledged becomes what precedes the position, beside the messages *)
(* of ledgers trimmed meanwhile (ResetAcked).  The application is told     *)
(* (resetComplete): a client sees this step.                               *)
CursorResetCompletes ==
    /\ ResetPending
    /\ reset_unapplied # NoPosition
    /\ mark_delete' = resetting
    /\ ranges' = {}
    /\ batch' = {}
    /\ resetting' = NoPosition
    /\ reset_unapplied' = NoPosition
    /\ slowest_position' = resetting
    /\ acked' = ResetAcked(resetting)
    /\ UNCHANGED <<store_vars, broker_up, crashes, status, cursor_ledger, switching_to, retired, dirty, resets,
                   faults, lost, durable>>

-----------------------------------------------------------------------------
(* Persisting the cursor. *)

(* A new cursor ledger's first record: Pulsar writes lastMarkDeleteEntry,  *)
(* the last mark-delete submitted: a reset's once its record is written,   *)
(* else the state in memory (a reset still queued is not in it).           *)
FirstRecord == IF reset_unapplied # NoPosition THEN Persisted ELSE Snapshot

(* createNewMetadataLedger (Pulsar 4.0.7): create the cursor ledger and    *)
(* append a first record.  The mark-deletes queued stay queued (dirty, a   *)
(* pending reset): flushPendingMarkDeletes writes them after the switch.   *)
CursorCreatesLedger ==
    /\ Creates
    /\ next_id' = next_id + 1
    /\ cursor_ledgers' = Append(cursor_ledgers, <<next_id, <<FirstRecord>> >>)
    /\ status' = SwitchingLedger
    /\ switching_to' = next_id
    /\ UNCHANGED <<ledgers, deleted, znode, broker_up, crashes, mark_delete, ranges, batch, cursor_ledger,
                   retired, dirty, slowest_position, resetting, reset_unapplied, resets, faults, lost, acked,
                   durable>>

(* switchToNewLedger: the znode names the new ledger (mark-delete only);  *)
(* the old one is retired.  No mark-delete completes here: the queued ones *)
(* are written next, from Open (createNewMetadataLedger's                  *)
(* operationComplete calls flushPendingMarkDeletes, whose                  *)
(* internalMarkDelete completes them; Pulsar 4.0.7).                       *)
CursorSwitchesLedger ==
    /\ status = SwitchingLedger
    /\ switching_to # None
    /\ LET records == RecordsOf(switching_to)
           record == records[Len(records)]
       IN znode' = CursorInfo(switching_to, record.mark_delete, {}, {})
    /\ status' = Open
    /\ cursor_ledger' = switching_to
    /\ switching_to' = None
    /\ retired' = IF cursor_ledger # None THEN retired \cup {cursor_ledger} ELSE retired
    /\ UNCHANGED <<ledgers, deleted, next_id, cursor_ledgers, broker_up, crashes, mark_delete, ranges, batch,
                   dirty, slowest_position, resetting, reset_unapplied, resets, faults, lost, acked, durable>>

(* Does a failed cursor-ledger creation write the state to the znode?    *)
(* Pulsar 4.0.7 does only when no message follows the mark-delete          *)
(* (internalMarkDelete in NoLedger, isNoMessagesAfterPos).                 *)
FallsBackToZnode == ZnodeFallback = "always" \/ NoMessagesAfter(Ids, CountOf, Persisted.mark_delete)

(* BookKeeper cannot create the cursor ledger (createNewMetadataLedger's   *)
(* operationFailed, Pulsar 4.0.7): the cursor is NoLedger and the pending  *)
(* mark-delete runs there.  Where it falls back, the state goes to the     *)
(* znode (persistPositionToMetaStore, apache/pulsar#20935); elsewhere the  *)
(* mark-delete fails: isDirty, the znode keeps what it held.  A          *)
(* rollover's creation with no mark-delete queued only leaves the cursor   *)
(* NoLedger.                                                               *)
CursorLedgerCreationFails ==
    /\ Creates
    /\ faults < MaxFaults
    /\ IF ToPersist /\ FallsBackToZnode
       THEN /\ znode' = IF Bug = "no_store_fallback" THEN znode
                        ELSE CursorInfo(None, Persisted.mark_delete, Persisted.ranges, Persisted.batch)
            /\ status' = NoLedger
            /\ dirty' = FALSE
            /\ PersistCompletes
       ELSE /\ CreationFails
            /\ UNCHANGED <<znode, mark_delete, ranges, batch, slowest_position, acked, durable>>
    /\ faults' = faults + 1
    /\ UNCHANGED <<ledgers, deleted, next_id, cursor_ledgers, broker_up, crashes, cursor_ledger,
                   switching_to, retired, resets, lost>>

(* ManagedCursorImpl.createNewMetadataLedger (Pulsar 4.0.7): BookKeeper    *)
(* creates the cursor ledger, so its id is spent, but the append of its    *)
(* first record fails.  persistPositionToLedger falls back to the znode    *)
(* (persistPositionToMetaStore) and that write fails too: the new ledger   *)
(* is deleted (deleteLedgerAsync, never read) and operationFailed, seeing  *)
(* a MetaStoreException, fails the pending mark-deletes: NoLedger, the     *)
(* state in memory only.  Two failed calls, as CursorZnodeWriteFails.      *)
(* When the fallback write succeeds instead, Pulsar names the new ledger,  *)
(* which holds no record, in the znode: left out (docs/real-systems.md).   *)
CursorLedgerFirstWriteFails ==
    /\ Creates
    /\ faults + 2 <= MaxFaults
    /\ next_id' = next_id + 1
    /\ faults' = faults + 2
    /\ CreationFails
    /\ UNCHANGED <<ledgers, deleted, cursor_ledgers, znode, broker_up, crashes, mark_delete, ranges, batch,
                   cursor_ledger, switching_to, retired, slowest_position, resets, lost, acked, durable>>

(* persistPositionToLedger: append the state to the cursor ledger; a full  *)
(* ledger is then replaced (rolloverLedgerIfNeeded: SwitchingLedger, the   *)
(* successor's creation starts once this persist completed).  A ledger     *)
(* that is gone fails the append.  With                                    *)
(* the seeded bug ack_persists_over_reset, an ack during a pending reset   *)
(* appends the state from before the reset after the reset's record, as    *)
(* Pulsar 4.0.7 can (asyncDelete persists while resetCursorInProgress).    *)
(* apache/pulsar#26304 reports the same outcome on master: a mark-delete   *)
(* queued after a reset discards it.                                       *)
CursorPersistsToLedger ==
    /\ status = Open
    /\ ToPersist
    /\ HasCursorLedger(cursor_ledger)
    /\ LET written == IF Bug = "ack_persists_over_reset" /\ ResetPending /\ dirty
                      THEN <<Persisted, Snapshot>> ELSE <<Persisted>>
           records == RecordsOf(cursor_ledger) \o written
           \* shouldCloseLedger (ManagedCursorImpl, Pulsar 4.0.7): LAC >= M, so M+1 records.
           full == Len(records) - 1 >= MetadataMaxEntriesPerLedger
       IN /\ cursor_ledgers' = [i \in DOMAIN cursor_ledgers |->
                                   IF cursor_ledgers[i][1] = cursor_ledger THEN <<cursor_ledger, records>>
                                   ELSE cursor_ledgers[i]]
          /\ status' = IF full THEN SwitchingLedger ELSE Open
          /\ dirty' = FALSE
    /\ PersistCompletes
    /\ UNCHANGED <<ledgers, deleted, next_id, znode, broker_up, crashes, cursor_ledger, switching_to, retired,
                   resets, faults, lost>>

(* An append to the cursor ledger fails: the state goes to the znode       *)
(* instead (persistPositionToMetaStore).  A lost ledger fails every        *)
(* append, with no fault of its own.                                       *)
CursorLedgerWriteFails ==
    /\ status = Open
    /\ ToPersist
    /\ LET gone == ~HasCursorLedger(cursor_ledger)
       IN /\ gone \/ faults < MaxFaults
          /\ faults' = IF gone THEN faults ELSE faults + 1
    /\ znode' = CursorInfo(None, Persisted.mark_delete, Persisted.ranges, Persisted.batch)
    /\ status' = NoLedger
    /\ dirty' = FALSE
    /\ PersistCompletes
    /\ UNCHANGED <<ledgers, deleted, next_id, cursor_ledgers, broker_up, crashes, cursor_ledger, switching_to,
                   retired, resets, lost>>

(* ManagedCursorImpl.switchToNewLedger (Pulsar 4.0.7): the metadata-store *)
(* write that names the new ledger fails.  The new ledger is deleted       *)
(* (deleteLedgerAsync), the cursor keeps the ledger it held, and           *)
(* createNewMetadataLedger's operationFailed, seeing a MetaStoreException, *)
(* sets NoLedger and fails the pending mark-deletes: the state stays in    *)
(* memory only, to persist again (isDirty).                                *)
CursorLedgerSwitchFails ==
    /\ status = SwitchingLedger
    /\ switching_to # None
    /\ faults < MaxFaults
    /\ cursor_ledgers' = WithoutCursorLedger(switching_to)
    /\ switching_to' = None
    /\ CreationFails
    /\ faults' = faults + 1
    /\ UNCHANGED <<ledgers, deleted, next_id, znode, broker_up, crashes, mark_delete, ranges, batch,
                   cursor_ledger, retired, slowest_position, resets, lost, acked, durable>>

(* The failed writes of a persist whose fallback to the znode fails: the   *)
(* BookKeeper call (none when the cursor ledger is gone, which fails every *)
(* append by itself) and the metadata-store write.                         *)
ZnodeWriteFailureCost == IF status = Open /\ ~HasCursorLedger(cursor_ledger) THEN 1 ELSE 2

(* ManagedCursorImpl.persistPositionToMetaStore (Pulsar 4.0.7): the cursor *)
(* ledger cannot be created (internalMarkDelete in NoLedger) or an append  *)
(* to it fails (persistPositionToLedger), and the fallback write of the    *)
(* state to the znode fails too.  The mark-delete fails (the callback's   *)
(* operationFailed in internalMarkDelete: isDirty = true, and              *)
(* persistentMarkDeletePosition kept):                                     *)
(* the znode keeps what it held, the state stays in memory only, and the   *)
(* cursor is NoLedger.                                                     *)
CursorZnodeWriteFails ==
    /\ status \in {NoLedger, Open}
    /\ ToPersist
    /\ status = NoLedger => FallsBackToZnode
    /\ faults + ZnodeWriteFailureCost <= MaxFaults
    /\ status' = NoLedger
    /\ faults' = faults + ZnodeWriteFailureCost
    /\ PersistFails
    /\ UNCHANGED <<store_vars, broker_up, crashes, mark_delete, ranges, batch, cursor_ledger, switching_to,
                   retired, slowest_position, resets, lost, acked, durable>>

\* A cursor ledger no longer named by the znode is deleted.
CursorDeletesOldLedger(l) ==
    /\ broker_up
    /\ l \in retired
    /\ cursor_ledgers' = WithoutCursorLedger(l)
    /\ retired' = retired \ {l}
    /\ UNCHANGED <<ledgers, deleted, next_id, znode, broker_up, crashes, status, mark_delete, ranges, batch,
                   cursor_ledger, switching_to, dirty, slowest_position, resetting, reset_unapplied, resets, faults,
                   lost, acked,
                   durable>>

(* A clean close: the znode gets the whole state with cursorsLedgerId =   *)
(* -1; the cursor ledger is retired.  persistPositionWhenClosing tells the *)
(* managed ledger nothing: its position of the cursor stays.  Not while a  *)
(* reset is pending (docs/real-systems.md).                                *)
CursorCloses ==
    /\ status \in {NoLedger, Open}
    /\ ~ResetPending
    /\ znode' = CursorInfo(None, mark_delete, ranges, batch)
    /\ status' = Closed
    /\ cursor_ledger' = None
    /\ retired' = IF cursor_ledger # None THEN retired \cup {cursor_ledger} ELSE retired
    /\ dirty' = FALSE
    /\ durable' = durable \cup CursorCovers
    /\ UNCHANGED <<ledgers, deleted, next_id, cursor_ledgers, broker_up, crashes, mark_delete, ranges, batch,
                   switching_to, slowest_position, resetting, reset_unapplied, resets, faults, lost, acked>>

-----------------------------------------------------------------------------
(* The broker's crash and the restore. *)

\* The broker dies (or stops after a clean close): the cursor's memory is gone, the stores stay.
BrokerCrashes ==
    /\ broker_up
    /\ crashes < MaxCrashes
    /\ broker_up' = FALSE
    /\ crashes' = crashes + 1
    /\ status' = Uninitialized
    /\ mark_delete' = NoPosition
    /\ ranges' = {}
    /\ batch' = {}
    /\ cursor_ledger' = None
    /\ switching_to' = None
    /\ retired' = {}
    /\ dirty' = FALSE
    /\ slowest_position' = NoPosition
    /\ resetting' = NoPosition
    /\ UNCHANGED <<store_vars, resets, faults, lost, acked, durable, reset_unapplied>>

\* The broker opens the managed ledger again: an empty last ledger is dropped and a new one created.
ManagedLedgerOpens ==
    /\ ~broker_up
    /\ LET dropLast == ledgers[Len(ledgers)][2] = 0
           kept == IF dropLast THEN SubSeq(ledgers, 1, Len(ledgers) - 1) ELSE ledgers
       IN /\ ledgers' = Append(kept, <<next_id, 0>>)
          /\ deleted' = IF dropLast THEN deleted \cup {ledgers[Len(ledgers)]} ELSE deleted
    /\ next_id' = next_id + 1
    /\ broker_up' = TRUE
    /\ UNCHANGED <<cursor_ledgers, znode, crashes, cursor_vars, resets, faults, lost, acked, durable, reset_unapplied>>

(* recover: from the znode when cursorsLedgerId = -1; else from the cursor *)
(* ledger's last record; when that ledger cannot be read, roll back to the *)
(* znode's mark-delete raised to the first position (getRollbackPosition), *)
(* with no individual acks, and persist that.  Then recoveredCursor; the   *)
(* managed ledger holds the restored mark-delete for the cursor (addCursor, *)
(* ManagedLedgerImpl, Pulsar 4.0.7).                                       *)
CursorRecovers ==
    /\ broker_up
    /\ status = Uninitialized
    /\ LET info == znode
           fromZnode == info.cursors_ledger = None /\ Bug # "restore_ignores_no_ledger"
           fromLedger == ~fromZnode /\ info.cursors_ledger # None /\ HasCursorLedger(info.cursors_ledger)
                         /\ RecordsOf(info.cursors_ledger) # <<>>
           last == IF fromLedger THEN LET r == RecordsOf(info.cursors_ledger) IN r[Len(r)] ELSE Snapshot
           rollback == PosMax(info.mark_delete, FirstPosition)
           md0 == IF fromZnode THEN info.mark_delete ELSE IF fromLedger THEN last.mark_delete ELSE rollback
           rs0 == IF fromZnode THEN info.ranges ELSE IF fromLedger THEN last.ranges ELSE {}
           bs0 == IF fromZnode THEN info.batch ELSE IF fromLedger THEN last.batch ELSE {}
           md1 == IF Bug = "restore_skips_unacked" /\ rs0 # {} THEN PosMax(md0, PosSetMax(rs0)) ELSE md0
           md == Recovered(md1)
       IN /\ znode' = IF fromZnode \/ fromLedger THEN znode ELSE CursorInfo(None, rollback, {}, {})
          /\ cursor_ledger' = IF fromLedger THEN info.cursors_ledger ELSE None
          /\ mark_delete' = md
          /\ ranges' = After(md, rs0)
          /\ batch' = BatchAfter(md, bs0)
          /\ slowest_position' = md
    /\ status' = NoLedger
    \* A reset persisted but not taken before the crash is taken now: the restore finds its record.
    /\ acked' = IF reset_unapplied # NoPosition THEN ResetAcked(reset_unapplied) ELSE acked
    /\ reset_unapplied' = NoPosition
    /\ UNCHANGED <<ledgers, deleted, next_id, cursor_ledgers, broker_up, crashes, switching_to, retired, dirty,
                   resetting, resets, faults, lost, durable>>

-----------------------------------------------------------------------------
(* Consumed ledgers. *)

(* ManagedLedgerImpl.maybeUpdateCursorBeforeTrimmingConsumedLedger (Pulsar *)
(* 4.0.7, at the open and after a rollover; here at any time): when the    *)
(* cursor's mark-delete in memory is at its ledger's last entry and a      *)
(* later ledger is listed, the managed ledger's position of the cursor     *)
(* moves to <<next ledger, -1>> (onCursorMarkDeletePositionUpdated).  The  *)
(* cursor's own mark-delete stays, and nothing is persisted: trimming may  *)
(* then delete the ledger the cursor's durable state points into (the      *)
(* restore keeps such a mark-delete: recoveredCursor moves only <<l, -1>>). *)
CursorSkipsConsumedLedger ==
    /\ status \in Active
    /\ mark_delete[1] \in Range(Ids)
    /\ NextLedgerOf(mark_delete[1]) # None
    /\ mark_delete[2] # -1
    /\ mark_delete[2] + 1 >= CountOf(mark_delete[1]) \/ Bug = "skip_unconsumed_ledger"
    /\ slowest_position # <<NextLedgerOf(mark_delete[1]), -1>>
    /\ slowest_position' = <<NextLedgerOf(mark_delete[1]), -1>>
    /\ UNCHANGED <<store_vars, broker_up, crashes, status, mark_delete, ranges, batch, cursor_ledger, switching_to,
                   retired, dirty, resetting, reset_unapplied, resets, faults, lost, acked, durable>>

(* The ledgers before the slowest reader's ledger are deleted, never the   *)
(* current one.  Trimming by the cursor's mark-delete in memory instead    *)
(* would lose no unacknowledged message either (that mark-delete covers    *)
(* only acknowledged ones): no invariant here tells the two apart.         *)
TrimConsumedLedgers ==
    /\ status \in Active
    /\ LET slowest == IF Bug = "trim_deletes_needed_ledger"
                      THEN slowest_position[1] + 1
                      ELSE SlowestReaderLedger(Ids, CountOf, slowest_position)
           last == ledgers[Len(ledgers)][1]
           gone == {x \in Range(ledgers) : x[1] < slowest /\ x[1] # last}
       IN /\ gone # {}
          /\ ledgers' = SelectSeq(ledgers, LAMBDA x : x \notin gone)
          /\ deleted' = deleted \cup gone
    /\ UNCHANGED <<next_id, cursor_ledgers, znode, broker_up, crashes, cursor_vars, resets, faults, lost, acked,
                   durable, reset_unapplied>>

-----------------------------------------------------------------------------
(* Faults of the environment. *)

(* BookKeeper loses the cursor ledger the znode names: it can no longer be *)
(* read.  Not after a reset: the rollback would take the znode's           *)
(* mark-delete (getRollbackPosition), which a reset back leaves ahead of   *)
(* the cursor, and skip what the reset made unacknowledged                 *)
(* (docs/real-systems.md).                                                 *)
CursorLedgerLost(l) ==
    /\ lost < MaxLedgerLoss
    /\ resets = 0
    /\ l = znode.cursors_ledger
    /\ cursor_ledgers' = WithoutCursorLedger(l)
    /\ retired' = retired \ {l}
    /\ lost' = lost + 1
    /\ UNCHANGED <<ledgers, deleted, next_id, znode, broker_up, crashes, status, mark_delete, ranges, batch,
                   cursor_ledger, switching_to, dirty, slowest_position, resetting, reset_unapplied, resets, faults,
                   acked, durable>>

-----------------------------------------------------------------------------
Next ==
    \/ EntryPublished
    \/ LedgerRollsOver
    \/ \E x \in Range(ledgers) : \E e \in 0 .. x[2] - 1 : \E i \in 0 .. BatchSize - 1 : ConsumerAcks(x[1], e, i)
    \/ \E p \in ResetTargets : CursorResetStarts(p)
    \/ CursorResetCompletes
    \/ CursorCreatesLedger
    \/ CursorSwitchesLedger
    \/ CursorLedgerCreationFails
    \/ CursorLedgerFirstWriteFails
    \/ CursorPersistsToLedger
    \/ CursorLedgerWriteFails
    \/ CursorLedgerSwitchFails
    \/ CursorZnodeWriteFails
    \/ \E l \in retired : CursorDeletesOldLedger(l)
    \/ CursorCloses
    \/ BrokerCrashes
    \/ ManagedLedgerOpens
    \/ CursorRecovers
    \/ CursorSkipsConsumedLedger
    \/ TrimConsumedLedgers
    \/ \E x \in Range(cursor_ledgers) : CursorLedgerLost(x[1])

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants. *)

\* Every variable holds a value of its type, within the model's bounds.
TypeOK ==
    /\ Len(ledgers) > 0
    /\ \A i \in 1 .. Len(ledgers) : ledgers[i][1] < next_id /\ (i > 1 => ledgers[i - 1][1] < ledgers[i][1])
    /\ status \in {Uninitialized, NoLedger, Open, SwitchingLedger, Closed}
    /\ crashes <= MaxCrashes /\ faults <= MaxFaults /\ lost <= MaxLedgerLoss /\ resets <= MaxResets
    /\ ResetPending => status \in {NoLedger, Open, SwitchingLedger}
    /\ switching_to # None => status = SwitchingLedger
    /\ reset_unapplied # NoPosition /\ status # Uninitialized => resetting = reset_unapplied
    /\ \A p \in ranges : PosLess(mark_delete, p)
    /\ \A m \in batch : PosLess(mark_delete, <<m[1], m[2]>>)

(* The cursor never covers a message the consumer did not acknowledge,    *)
(* also after a restore; after a reset, what the reset left acknowledged.  *)
CursorSkipsNoUnackedMessage ==
    status # Uninitialized => CursorCovers \subseteq acked

(* Every acknowledgement a completed persist covered is kept by the        *)
(* cursor, also after a restore (unless BookKeeper lost the cursor ledger); *)
(* by the reset the cursor is taking, when its record is persisted.        *)
OnlyUnpersistedAcksRedelivered ==
    status # Uninitialized /\ lost = 0 =>
        durable \subseteq IF reset_unapplied # NoPosition THEN Covered(reset_unapplied, {}, {}) ELSE CursorCovers

(* The managed ledger's position of the cursor covers no message the      *)
(* cursor does not: trimming never passes what the cursor acknowledged.    *)
TrimPositionBehindCursor ==
    status \in Active => Covered(slowest_position, {}, {}) \subseteq CursorCovers

\* No trimmed ledger holds a message the consumer did not acknowledge.
TrimKeepsUnconsumedEntries ==
    \A x \in deleted : \A e \in 0 .. x[2] - 1 : EntryMessages(x[1], e) \subseteq acked

(* While the cursor is active, its mark-delete position only moves        *)
(* forward, but where a reset takes effect (a PROPERTY).                   *)
MarkDeleteNeverMovesBackwards ==
    [][(status \in Active /\ status' \in Active /\ ~(ResetPending /\ ~ResetPending'))
       => PosLeq(mark_delete, mark_delete')]_vars
=============================================================================
