--------------------------- MODULE managed_ledger ---------------------------
(***************************************************************************)
(* A Pulsar managed ledger: the ledger list, rollover, publish with dedup, *)
(* broker crash and reopen, trimming.  The twin of spec/managed_ledger/managed_ledger.py: *)
(* same variables, actions and invariants by the same names; TLC and the   *)
(* Python explorer reach the same states.                                  *)
(*                                                                         *)
(* Modelled (pulsar managed-ledger ManagedLedgerImpl, the broker's         *)
(* MessageDeduplication; BRIEF section 4, seeds 002 and 003):              *)
(*  - one topic partition whose ledger list lives in the metadata store;   *)
(*    only the last ledger of the list is written to; ledger ids come from *)
(*    one counter, so a new ledger's id is above every other;              *)
(*  - producers sending batches (one entry each) with sequence ids         *)
(*    0 .. MaxMessages-1, in order, on one connection; after a broker      *)
(*    crash a producer sends again every batch not acknowledged;           *)
(*  - the dedup check, where Dedup is on: a sequence id at most the        *)
(*    highest persisted is a duplicate, acknowledged without being         *)
(*    written; one above it and at most the highest pushed is Unknown: the *)
(*    send fails, the producer's connection closes and it sends again.     *)
(*    With Dedup off every batch is written: after a crash or a dropped    *)
(*    connection a batch can be written twice;                             *)
(*  - creating the next ledger failing (at most MaxCreateFailures times):  *)
(*    the adds queued for it fail, their producers send again, and the     *)
(*    next add creates a ledger;                                           *)
(*  - a producer's connection dropping (at most MaxDisconnects times): it  *)
(*    reconnects and sends again every batch not acknowledged;             *)
(*  - adds to BookKeeper complete in order; the producer gets the ids      *)
(*    ledgerId:entryId:partition:batchIndex;                               *)
(*  - rollover (currentLedgerIsFull, seed 002) on entries, size or age,    *)
(*    with the minimum rollover time, judged as Pulsar judges it: when an  *)
(*    add is sent, counting it and the adds in flight; the add that fills  *)
(*    the ledger is its last, and the adds that arrive while it closes and *)
(*    the next is created wait, then go to the new ledger; a timer rolls a *)
(*    ledger full by age that holds an entry;                              *)
(*  - a broker crash (a prefix of the adds in flight may have reached the  *)
(*    bookies) and the reopen: recover the last ledger, drop it if empty,  *)
(*    create a new one, rebuild the dedup state from the entries;          *)
(*  - another broker taking the topic over while the old one still runs    *)
(*    (at most MaxTakeovers times): the old broker keeps the ledger list   *)
(*    it read and its version, and its rollover writes that list by        *)
(*    compare-and-set, which fails once the new owner wrote the list       *)
(*    (BadVersionException: the old managed ledger is fenced);             *)
(*  - lastConfirmedEntry, what readers are shown: set by each add, and on  *)
(*    reopen stepped back from the new ledger to the last entry written;   *)
(*  - durable cursors reduced to two mark-delete positions: the one in     *)
(*    memory (markDeletePosition), which an acknowledgement moves, and the *)
(*    one their durable state holds (persistentMarkDeletePosition), which  *)
(*    a completed persist sets (cursor.tla models the cursor ledger and    *)
(*    the znode); a crash loses what was not persisted: the reopen         *)
(*    restores the durable one as recoveredCursor does (never past         *)
(*    lastConfirmedEntry: a step back over no entry). acknowledged is each *)
(*    consumer's own record of what it acknowledged, kept over a crash;   *)
(*  - trimming by the position the managed ledger holds for each cursor    *)
(*    (slowest_position, ManagedCursorContainer): each completed persist   *)
(*    and the reopen set it; a cursor at a ledger's last entry in memory   *)
(*    is held at <<next ledger, -1>>, its own mark-delete staying; then    *)
(*    the ledgers before the slowest reader's    *)
(*    ledger x go (x too when that position is x's last entry and x is not *)
(*    the last ledger), never the current one.                             *)
(*                                                                         *)
(* Left out, and why that is sound here: payloads (an entry's content is   *)
(* its <<producer, sequence id>>, its size its message count); time beyond *)
(* Ticks and what the rollover rules can tell apart; the replies lost with *)
(* a dropped connection (acks reach the producer, which would learn them   *)
(* as duplicates); an old broker's adds after a takeover end as in a crash *)
(* and its one further list write is the rollover (a trim's compare-and-   *)
(* set fails the same way);                                                *)
(* retention and offloading; the dedup cursor, whose snapshot is assumed   *)
(* to cover every entry trimmed.                                           *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, positions

CONSTANTS
    NumProducers,         \* producers publishing to the topic
    MaxMessages,          \* batches each producer sends, sequence ids 0 .. MaxMessages-1
    BatchSize,            \* messages in a batch (one entry); 1: not batched, batch index -1
    Partitioned,          \* the topic is partition 0 of a partitioned topic; else partition index -1
    MaxEntriesPerLedger,  \* entries after which a ledger is full (0: every add fills it)
    MaxSizePerLedger,     \* messages after which a ledger is full (0: every add fills it)
    MaximumRolloverTime,  \* ticks after which a ledger is full (0: at once)
    MinimumRolloverTime,  \* ticks a ledger must be older than to roll over; 0: none
    Ticks,                \* how old the model lets a ledger grow: later ticks are not modelled
    NumCursors,           \* durable cursors (subscriptions)
    MaxCrashes,           \* broker crashes in all
    Dedup,                \* brokerDeduplicationEnabled for the topic
    MaxDisconnects,       \* producer connections dropped in all
    MaxCreateFailures,    \* ledger creations that fail, in all
    MaxTakeovers,         \* times another broker takes the topic over while the old one still runs
    Bug                   \* "none" or a seeded bug, as in managed_ledger.py's BUGS

ASSUME /\ BatchSize >= 1 /\ Partitioned \in BOOLEAN /\ Dedup \in BOOLEAN /\ MaxDisconnects \in Nat
       /\ MaxCreateFailures \in Nat /\ MaxTakeovers \in Nat
       /\ \A k \in {NumProducers, MaxMessages, NumCursors, MaxCrashes, MaxEntriesPerLedger, MaxSizePerLedger,
                    MaximumRolloverTime, MinimumRolloverTime, Ticks} : k \in Nat
       \* ManagedLedgerConfig.setMaximumRolloverTime: the maximum is not below the minimum.
       /\ MaximumRolloverTime >= MinimumRolloverTime
       /\ Bug \in {"none", "trim_deletes_needed_ledger", "dedup_forgets_on_reopen", "reopen_confirms_new_ledger",
                  "closing_ledger_takes_adds", "unknown_answered_as_duplicate",
                  "failed_creation_acks_queued", "blind_ledger_list_write", "persists_read_position"}

VARIABLES
    \* -- the metadata store and the bookies
    ledgers,         \* the ledger list in ManagedLedgerInfo, increasing ids
    entries,         \* ledger l -> its entries <<producer, sequence id>>; every ledger ever created
    deleted,         \* ledgers taken out of the list and deleted
    persistent_mark_delete, \* cursor -> the mark-delete its durable state holds
    \* -- the broker
    broker_up,
    current,         \* the ledger being written, or -1
    age,             \* ticks since the current ledger was created
    pending,         \* adds sent to BookKeeper, not yet completed, in order
    closing,         \* ClosingLedger: the add that filled the current ledger is sent, it takes no other
    queued,          \* adds that arrived while the ledger closes, for the next (pendingAddEntries)
    highest_pushed,  \* producer -> highest sequence id accepted (highestSequencedPushed)
    highest_persisted, \* producer -> highest sequence id written (highestSequencedPersisted)
    last_confirmed,  \* lastConfirmedEntry: the last entry readers are shown, or NoPosition while down
    slowest_position, \* cursor -> the position trimming goes by (ManagedCursorContainer)
    mark_delete,     \* cursor -> its mark-delete in memory; kept while down, until the reopen
    crashes,         \* broker crashes so far
    create_failures, \* ledger creations failed so far
    \* -- producers
    sent,            \* producer -> sequence ids sent so far
    acked,           \* producer -> highest sequence id acknowledged (acks come in order)
    net,             \* producer -> sequence ids in flight to the broker, in order
    reconnecting,    \* producer -> its connection closed: it sends every batch not acknowledged again
    disconnects,     \* producer connections dropped so far
    last_id,         \* the last message id handed to a producer
    \* -- consumers
    acknowledged,    \* cursor -> the furthest entry its consumer acknowledged (a crash keeps it)
    \* -- a broker that lost the topic to another and still runs
    takeovers,       \* takeovers so far
    old_broker,      \* the ledger list that broker holds, <<>> when there is none
    old_broker_stale \* the list in the store was written since that broker read it (its version is old)

store_vars == <<ledgers, entries, deleted, persistent_mark_delete>>
broker_vars == <<broker_up, current, age, pending, closing, queued, highest_pushed, highest_persisted, last_confirmed,
                  slowest_position, mark_delete, crashes, create_failures>>
consumer_vars == <<acknowledged>>
producer_vars == <<sent, acked, net, reconnecting, disconnects, last_id>>
takeover_vars == <<takeovers, old_broker, old_broker_stale>>
vars == <<store_vars, broker_vars, producer_vars, consumer_vars, takeover_vars>>

-----------------------------------------------------------------------------
Producers == 1 .. NumProducers
Cursors == 1 .. NumCursors
NoLedger == -1
Max(a, b) == IF a >= b THEN a ELSE b
PosMin(a, b) == IF PosLeq(a, b) THEN a ELSE b

(* currentLedgerIsFull (ManagedLedgerImpl, Pulsar 4.0.7): a space or time *)
(* limit is reached, and the ledger is older than the minimum rollover    *)
(* time.  A limit of 0 is reached at once, as in Pulsar's                 *)
(* ManagedLedgerConfig; its defaults (100 MB, 4 hours) lie beyond the      *)
(* model's batches and Ticks.                                              *)
LedgerIsFull(n, a) ==
    LET space == n >= MaxEntriesPerLedger \/ n * BatchSize >= MaxSizePerLedger
        time == a >= MaximumRolloverTime
    IN (space \/ time) /\ (MinimumRolloverTime > 0 => a > MinimumRolloverTime)

(* The clock stops at Ticks, or earlier where later ages are alike for    *)
(* the rollover rules.                                                     *)
MaxAge == LET alike == IF MinimumRolloverTime > 0 THEN Max(MaximumRolloverTime, MinimumRolloverTime + 1)
                       ELSE MaximumRolloverTime
          IN IF Ticks <= alike THEN Ticks ELSE alike

\* Entries of the current ledger, those in flight included.
Written == Len(entries[current]) + Len(pending)

\* The id of the last message of the entry at pos.
PartitionIndex == IF Partitioned THEN 0 ELSE -1
LastMessageId(pos) == <<pos[1], pos[2], PartitionIndex, IF BatchSize = 1 THEN -1 ELSE BatchSize - 1>>

IdLess(a, b) == \E i \in 1 .. 4 : a[i] < b[i] /\ \A j \in 1 .. i - 1 : a[j] = b[j]

AllEntries == UNION {Range(entries[l]) : l \in DOMAIN entries}

(* lastConfirmedEntry as ManagedLedgerImpl.initializeBookKeeper sets it  *)
(* once the new ledger l is created (Pulsar 4.0.7): <<l, -1>>, stepped    *)
(* back over the ledgers of the list that hold no entry to the last entry *)
(* of the latest that holds one.                                          *)
OpenedLastConfirmed(kept, l) ==
    LET written == {x \in Range(kept) : Len(entries[x]) > 0}
    IN IF written = {} \/ Bug = "reopen_confirms_new_ledger" THEN <<l, -1>>
       ELSE <<SetMax(written), Len(entries[SetMax(written)]) - 1>>

(* No entry lies in (a, b]: a and b stand for the same entries consumed.   *)
NoEntryBetween(es, a, b) ==
    ~\E l \in DOMAIN es : \E i \in DOMAIN es[l] : PosLess(a, <<l, i - 1>>) /\ PosLeq(<<l, i - 1>>, b)

\* The highest sequence id each producer has in the entries written.
RecoveredDedup == [p \in Producers |-> SetMax({-1} \cup {m[2] : m \in {m \in AllEntries : m[1] = p}})]

(* The producer's connection closed, or it has batches not acknowledged   *)
(* that are neither in flight nor at the broker: lost in a crash.          *)
AwaitsResend(p) ==
    \/ reconnecting[p]
    \/ /\ acked[p] + 1 < sent[p]
       /\ net[p] = <<>>
       /\ \A i \in DOMAIN pending : pending[i][1] # p
       /\ \A i \in DOMAIN queued : queued[i][1] # p

-----------------------------------------------------------------------------
Init ==
    /\ ledgers = <<1>>
    /\ entries = << <<>> >>
    /\ deleted = {}
    /\ persistent_mark_delete = [c \in Cursors |-> <<1, -1>>]
    /\ mark_delete = [c \in Cursors |-> <<1, -1>>]
    /\ acknowledged = [c \in Cursors |-> <<1, -1>>]
    /\ broker_up = TRUE
    /\ current = 1
    /\ age = 0
    /\ pending = <<>>
    /\ closing = FALSE
    /\ queued = <<>>
    /\ highest_pushed = [p \in Producers |-> -1]
    /\ highest_persisted = [p \in Producers |-> -1]
    /\ last_confirmed = <<1, -1>>
    /\ slowest_position = [c \in Cursors |-> <<1, -1>>]
    /\ crashes = 0
    /\ create_failures = 0
    /\ sent = [p \in Producers |-> 0]
    /\ acked = [p \in Producers |-> -1]
    /\ net = [p \in Producers |-> <<>>]
    /\ reconnecting = [p \in Producers |-> FALSE]
    /\ disconnects = 0
    /\ last_id = <<-1, -1, -1, -1>>
    /\ takeovers = 0
    /\ old_broker = <<>>
    /\ old_broker_stale = FALSE

-----------------------------------------------------------------------------
(* Producers. *)

\* The producer sends its next batch on its connection; batches lost in a crash go first.
ProducerSends(p) ==
    /\ broker_up
    /\ sent[p] < MaxMessages
    /\ ~AwaitsResend(p)
    /\ sent' = [sent EXCEPT ![p] = @ + 1]
    /\ net' = [net EXCEPT ![p] = Append(@, sent[p])]
    /\ UNCHANGED <<store_vars, broker_vars, acked, reconnecting, disconnects, last_id>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

(* Reconnected, the producer sends again, in order, every batch not        *)
(* acknowledged (ProducerImpl.resendMessages, Pulsar client 4.0.7).        *)
ProducerResends(p) ==
    /\ broker_up
    /\ AwaitsResend(p)
    /\ net' = [net EXCEPT ![p] = [i \in 1 .. sent[p] - acked[p] - 1 |-> acked[p] + i]]
    /\ reconnecting' = [reconnecting EXCEPT ![p] = FALSE]
    /\ UNCHANGED <<store_vars, broker_vars, sent, acked, disconnects, last_id>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

(* The producer's connection drops while a batch is not acknowledged: the  *)
(* batches on it are lost; the broker keeps the adds it accepted.          *)
ConnectionDrops(p) ==
    /\ broker_up
    /\ disconnects < MaxDisconnects
    /\ ~reconnecting[p]
    /\ acked[p] + 1 < sent[p]
    /\ net' = [net EXCEPT ![p] = <<>>]
    /\ reconnecting' = [reconnecting EXCEPT ![p] = TRUE]
    /\ disconnects' = disconnects + 1
    /\ UNCHANGED <<store_vars, broker_vars, sent, acked, last_id>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

-----------------------------------------------------------------------------
(* The broker. *)

(* The dedup check (MessageDeduplication.isDuplicate, Pulsar 4.0.7; with  *)
(* Dedup off every batch is new): a duplicate, at most the highest        *)
(* persisted, is acknowledged (message id -1:-1) and not written; one      *)
(* above that and at most the highest pushed is Unknown: PersistentTopic   *)
(* fails the send and the client closes its connection                    *)
(* (ClientCnx.handleSendError), to send again.                             *)
(* A new batch goes to BookKeeper as the next entry; if, counted *)
(* with the adds in flight, it fills the ledger, it is the ledger's last   *)
(* (closeWhenDone).  While the ledger closes a new batch is queued         *)
(* (ManagedLedgerImpl.internalAsyncAddEntry, Pulsar 4.0.7).                *)
BrokerReceives(p) ==
    /\ broker_up
    /\ net[p] # <<>>
    /\ LET seq == Head(net[p]) IN
          IF Dedup /\ seq <= highest_pushed[p]
          THEN /\ IF seq <= highest_persisted[p] \/ Bug = "unknown_answered_as_duplicate"
                  THEN /\ net' = [net EXCEPT ![p] = Tail(@)]
                       /\ acked' = [acked EXCEPT ![p] = Max(@, seq)]
                       /\ UNCHANGED reconnecting
                  ELSE /\ net' = [net EXCEPT ![p] = <<>>]
                       /\ reconnecting' = [reconnecting EXCEPT ![p] = TRUE]
                       /\ UNCHANGED acked
               /\ UNCHANGED <<highest_pushed, pending, closing, queued>>
          ELSE /\ net' = [net EXCEPT ![p] = Tail(@)]
               /\ highest_pushed' = IF Dedup THEN [highest_pushed EXCEPT ![p] = seq] ELSE highest_pushed
               /\ UNCHANGED reconnecting
               /\ IF (closing /\ Bug # "closing_ledger_takes_adds") \/ current = NoLedger
                  THEN /\ queued' = Append(queued, <<p, seq>>)
                       /\ UNCHANGED <<pending, closing>>
                  ELSE /\ pending' = Append(pending, <<p, seq>>)
                       /\ closing' = (closing \/ LedgerIsFull(Written + 1, age))
                       /\ UNCHANGED queued
               /\ UNCHANGED acked
    /\ UNCHANGED <<store_vars, broker_up, current, age, highest_persisted, last_confirmed, slowest_position, mark_delete,
                   crashes,
                   create_failures, sent, disconnects, last_id>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

(* The oldest add in flight reaches its ack quorum; the producer gets its *)
(* message ids, readers the entry (OpAddEntry.run sets lastConfirmedEntry, *)
(* Pulsar 4.0.7).                                                          *)
BookKeeperCompletesAdd ==
    /\ broker_up
    /\ pending # <<>>
    /\ LET m == Head(pending) IN
          /\ entries' = [entries EXCEPT ![current] = Append(@, m)]
          /\ acked' = [acked EXCEPT ![m[1]] = Max(@, m[2])]
          \* recordMessagePersisted
          /\ highest_persisted' = IF Dedup THEN [highest_persisted EXCEPT ![m[1]] = Max(@, m[2])]
                                  ELSE highest_persisted
          /\ last_id' = LastMessageId(<<current, Len(entries[current])>>)
          /\ last_confirmed' = <<current, Len(entries[current])>>
    /\ pending' = Tail(pending)
    /\ UNCHANGED <<ledgers, deleted, persistent_mark_delete, mark_delete, broker_up, current, age, closing, queued,
                   highest_pushed, slowest_position, crashes, create_failures, sent, net, reconnecting, disconnects>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

\* How many of the queued adds the new ledger takes: up to the one that fills it, or all.
Taken(q) == LET fills == {i \in 1 .. Len(q) : LedgerIsFull(i, 0)}
            IN IF fills = {} THEN Len(q) ELSE SetMin(fills)

(* The current ledger is to be closed: its last add completed (OpAddEntry *)
(* .run with closeWhenDone), or the rollover timer finds it full with an   *)
(* entry and nothing in flight (rollCurrentLedgerIfFull).                  *)
ToClose ==
    /\ current # NoLedger
    /\ pending = <<>>
    /\ Len(entries[current]) > 0
    /\ closing \/ LedgerIsFull(Len(entries[current]), age)

(* The serving broker writes the ledger list: the version a broker that   *)
(* lost the topic holds is old from then on.                               *)
ListWritten ==
    /\ old_broker_stale' = (old_broker # <<>>)
    /\ UNCHANGED <<takeovers, old_broker>>
    /\ UNCHANGED consumer_vars

\* A ledger is being created for the adds that came with none open (internalAsyncAddEntry in ClosedLedger).
Creating == current = NoLedger /\ queued # <<>>

(* The ledger to close is closed and the next created and listed           *)
(* (ledgerClosed, createLedgerAfterClosed, createComplete), or the one     *)
(* being created is; the queued adds go to it in order, each counted, up   *)
(* to the one that fills it (updateLedgersIdsComplete).  ManagedLedgerImpl, *)
(* Pulsar 4.0.7.                                                           *)
LedgerRollsOver ==
    /\ broker_up
    /\ ToClose \/ Creating
    /\ ledgers' = Append(ledgers, Len(entries) + 1)
    /\ entries' = Append(entries, <<>>)
    /\ current' = Len(entries) + 1
    /\ age' = 0
    /\ LET k == Taken(queued) IN
          /\ pending' = SubSeq(queued, 1, k)
          /\ queued' = SubSeq(queued, k + 1, Len(queued))
          /\ closing' = (k > 0 /\ LedgerIsFull(k, 0))
    /\ ListWritten
    /\ UNCHANGED <<deleted, persistent_mark_delete, mark_delete, broker_up, highest_pushed, highest_persisted,
                   last_confirmed,
                   slowest_position, crashes, create_failures, producer_vars>>

(* Creating the next ledger fails (createComplete with an error,           *)
(* ManagedLedgerImpl, Pulsar 4.0.7): the ledger to close is closed and     *)
(* stays the last of the list; no ledger is open (ClosedLedger,            *)
(* WriteFailed); the queued adds fail (clearPendingAddEntries), so their   *)
(* producers' connections close; PersistentTopic resets the pushed ids to  *)
(* the persisted ones (resetHighestSequenceIdPushed) and the next add      *)
(* creates a ledger.                                                       *)
LedgerCreationFails ==
    /\ broker_up
    /\ create_failures < MaxCreateFailures
    /\ ToClose \/ Creating
    /\ LET failed == {queued[i][1] : i \in DOMAIN queued} IN
          IF Bug = "failed_creation_acks_queued"
          THEN /\ acked' = [p \in Producers |->
                               SetMax({acked[p]} \cup {queued[i][2] : i \in {j \in DOMAIN queued : queued[j][1] = p}})]
               /\ UNCHANGED <<net, reconnecting>>
          ELSE /\ net' = [p \in Producers |-> IF p \in failed THEN <<>> ELSE net[p]]
               /\ reconnecting' = [p \in Producers |-> reconnecting[p] \/ p \in failed]
               /\ UNCHANGED acked
    /\ current' = NoLedger
    /\ age' = 0
    /\ closing' = FALSE
    /\ queued' = <<>>
    /\ highest_pushed' = highest_persisted
    /\ create_failures' = create_failures + 1
    /\ UNCHANGED <<store_vars, broker_up, pending, highest_persisted, last_confirmed, slowest_position, mark_delete,
                   crashes, sent,
                   disconnects, last_id>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

\* Time passes for the current ledger (only as far as the rollover rules can tell).
ClockTicks ==
    /\ broker_up
    /\ current # NoLedger
    /\ age < MaxAge
    /\ age' = age + 1
    /\ UNCHANGED <<store_vars, broker_up, current, pending, closing, queued, highest_pushed, highest_persisted,
                   last_confirmed, slowest_position, mark_delete, crashes, create_failures, producer_vars>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

(* The broker stops serving the topic: its memory and connections are     *)
(* gone; the first k adds in flight reached the bookies.                   *)
BrokerStops(k) ==
    /\ broker_up
    /\ entries' = IF k > 0 THEN [entries EXCEPT ![current] = @ \o SubSeq(pending, 1, k)] ELSE entries
    /\ broker_up' = FALSE
    /\ current' = NoLedger
    /\ age' = 0
    /\ pending' = <<>>
    /\ closing' = FALSE
    /\ queued' = <<>>
    /\ highest_pushed' = [p \in Producers |-> -1]
    /\ highest_persisted' = [p \in Producers |-> -1]
    /\ last_confirmed' = NoPosition
    /\ slowest_position' = [c \in Cursors |-> NoPosition]
    /\ net' = [p \in Producers |-> <<>>]
    /\ UNCHANGED <<ledgers, deleted, persistent_mark_delete, mark_delete, create_failures, sent, acked, reconnecting,
                   disconnects, last_id, consumer_vars>>

\* The broker dies.
BrokerCrashes(k) ==
    /\ crashes < MaxCrashes
    /\ BrokerStops(k)
    /\ crashes' = crashes + 1
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

(* Another broker takes the topic over (the bundle is unloaded, or the    *)
(* broker's metadata session expired) while this one still runs: to the   *)
(* producers it is gone as in a crash, and ManagedLedgerOpens is the new   *)
(* owner's open; the old broker keeps the ledger list it read, with its    *)
(* version (ledgersStat).                                                  *)
TopicMovesToAnotherBroker(k) ==
    /\ takeovers < MaxTakeovers
    /\ old_broker = <<>>
    /\ BrokerStops(k)
    /\ takeovers' = takeovers + 1
    /\ old_broker' = ledgers
    /\ old_broker_stale' = FALSE
    /\ UNCHANGED crashes

(* The old broker's current ledger is closed under it (the new owner      *)
(* recovered it, so its adds fail) and it rolls over: it creates a ledger *)
(* and writes the list it holds with it by compare-and-set on the version  *)
(* it read (updateLedgersListAfterRollover, asyncUpdateLedgerIds).  After *)
(* the new owner wrote the list the version is old: BadVersionException,  *)
(* handleBadVersion fences the old managed ledger and the new ledger is   *)
(* deleted (createComplete's operationFailed, ManagedLedgerImpl, Pulsar    *)
(* 4.0.7).  Its last ledger, closed with no entry, leaves its list, and is *)
(* deleted once the list is written (ledgerClosed, updateLedgersIdsComplete); *)
(* a durable mark-delete at <<that ledger, -1>> stays, and the next open  *)
(* restores it at the next ledger (recoveredCursor).                       *)
(* The seeded bug writes without the compare.                              *)
OldBrokerRollsOver ==
    /\ old_broker # <<>>
    /\ LET new == Len(entries) + 1
           last == old_broker[Len(old_broker)]
           empty == entries[last] = <<>>
           kept == IF empty THEN SubSeq(old_broker, 1, Len(old_broker) - 1) ELSE old_broker
       IN /\ entries' = Append(entries, <<>>)
          /\ IF old_broker_stale /\ Bug # "blind_ledger_list_write"
             THEN /\ deleted' = deleted \cup {new}
                  /\ UNCHANGED ledgers
             ELSE /\ ledgers' = Append(kept, new)
                  /\ deleted' = IF empty THEN deleted \cup {last} ELSE deleted
    /\ old_broker' = <<>>
    /\ old_broker_stale' = FALSE
    /\ UNCHANGED <<persistent_mark_delete, broker_vars, producer_vars, consumer_vars, takeovers>>

(* initialize: recover-open the last ledger, drop it if empty, create a    *)
(* new one, rebuild the dedup state from the entries, restore the cursors  *)
(* (ManagedLedgerImpl.initialize, initializeBookKeeper, initializeCursors; *)
(* ManagedCursorImpl.recoveredCursor; Pulsar 4.0.7).                       *)
ManagedLedgerOpens ==
    /\ ~broker_up
    /\ LET dropLast == Len(ledgers) > 0 /\ entries[ledgers[Len(ledgers)]] = <<>>
           kept == IF dropLast THEN SubSeq(ledgers, 1, Len(ledgers) - 1) ELSE ledgers
           new == Len(entries) + 1
           listed == Append(kept, new)
           newEntries == Append(entries, <<>>)
       IN /\ ledgers' = listed
          /\ deleted' = IF dropLast THEN deleted \cup {ledgers[Len(ledgers)]} ELSE deleted
          /\ current' = new
          /\ entries' = newEntries
          /\ last_confirmed' = OpenedLastConfirmed(kept, new)
          (* The cursors are restored from their durable state                 *)
          (* (recoveredCursor): a mark at <<l, -1>> of the ledger dropped      *)
          (* moves on, and none passes lastConfirmedEntry.  The                *)
          (* acknowledgements not persisted are lost.                          *)
          /\ persistent_mark_delete' =
                [c \in Cursors |-> PosMin(RecoveredPosition(listed, LAMBDA l : Len(newEntries[l]),
                                                             persistent_mark_delete[c]),
                                          OpenedLastConfirmed(kept, new))]
    /\ mark_delete' = persistent_mark_delete'
    \* addCursor: the managed ledger holds each cursor at its restored mark-delete.
    /\ slowest_position' = persistent_mark_delete'
    /\ broker_up' = TRUE
    \* MessageDeduplication.replayCursor sets both the pushed and the persisted ids.
    /\ LET dedup == IF Bug = "dedup_forgets_on_reopen" \/ ~Dedup THEN [p \in Producers |-> -1] ELSE RecoveredDedup
       IN /\ highest_pushed' = dedup
          /\ highest_persisted' = dedup
    /\ ListWritten
    /\ UNCHANGED <<age, pending, closing, queued, crashes, create_failures, producer_vars>>

-----------------------------------------------------------------------------
(* Cursors and trimming. *)

(* The subscription acknowledges the next entry cumulatively: the         *)
(* mark-delete in memory moves there (setAcknowledgedPosition in           *)
(* asyncMarkDelete); its persist is CursorPersists (ManagedCursorImpl,     *)
(* Pulsar 4.0.7).                                                          *)
ConsumerAcks(c) ==
    /\ broker_up
    /\ LET nxt == NextPosition(ledgers, LAMBDA l : Len(entries[l]), mark_delete[c]) IN
          /\ nxt # NoPosition
          /\ mark_delete' = [mark_delete EXCEPT ![c] = nxt]
          /\ acknowledged' = [acknowledged EXCEPT ![c] = IF PosLeq(nxt, @) THEN @ ELSE nxt]
    /\ UNCHANGED <<store_vars, broker_up, current, age, pending, closing, queued, highest_pushed, highest_persisted,
                   last_confirmed, slowest_position, crashes, create_failures, producer_vars>>
    /\ UNCHANGED takeover_vars

(* The cursor's latest mark-delete is persisted (internalMarkDelete:       *)
(* persistPositionToLedger, or the znode): its callback sets               *)
(* persistentMarkDeletePosition (MarkDeleteEntry), and the managed ledger  *)
(* holds the cursor there (onCursorMarkDeletePositionUpdated;              *)
(* ManagedCursorImpl, Pulsar 4.0.7).  Mark-deletes persist in order and a  *)
(* later one supersedes those queued before it.                            *)
CursorPersists(c) ==
    /\ broker_up
    /\ persistent_mark_delete[c] # mark_delete[c]
    /\ LET md == mark_delete[c]
           nxt == NextPosition(ledgers, LAMBDA l : Len(entries[l]), md)
           durable == IF Bug = "persists_read_position" /\ nxt # NoPosition THEN nxt ELSE md
       IN /\ persistent_mark_delete' = [persistent_mark_delete EXCEPT ![c] = durable]
          /\ slowest_position' = [slowest_position EXCEPT ![c] = md]
    /\ UNCHANGED <<ledgers, entries, deleted, broker_up, current, age, pending, closing, queued, highest_pushed,
                   highest_persisted, last_confirmed, mark_delete, crashes, create_failures, producer_vars>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

Skipped(md) ==
    IF /\ md[1] \in Range(ledgers)
       /\ LaterLedgers(ledgers, md[1]) # {}
       /\ md[2] # -1
       /\ md[2] + 1 >= Len(entries[md[1]])
    THEN <<SetMin(LaterLedgers(ledgers, md[1])), -1>>
    ELSE md

(* maybeUpdateCursorBeforeTrimmingConsumedLedger (ManagedLedgerImpl,       *)
(* Pulsar 4.0.7): the managed ledger holds a cursor whose mark-delete is   *)
(* at a ledger's last entry at <<next ledger, -1>>; the cursor's own       *)
(* mark-delete stays where it is.                                          *)
CursorsSkipConsumedLedgers ==
    /\ broker_up
    /\ LET held == [c \in Cursors |-> IF Skipped(mark_delete[c]) # mark_delete[c]
                                       THEN Skipped(mark_delete[c])
                                       ELSE slowest_position[c]] IN
          /\ held # slowest_position
          /\ slowest_position' = held
    /\ UNCHANGED <<store_vars, broker_up, current, age, pending, closing, queued, highest_pushed, highest_persisted,
                   last_confirmed, mark_delete, crashes, create_failures, producer_vars>>
    /\ UNCHANGED <<takeover_vars, consumer_vars>>

\* The slowest of the positions the managed ledger holds for its cursors.
SlowestPosition ==
    CHOOSE p \in {slowest_position[c] : c \in Cursors} : \A c \in Cursors : PosLeq(p, slowest_position[c])

(* internalTrimLedgers (ManagedLedgerImpl, Pulsar 4.0.7): the ledgers      *)
(* before the slowest reader's ledger are deleted, never the last of the   *)
(* list: currentLedger, the ledger written or, after a failed creation     *)
(* (ClosedLedger), the one closed, which Pulsar trims around as well.      *)
TrimConsumedLedgers ==
    /\ broker_up
    /\ LET last == ledgers[Len(ledgers)]
           slowest == IF NumCursors = 0 THEN last + 1
                      ELSE IF Bug = "trim_deletes_needed_ledger" THEN SlowestPosition[1] + 1
                      ELSE SlowestReaderLedger(ledgers, LAMBDA l : Len(entries[l]), SlowestPosition)
           gone == {x \in Range(ledgers) : x < slowest /\ x # last}
       IN /\ gone # {}
          /\ ledgers' = SelectSeq(ledgers, LAMBDA x : x \notin gone)
          /\ deleted' = deleted \cup gone
    /\ ListWritten
    /\ UNCHANGED <<entries, persistent_mark_delete, broker_vars, producer_vars>>

-----------------------------------------------------------------------------
Next ==
    \/ \E p \in Producers : ProducerSends(p) \/ ProducerResends(p) \/ ConnectionDrops(p) \/ BrokerReceives(p)
    \/ BookKeeperCompletesAdd
    \/ LedgerRollsOver
    \/ LedgerCreationFails
    \/ ClockTicks
    \/ \E k \in 0 .. Len(pending) : BrokerCrashes(k)
    \/ \E k \in 0 .. Len(pending) : TopicMovesToAnotherBroker(k)
    \/ OldBrokerRollsOver
    \/ ManagedLedgerOpens
    \/ \E c \in Cursors : ConsumerAcks(c) \/ CursorPersists(c)
    \/ CursorsSkipConsumedLedgers
    \/ TrimConsumedLedgers

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants. *)

\* Every variable holds a value of its type, within the model's bounds.
TypeOK ==
    /\ \A i \in 1 .. Len(ledgers) : ledgers[i] \in 1 .. Len(entries) /\ (i > 1 => ledgers[i - 1] < ledgers[i])
    /\ crashes <= MaxCrashes /\ takeovers <= MaxTakeovers
    /\ \A p \in Producers : -1 <= acked[p] /\ acked[p] < sent[p] /\ sent[p] <= MaxMessages

\* Only the last ledger of the list is open: the broker writes to no other.
WritesGoToLastLedger ==
    current # NoLedger => Len(ledgers) > 0 /\ current = ledgers[Len(ledgers)]

\* Every ledger the list names exists: a reader, or the next owner's open, can open it.
ListedLedgersExist == deleted \cap Range(ledgers) = {}

\* Every batch acknowledged to its producer is in a ledger of the list, or every cursor consumed it.
NoAcknowledgedMessageLost ==
    \A p \in Producers : \A seq \in 0 .. acked[p] :
        \E l \in DOMAIN entries : \E i \in DOMAIN entries[l] :
            /\ entries[l][i] = <<p, seq>>
            /\ l \in Range(ledgers) \/ \A c \in Cursors : PosLeq(<<l, i - 1>>, acknowledged[c])

(* lastConfirmedEntry is the last entry of the list, or <<l, -1>> with no  *)
(* entry in a ledger of the list below l: readers are shown every entry.  *)
LastConfirmedIsLastEntry ==
    broker_up =>
        /\ NoMessagesAfter(ledgers, LAMBDA l : Len(entries[l]), last_confirmed)
        /\ IF last_confirmed[2] = -1
           THEN \A x \in Range(ledgers) : x < last_confirmed[1] => entries[x] = <<>>
           ELSE last_confirmed[2] < Len(entries[last_confirmed[1]])

(* Without a minimum rollover time no ledger takes more entries than its  *)
(* limit allows: the add that fills it is its last (at least one entry).   *)
LedgerHoldsItsLimit ==
    MinimumRolloverTime = 0 =>
        \A l \in DOMAIN entries :
            Len(entries[l]) + (IF l = current THEN Len(pending) ELSE 0) <= Max(MaxEntriesPerLedger, 1)

(* With Dedup on, no <<producer, sequence id>> is written twice; with it  *)
(* off a batch sent again after a crash or a dropped connection may be.    *)
DedupPersistsNoDuplicate ==
    Dedup =>
        \A l1, l2 \in DOMAIN entries : \A i \in DOMAIN entries[l1] : \A j \in DOMAIN entries[l2] :
            <<l1, i>> # <<l2, j>> => entries[l1][i] # entries[l2][j]

(* No deleted ledger holds an entry some durable cursor's consumer has not *)
(* acknowledged.  (A ledger whose entries were acknowledged and not yet    *)
(* persisted may go: a restore then resumes after it.)                     *)
TrimKeepsUnconsumedEntries ==
    \A l \in deleted : \A c \in Cursors :
        Len(entries[l]) > 0 => PosLeq(<<l, Len(entries[l]) - 1>>, acknowledged[c])

(* A cursor's durable mark-delete passes no entry its consumer has not     *)
(* acknowledged: a restore never skips an unacknowledged message.          *)
DurableMarkDeleteAcknowledged ==
    \A c \in Cursors : NoEntryBetween(entries, acknowledged[c], persistent_mark_delete[c])

(* The position the managed ledger holds for a cursor passes no entry the *)
(* cursor has not consumed: trimming never goes past what the cursor      *)
(* acknowledged.                                                           *)
TrimPositionBehindCursor ==
    \A c \in Cursors : NoEntryBetween(entries, mark_delete[c], slowest_position[c])

\* Message ids handed to producers strictly increase within the partition (a PROPERTY).
MessageIdsIncrease == [][last_id' # last_id => IdLess(last_id, last_id')]_vars

(* A cursor's durable mark-delete position only moves forward, or back    *)
(* over no entry: recoveredCursor caps <<l, -1>> of a ledger dropped at    *)
(* the last entry before it, the same entries consumed (a PROPERTY).  The  *)
(* one in memory moves back on a restore, over what was not persisted.     *)
MarkDeleteNeverMovesBackwards ==
    [][\A c \in Cursors : PosLeq(persistent_mark_delete[c], persistent_mark_delete'[c])
                         \/ NoEntryBetween(entries', persistent_mark_delete'[c], persistent_mark_delete[c])]_vars
=============================================================================
