------------------------------- MODULE ledger -------------------------------
(***************************************************************************)
(* The Apache BookKeeper ledger protocol: striped appends, the LAC,        *)
(* ensemble change, fencing and recovery.  The twin of spec/ledger/ledger.py:     *)
(* same variables, actions and invariants by the same names; TLC and the   *)
(* Python explorer reach the same states.                                  *)
(*                                                                         *)
(* Modelled (bookkeeper-server/.../client/, BRIEF sections 1 and 2):       *)
(*  - one ledger whose metadata lives in a store with compare-and-set      *)
(*    versions, created OPEN with the ensemble <<1, ..., E>>;              *)
(*  - the writer (client 0) pushes entries 0 .. MaxEntries-1, each to the  *)
(*    Qw bookies at ensemble indices (e + i) % E, i < Qw                   *)
(*    (RoundRobinDistributionSchedule; TLA+ sequences add 1 to the index), *)
(*    completes them in entry order on Qa acks (sendAddSuccessCallbacks)   *)
(*    and piggybacks its LAC on every add: the LAC of the moment it pushed *)
(*    the entry, on the first send and every resend (PendingAddOp.toSend); *)
(*    each add carries its data: the bytes the application added as entry *)
(*    e (Payload(e), a number that is not e, so that a check of content    *)
(*    cannot pass by comparing ids); a recovery add carries the bytes its  *)
(*    client read;                                                         *)
(*  - ensemble change when a bookie does not answer (ensembleChangeLoop);  *)
(*  - the writer's close at its LAC, at any time: the adds still pending   *)
(*    fail, and their late acks complete nothing (doAsyncCloseInternal);   *)
(*  - recovering clients 1 .. NumRecoverers (LedgerRecoveryOp,             *)
(*    ReadLastConfirmedOp): fencing read of the LAC, coverage of every     *)
(*    write set (RRQuorumCoverageSet), recovery reads that fence           *)
(*    (apache/bookkeeper#2614), write-back and the close; a bookie that   *)
(*    fails a write-back is replaced in the recovering client's own        *)
(*    ensembles, which its close writes (handleBookieFailure); a recovery  *)
(*    whose fencing or recovery read ends undecided fails, and the client  *)
(*    may open the ledger with recovery again;                             *)
(*  - plain readers 1 .. NumReaders that open the ledger without recovery *)
(*    (LedgerOpenOp, doRecovery = false), learn a LAC and read entries up  *)
(*    to it while the writer may still be writing;                         *)
(*  - the client's throttle on pending adds (Throttle, 0 for none);       *)
(*  - with ExplicitLac = 1 (explicitLacInterval > 0), the writer's explicit *)
(*    LAC: a timer sends its LAC to the bookies, which keep the last one   *)
(*    they were sent (journaled, so a restart keeps it) and serve it to    *)
(*    readers beside the piggybacked one;                                  *)
(*  - with LacLag = 1, adds that carry a LAC behind the writer's: its      *)
(*    handle takes acks in one at a time (sendAddSuccessCallbacks);        *)
(*  - bookie crashes and restarts (the journal replay brings back what a  *)
(*    bookie stored, fenced and the LACs it saw), and message losses,      *)
(*    bounded by MaxCrashes (crashes in all) and MaxLoss.                  *)
(*                                                                         *)
(* Left out, and why that is sound here:                                   *)
(*  - digests, and payloads as bytes: the data of an entry is a number;   *)
(*    a resend sends the data its add was packaged with;                   *)
(*  - a plain reader's requests: its read of the LAC and of an entry are  *)
(*    each one step, served at once by bookies that are up;                *)
(*    ReadersAgreeUpToLac and ReadersAgreeOnContent speak of every read    *)
(*    that could happen, the reader's steps of the reads it did;           *)
(*  - the flush policy's skip when adds piggybacked a newer LAC since its *)
(*    last send (ExplicitLacFlushPolicyImpl): the spec's writer may send   *)
(*    whenever its LAC is past the last it sent; a skip sends nothing;     *)
(*  - the window between a bookie taking an explicit LAC in memory and its *)
(*    journal write: a crash there forgets a LAC no reply confirmed, and   *)
(*    readers learn no more than they might have before;                   *)
(*  - a reader's long poll (ReadLastConfirmedAndEntryOp): the bookie       *)
(*    answers once its LAC passes the reader's, with the next entry; that  *)
(*    is ReaderReadsLac followed by ReaderReadsEntry;                      *)
(*  - the bookie journal: a bookie stores an add durably before replying;  *)
(*  - replies in flight, by default (RepliesInFlight = 0): a bookie's     *)
(*    step serves a request and delivers its reply, or loses it.  A reply  *)
(*    that comes too late acts as a lost one; one that comes in time acts  *)
(*    as if the request were served later.  With RepliesInFlight = 1 the   *)
(*    step sends its reply as a message (ReplyTypes), which the client     *)
(*    takes in a step of its own (ClientReceivesReply) or the network      *)
(*    loses: two bookies' replies reach a client in either order, as a     *)
(*    trace merging a client's log with the bookies' log needs;           *)
(*  - time: a client times out only when the reply can no longer come;    *)
(*    an early timeout looks to the client like a lost reply;              *)
(*  - recovery adds piggyback no LAC (-1): readers of a closed ledger use  *)
(*    its last entry id;                                                   *)
(*  - a writer whose close finds the ledger no longer OPEN gives up        *)
(*    (FENCED).  BookKeeper's close rereads the metadata and writes CLOSED *)
(*    at the writer's LAC over IN_RECOVERY (docs/real-systems.md); the     *)
(*    ledger then holds every entry the writer acknowledged, so the        *)
(*    invariants speak of the same promises either way.                    *)
(*                                                                         *)
(* Bug selects a seeded bug ("none" for the real protocol) so that tests   *)
(* can show that the checkers catch it.                                    *)
(*                                                                         *)
(* For TLC: a guard that is a disjunction or an \E whose branches can hold *)
(* together makes TLC generate the same successor once per branch, so such *)
(* guards are written with =>, ~ or set comprehensions.  TLC's "states     *)
(* generated" then equals the explorer's count of steps.                   *)
(***************************************************************************)
EXTENDS Naturals, Integers, Sequences, FiniteSets, TLC

CONSTANTS
    NumBookies,     \* bookies in the cluster, 1 .. NumBookies
    E,              \* ensemble size
    Qw,             \* write quorum: bookies each entry is sent to
    Qa,             \* ack quorum: acks an add needs to complete
    NumRecoverers,  \* clients that open the ledger with recovery
    NumReaders,     \* clients that open the ledger without recovery and read it
    MaxEntries,     \* entries the writer pushes, ids 0 .. MaxEntries-1
    Throttle,       \* adds the writer keeps pending at most (the client's throttle); 0: no limit
    LacLag,         \* 1: an add may carry a LAC behind the writer's; 0: it carries the writer's
    ExplicitLac,    \* 1: the writer sends its LAC on a timer (explicitLacInterval > 0); 0: never
    MaxCrashes,     \* bookie crashes in all (a bookie that restarted may crash again)
    MaxLoss,        \* messages (requests and replies) the network may lose
    RepliesInFlight, \* 1: a bookie's reply is a message, taken by its client in a step of its own; 0: delivered at once
    Bug             \* "none" or a seeded bug: see Bugs

\* The seeded bugs, as in ledger.py's BUGS.  fence_ensemble_coverage (BP-46's
\* rule) is stricter than BookKeeper's: safe, but it waits for more replies.
Bugs == {"none", "recovery_read_no_fence", "fence_qa_total", "lac_before_qa",
         "missing_after_qa_no_such", "recovery_change_ends_at_lac", "fence_ensemble_coverage",
         "resend_reused_buffer", "reader_reads_unconfirmed", "explicit_lac_sends_lap"}

ASSUME /\ E >= 1 /\ Qa >= 1 /\ Qw <= E /\ Qa <= Qw /\ NumBookies >= E
       /\ \A k \in {NumRecoverers, NumReaders, MaxEntries, Throttle, MaxCrashes, MaxLoss} : k \in Nat
       /\ LacLag \in {0, 1} /\ ExplicitLac \in {0, 1} /\ RepliesInFlight \in {0, 1}
       /\ Bug \in Bugs

VARIABLES
    \* -- metadata store (one znode, compare-and-set on its version)
    meta_status,      \* "OPEN", "IN_RECOVERY" or "CLOSED"
    meta_segments,    \* sequence of <<first entry id, ensemble>>, ensemble a sequence of bookies
    meta_last_entry,  \* lastEntryId once CLOSED, else -1
    meta_version,     \* bumped by every successful compare-and-set
    \* -- bookies
    bookie_entries,   \* bookie -> entries it stored (durably)
    bookie_data,      \* bookie -> <<entry, data>> of each entry it stored: the bytes a read of it returns
    bookie_lac,       \* bookie -> highest LAC piggybacked on an add it stored
    bookie_explicit_lac, \* bookie -> the explicit LAC it was sent last (-1: none)
    bookie_fenced,    \* bookie -> fenced? fenced bookies reject normal adds, accept recovery adds
    crashed,          \* bookies that are down; they answer nothing until they restart
    crashes,          \* bookie crashes so far (at most MaxCrashes)
    \* -- network
    net,              \* requests (and, with RepliesInFlight = 1, replies) in flight, delivered in any order
    lost,             \* messages lost so far (at most MaxLoss)
    \* -- the writer (client 0)
    writer_status,    \* "WRITING", "CLOSED" (closed it itself) or "FENCED" (told to stop)
    writer_version,   \* metadata version the writer last read or wrote
    writer_lap,       \* lastAddPushed: the highest entry id handed out
    writer_lac,       \* LastAddConfirmed: every entry <= it has Qa acks, completed in order
    writer_acks,      \* <<entry, bookie>> acks of pending and completed adds; none after a close
    writer_add_lac,   \* entry e -> (at e + 1) the LAC its add carries, fixed when the writer pushed it; -1 before
    writer_explicit_lac, \* the LAC the writer's explicit-LAC timer last sent for (-1: none)
    \* -- recovering clients
    rec,              \* client -> [phase, version, fence_replies, max_lac, start, next, no_such, last, wb_acks,
                      \*            segments, ensembles, data]
    \* -- plain readers
    reader_lac,       \* reader -> the LAC it learned (-1 before any)
    reader_read       \* reader -> <<entry, data>> of each entry it read

vars == <<meta_status, meta_segments, meta_last_entry, meta_version,
          bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, net, lost,
          writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
          reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

-----------------------------------------------------------------------------
Bookies == 1 .. NumBookies
Recoverers == 1 .. NumRecoverers
Readers == 1 .. NumReaders
Entries == 0 .. MaxEntries - 1
Writer == 0    \* client id of the writer

Max(a, b) == IF a >= b THEN a ELSE b
Range(f) == {f[i] : i \in DOMAIN f}

(* The data the application added as entry e: a number that is not e.    *)
Payload(e) == 100 + e

(* A message in flight; every kind has all fields (lac and data -1, flags *)
(* FALSE where they do not matter).  With RepliesInFlight = 0 replies are  *)
(* not messages.                                                           *)
Msg(type, c, b, e, l, d, recovery, fence) ==
    [type |-> type, client |-> c, bookie |-> b, entry |-> e, lac |-> l, data |-> d,
     recovery |-> recovery, fence |-> fence]

AddReq(c, b, e, l, d, recovery) == Msg("AddReq", c, b, e, l, d, recovery, FALSE)
FenceReq(c, b) == Msg("FenceReq", c, b, -1, -1, -1, FALSE, TRUE)
LacReq(c, b, l) == Msg("LacReq", c, b, -1, l, -1, FALSE, FALSE)
\* Recovery reads carry the fencing flag (#2614), unless the seeded bug drops it.
ReadReq(c, b, e) == Msg("ReadReq", c, b, e, -1, -1, FALSE, Bug # "recovery_read_no_fence")

(* A bookie's replies: an add stored or refused as fenced (EFENCED), a     *)
(* fencing read's LAC, a recovery read's entry (its data) or NoSuchEntry.  *)
(* A reply goes to the client of its request m, from m's bookie.          *)
ReplyTypes == {"AddAck", "AddFenced", "FenceResp", "ReadResp", "NoSuchEntry"}
Reply(type, m, l, d) == Msg(type, m.client, m.bookie, m.entry, l, d, m.recovery, m.fence)

\* The data bookie b returns for entry e, which it stores.
DataOn(b, e) == (CHOOSE p \in bookie_data[b] : p[1] = e)[2]
\* The data recovering client c read for entry e, which its write-back sends.
RecoveredData(c, e) == (CHOOSE p \in rec[c].data : p[1] = e)[2]

(* The segment holding entry e is the last one whose first entry is <= e;  *)
(* segments are sorted by first entry and the first starts at 0.           *)
SegmentIn(segs, e) == segs[1 + Cardinality({i \in 2 .. Len(segs) : segs[i][1] <= e})]

(* Bookies entry e goes to: ensemble indices (e + k) % E, k < Qw (0-based  *)
(* in BookKeeper, hence the + 1 into the TLA+ sequence).                    *)
WriteSetIn(segs, e) == LET ens == SegmentIn(segs, e)[2] IN {ens[((e + k) % E) + 1] : k \in 0 .. Qw - 1}
WriteSet(e) == WriteSetIn(meta_segments, e)

LastEnsemble == meta_segments[Len(meta_segments)][2]

(* The segments the writer's handle knows: the metadata's, but for a       *)
(* recovery's close that changed them.  Only the writer changes the        *)
(* segments while the ledger is OPEN, so a recovering client reads them as *)
(* the writer knows them; a close that writes the recovery's own ensembles *)
(* is the one change the writer does not see (its handle keeps its copy of *)
(* the metadata until a compare-and-set of its own fails).                 *)
WriterSegments ==
    IF \E c \in Recoverers : rec[c].ensembles # <<>>
    THEN rec[CHOOSE c \in Recoverers : rec[c].ensembles # <<>>].segments
    ELSE meta_segments
WriterWriteSet(e) == WriteSetIn(WriterSegments, e)
WriterEnsemble == WriterSegments[Len(WriterSegments)][2]

AcksOf(acks, e) == Cardinality({b \in WriterWriteSet(e) : <<e, b>> \in acks})

\* Acks an entry needs to complete; the seeded bug completes on the first one.
Needed == IF Bug = "lac_before_qa" THEN 1 ELSE Qa

(* sendAddSuccessCallbacks: from lac, advance while the next entry pushed  *)
(* has its quorum of acks.                                                 *)
RECURSIVE CompletedFrom(_, _)
CompletedFrom(lac, acks) ==
    IF lac < writer_lap /\ AcksOf(acks, lac + 1) >= Needed
    THEN CompletedFrom(lac + 1, acks)
    ELSE lac

(* The quorum rules of spec/quorum.py, which the Z3 proofs cover.           *)
\* Replies among the bookies at a set of (0-based) ensemble indices.
RepliesAt(replies, ens, indices) == Cardinality({i \in indices : ens[i + 1] \in replies})

(* RRQuorumCoverageSet: every write set (window of Qw consecutive ensemble *)
(* indices) has Qw - Qa + 1 fencing replies.  Seeded bugs: Qa replies in   *)
(* total; E - Qa + 1 in total (BP-46's ensemble coverage).                 *)
FencingComplete(replies, ens) ==
    CASE Bug = "fence_qa_total" -> RepliesAt(replies, ens, 0 .. E - 1) >= Qa
      [] Bug = "fence_ensemble_coverage" -> RepliesAt(replies, ens, 0 .. E - 1) >= E - Qa + 1
      [] OTHER -> \A i \in 0 .. E - 1 :
                    RepliesAt(replies, ens, {(i + k) % E : k \in 0 .. Qw - 1}) >= Qw - Qa + 1

(* ReadOpBase.requiredBookiesMissingEntryForRecovery: NoSuchEntry replies, *)
(* from the entry's write set, that declare it missing.  Seeded bug: Qa.    *)
NoSuchNeeded == IF Bug = "missing_after_qa_no_such" THEN Qa ELSE Qw - Qa + 1

(* A request type, and the replies that answer it.                       *)
Answers(type) ==
    CASE type = "AddReq" -> {"AddReq", "AddAck", "AddFenced"}
      [] type = "FenceReq" -> {"FenceReq", "FenceResp"}
      [] type = "ReadReq" -> {"ReadReq", "ReadResp", "NoSuchEntry"}

(* Client c gives up waiting on bookie b about entry e: b crashed, or      *)
(* neither the request nor (RepliesInFlight = 1) its reply is in flight:  *)
(* it was lost, or served with its reply lost.                             *)
TimedOut(type, c, b, e) ==
    b \notin crashed => ~\E m \in net : m.type \in Answers(type) /\ m.client = c /\ m.bookie = b /\ m.entry = e

(* A recovering client fences, reads and writes back by the segments it    *)
(* read when it opened the ledger (rec[c].segments: its own copy of the    *)
(* metadata, LedgerRecoveryOp's metadataForRecovery).                      *)
ReadRequests(c, e) == {ReadReq(c, b, e) : b \in WriteSetIn(rec[c].segments, e)}
RecovererEnsemble(c) == rec[c].segments[Len(rec[c].segments)][2]

(* The segments as recovering client c writes back and closes: those it    *)
(* read, then the ensembles it changed itself (ensembles, sorted by first  *)
(* entry); one starting where the last segment starts replaces it, as      *)
(* ReadOnlyLedgerHandle.closeRecovered does.                               *)
RecoverySegments(c) ==
    LET own == rec[c].ensembles
    IN IF own = <<>> THEN rec[c].segments
       ELSE SelectSeq(rec[c].segments, LAMBDA s : s[1] < own[1][1]) \o own
RecoveryWriteSet(c, e) == WriteSetIn(RecoverySegments(c), e)

(* The LAC of client c's recovering handle: its recovery adds complete in  *)
(* order on Qa acks, from the entry recovery started after.               *)
RECURSIVE RecoveryLacFrom(_, _, _)
RecoveryLacFrom(c, segs, lac) ==
    IF lac < rec[c].last
       /\ Cardinality({b \in WriteSetIn(segs, lac + 1) : <<lac + 1, b>> \in rec[c].wb_acks}) >= Qa
    THEN RecoveryLacFrom(c, segs, lac + 1)
    ELSE lac
RecoveryLac(c) == RecoveryLacFrom(c, RecoverySegments(c), rec[c].start)

(* A bookie step may lose its reply only while the loss budget lasts; with *)
(* RepliesInFlight = 1 it sends it, and the network may lose it then.      *)
Replies == IF lost < MaxLoss /\ RepliesInFlight = 0 THEN BOOLEAN ELSE {TRUE}

-----------------------------------------------------------------------------
Idle == [phase |-> "IDLE", version |-> 0, fence_replies |-> {}, max_lac |-> -1,
         start |-> -1, next |-> -1, no_such |-> {}, last |-> -1, wb_acks |-> {},
         segments |-> <<>>, ensembles |-> <<>>, data |-> {}]

Init ==
    /\ meta_status = "OPEN"
    /\ meta_segments = << <<0, [i \in 1 .. E |-> i]>> >>
    /\ meta_last_entry = -1
    /\ meta_version = 1
    /\ bookie_entries = [b \in Bookies |-> {}]
    /\ bookie_data = [b \in Bookies |-> {}]
    /\ bookie_lac = [b \in Bookies |-> -1]
    /\ bookie_explicit_lac = [b \in Bookies |-> -1]
    /\ bookie_fenced = [b \in Bookies |-> FALSE]
    /\ crashed = {}
    /\ crashes = 0
    /\ net = {}
    /\ lost = 0
    /\ writer_status = "WRITING"
    /\ writer_version = 1
    /\ writer_lap = -1
    /\ writer_lac = -1
    /\ writer_acks = {}
    /\ writer_add_lac = [i \in 1 .. MaxEntries |-> -1]
    /\ writer_explicit_lac = -1
    /\ rec = [c \in Recoverers |-> Idle]
    /\ reader_lac = [r \in Readers |-> -1]
    /\ reader_read = [r \in Readers |-> {}]

-----------------------------------------------------------------------------
(* The writer. *)

(* entryId = ++lastAddPushed: the add goes to its write set with the LAC  *)
(* lac; the client's throttle (Throttle > 0) bounds pending adds.          *)
(* PendingAddOp.initiate (4.17.2) packages the entry once, with the LAC of *)
(* that moment, into toSend; every later send of the add, a resend after   *)
(* an ensemble change included, sends those bytes.  writer_add_lac keeps   *)
(* that LAC: it is not recoverable from the rest of the state, since the   *)
(* add's first requests may all have been served or lost by then.         *)
(* sendAddSuccessCallbacks (4.17.2) sets lastAddConfirmed to one completed *)
(* add at a time and runs its callback before the next; an add issued from *)
(* a callback, or before the handle took in acks already sent, carries the *)
(* LAC of that moment: with LacLag, any from the last add's up to the      *)
(* writer's, which takes each ack in at once.                              *)
PackagedLacs ==
    IF LacLag = 0 THEN {writer_lac}
    ELSE (IF writer_lap >= 0 THEN writer_add_lac[writer_lap + 1] ELSE -1) .. writer_lac

WriterAddsEntry(lac) ==
    /\ lac \in PackagedLacs
    /\ writer_status = "WRITING"
    /\ writer_lap + 1 < MaxEntries
    /\ Throttle > 0 => writer_lap - writer_lac < Throttle
    /\ writer_lap' = writer_lap + 1
    /\ net' = net \cup {AddReq(Writer, b, writer_lap + 1, lac, Payload(writer_lap + 1), FALSE) :
                          b \in WriterWriteSet(writer_lap + 1)}
    /\ writer_add_lac' = [writer_add_lac EXCEPT ![writer_lap + 2] = lac]
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, lost,
                   writer_status, writer_version, writer_lac, writer_acks, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* The writer has given up on bookie b's ack for an add it sent b, pending *)
(* or already complete: a failure that reaches a complete add is kept      *)
(* (PendingAddOp.writeComplete, LedgerHandle.notifyWriteFailed, 4.17.2)    *)
(* and acted on at the next add (maybeHandleDelayedWriteBookieFailure).    *)
WriterGaveUpOn(b) ==
    {e \in 0 .. writer_lap : /\ b \in WriterWriteSet(e)
                             /\ <<e, b>> \notin writer_acks
                             /\ TimedOut("AddReq", Writer, b, e)} # {}

(* ensembleChangeLoop: bookie b will not ack an add, so the writer         *)
(* replaces it by nb in a new segment from LAC + 1 (replacing a last       *)
(* segment that already starts there) with a compare-and-set; when that    *)
(* fails the ledger is in recovery or closed and the writer gives up.      *)
(* Some add is pending: the one that failed, or the next, whose initiate   *)
(* acts on a failure kept from an add already complete.                    *)
WriterChangesEnsemble(b, nb) ==
    /\ writer_status = "WRITING"
    /\ writer_lap # writer_lac
    /\ b \in Range(WriterEnsemble)
    /\ nb \notin Range(WriterEnsemble)
    /\ nb \notin crashed
    /\ WriterGaveUpOn(b)
    /\ IF meta_version # writer_version \/ meta_status # "OPEN"
       THEN /\ writer_status' = "FENCED"
            /\ writer_version' = meta_version
            /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                           bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, net, lost,
                           writer_lap, writer_lac, writer_acks, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>
       ELSE LET first == writer_lac + 1
                ens == [i \in 1 .. E |-> IF LastEnsemble[i] = b THEN nb ELSE LastEnsemble[i]]
                segs == Append(SelectSeq(meta_segments, LAMBDA s : s[1] < first), <<first, ens>>)
            IN /\ meta_segments' = segs
               /\ meta_version' = meta_version + 1
               /\ writer_version' = meta_version + 1
               \* pending adds lose b's acks and go to nb, each with the LAC and data it was
               \* packaged with (PendingAddOp.unsetSuccessAndSendWriteRequest sends toSend again);
               \* the seeded bug sends the bytes of the newest add instead, as a buffer reused too early
               /\ writer_acks' = {a \in writer_acks : ~(a[2] = b /\ a[1] >= first)}
               /\ net' = net \cup {AddReq(Writer, nb, e, writer_add_lac[e + 1],
                                            IF Bug = "resend_reused_buffer" THEN Payload(writer_lap) ELSE Payload(e),
                                            FALSE) :
                                     e \in {x \in first .. writer_lap : nb \in WriteSetIn(segs, x)}}
               /\ UNCHANGED <<meta_status, meta_last_entry, bookie_entries, bookie_data, bookie_lac,
                              bookie_fenced, crashed, crashes, lost, writer_status, writer_lap,
                              writer_lac, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* ExplicitLacFlushPolicyImpl (4.17.2), with explicitLacInterval > 0: a   *)
(* timer, finding the writer's LAC past the one it last sent for, sends a  *)
(* WriteLac to the write set of that LAC, at, in the current ensemble      *)
(* (PendingWriteLacOp.initiate).  The bytes are packaged later, on a       *)
(* worker thread, with the handle's LAC of that moment: they carry         *)
(* writer_lac, which may have moved past at.  The replies change nothing   *)
(* (the callback only logs).  A close stops the timer                      *)
(* (tearDownWriteHandleState); a writer fenced while the ledger is in      *)
(* recovery keeps it.  The seeded bug sends lastAddPushed.                 *)
ExplicitLacBound == IF Bug = "explicit_lac_sends_lap" THEN writer_lap ELSE writer_lac

WriterSendsExplicitLac(at) ==
    /\ ExplicitLac = 1
    /\ writer_status # "CLOSED"
    /\ writer_explicit_lac < at /\ at <= ExplicitLacBound
    /\ net' = net \cup {LacReq(Writer, WriterEnsemble[((at + k) % E) + 1], ExplicitLacBound) : k \in 0 .. Qw - 1}
    /\ writer_explicit_lac' = at
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
                   reader_lac, reader_read, bookie_explicit_lac>>

(* The writer closes the ledger at its LAC with a compare-and-set, and    *)
(* the adds still pending fail; when the compare-and-set fails it learns   *)
(* it was fenced.  LedgerHandle.doAsyncCloseInternal (4.17.2) drains the   *)
(* pending adds, sets lastAddPushed to lastAddConfirmed, fails the drained *)
(* adds and writes the metadata CLOSED with that lastEntryId.  Their       *)
(* requests stay in flight: a bookie may still store them, but a late ack  *)
(* finds no pending add and moves nothing (AddStoredForWriter counts acks  *)
(* only while the writer is WRITING).  The handle then holds no add, so no *)
(* ack either: writer_acks empties.                                        *)
WriterClosesLedger ==
    /\ writer_status = "WRITING"
    /\ writer_lap' = writer_lac
    /\ writer_acks' = {}
    /\ IF meta_version # writer_version \/ meta_status # "OPEN"
       THEN /\ writer_status' = "FENCED"
            /\ writer_version' = meta_version
            /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version>>
       ELSE /\ writer_status' = "CLOSED"
            /\ meta_status' = "CLOSED"
            /\ meta_last_entry' = writer_lac
            /\ meta_version' = meta_version + 1
            /\ writer_version' = meta_version + 1
            /\ UNCHANGED <<meta_segments>>
    /\ UNCHANGED <<bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, net, lost,
                   writer_lac, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

-----------------------------------------------------------------------------
(* What a client does with a bookie's reply: the second half of a bookie's *)
(* step with RepliesInFlight = 0, the step ClientReceivesReply with 1.     *)

(* The writer's acks and LAC once it takes bookie b's ack of entry e: an   *)
(* ack counts only from a bookie still in the entry's write set, while the *)
(* writer writes; completion is in entry order.                            *)
WriterAcked(e, b) ==
    LET counts == writer_status = "WRITING" /\ b \in WriterWriteSet(e)
        acks == IF counts THEN writer_acks \cup {<<e, b>>} ELSE writer_acks
    IN <<acks, IF counts THEN CompletedFrom(writer_lac, acks) ELSE writer_lac>>

\* Recovering client c's write-back acks once it takes bookie b's ack of entry e, while it reads or writes back.
WriteBackAcked(c, e, b) ==
    IF rec[c].phase \in {"READING", "WRITING_BACK"} THEN rec[c].wb_acks \cup {<<e, b>>} ELSE rec[c].wb_acks

(* Recovering client c once it takes bookie b's fencing reply, with LAC   *)
(* lac: once the replies cover every write set, it reads from the entry   *)
(* after max(highest LAC, first entry of the last segment - 1).           *)
FenceReplied(c, b, lac) ==
    LET r == rec[c]
        r1 == [r EXCEPT !.fence_replies = @ \cup {b}, !.max_lac = Max(@, lac)]
        start == Max(r1.max_lac, r.segments[Len(r.segments)][1] - 1)
    IN IF r.phase # "FENCING" THEN r
       ELSE IF FencingComplete(r1.fence_replies, RecovererEnsemble(c))
            THEN [r1 EXCEPT !.phase = "READING", !.start = start, !.next = start + 1, !.last = start]
            ELSE r1

\* The recovery reads it sends then: none until fencing completes.
FenceReplyReads(c, b, lac) ==
    LET r2 == FenceReplied(c, b, lac)
    IN IF rec[c].phase = "FENCING" /\ r2.phase = "READING" THEN ReadRequests(c, r2.next) ELSE {}

(* Recovering client c once it takes bookie b's answer about entry e:     *)
(* found, with its data d, or NoSuchEntry.  A found entry is written back *)
(* and the next one read; Qw - Qa + 1 NoSuchEntry replies from its write  *)
(* set mean the entry never reached Qa acks, so the ledger ends before it. *)
ReadReplied(c, b, e, found, d) ==
    LET r == rec[c]
        no_such == r.no_such \cup {b}
    IN IF ~(r.phase = "READING" /\ e = r.next) THEN r
       ELSE IF found THEN [r EXCEPT !.next = e + 1, !.last = e, !.no_such = {}, !.data = @ \cup {<<e, d>>}]
       ELSE IF Cardinality(no_such) >= NoSuchNeeded
            THEN [r EXCEPT !.phase = "WRITING_BACK", !.no_such = no_such]
            ELSE [r EXCEPT !.no_such = no_such]

\* What it sends then: the write-back of a found entry, and the read of the next one.
ReadReplySends(c, e, found, d) ==
    IF rec[c].phase = "READING" /\ e = rec[c].next /\ found
    THEN {AddReq(c, x, e, -1, d, TRUE) : x \in RecoveryWriteSet(c, e)} \cup ReadRequests(c, e + 1)
    ELSE {}

-----------------------------------------------------------------------------
(* Bookies.  A step serves one request and delivers its reply (replied) or *)
(* loses it.  A lost reply is only taken when the reply would change the   *)
(* client; a request whose serving changes nothing stays unserved (that    *)
(* step would stutter).  With RepliesInFlight = 1 the step sends its reply *)
(* instead, for ClientReceivesReply, and every request is served: whether  *)
(* its reply will matter depends on what the client does before it comes. *)

\* The writer's handle on EFENCED: it stops and its pending adds fail.
AddRejected(m, replied) ==
    /\ m.client = Writer
    /\ writer_status = "WRITING"
    /\ net' = net \ {m}
    /\ IF replied
       THEN writer_status' = "FENCED" /\ UNCHANGED lost
       ELSE lost' = lost + 1 /\ UNCHANGED writer_status
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes,
                   writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* The bookie stores the entry, its data and the piggybacked LAC, then    *)
(* acks; an entry added again replaces the data a read returns (the entry *)
(* index points at the newest copy).                                       *)
Stores(m) ==
    /\ bookie_entries' = [bookie_entries EXCEPT ![m.bookie] = @ \cup {m.entry}]
    /\ bookie_data' = [bookie_data EXCEPT ![m.bookie] = {p \in @ : p[1] # m.entry} \cup {<<m.entry, m.data>>}]
    /\ bookie_lac' = [bookie_lac EXCEPT ![m.bookie] = Max(@, m.lac)]

StoreChanges(m) ==
    ~(<<m.entry, m.data>> \in bookie_data[m.bookie] /\ m.lac <= bookie_lac[m.bookie])

AddStoredForWriter(m, replied) ==
    LET acked == WriterAcked(m.entry, m.bookie)
        answered == acked[1] # writer_acks \/ acked[2] # writer_lac
    IN /\ ~answered => replied /\ StoreChanges(m)
       /\ net' = net \ {m}
       /\ Stores(m)
       /\ IF replied
          THEN writer_acks' = acked[1] /\ writer_lac' = acked[2] /\ UNCHANGED lost
          ELSE lost' = lost + 1 /\ UNCHANGED <<writer_acks, writer_lac>>
       /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                      bookie_fenced, crashed, crashes, writer_status, writer_version, writer_lap,
                      writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* BookieImpl.setExplicitLac (4.17.2) replaces the ledger's explicit LAC  *)
(* with the bytes sent (FileInfo.setExplicitLac: no maximum, an older one  *)
(* arriving later wins) and journals them before it replies; a fenced      *)
(* bookie takes it too (no fence check on that path).  The writer ignores  *)
(* the reply, so there is no reply to lose.                                *)
BookieReceivesWriteLac(m) ==
    /\ m.type = "LacReq"
    /\ m.bookie \notin crashed
    /\ net' = net \ {m}
    /\ bookie_explicit_lac' = [bookie_explicit_lac EXCEPT ![m.bookie] = m.lac]
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
                   reader_lac, reader_read, writer_explicit_lac>>

AddStoredForRecoverer(m, replied) ==
    LET wb == WriteBackAcked(m.client, m.entry, m.bookie)
        answered == wb # rec[m.client].wb_acks
    IN /\ ~answered => replied /\ StoreChanges(m)
       /\ net' = net \ {m}
       /\ Stores(m)
       /\ IF replied
          THEN rec' = [rec EXCEPT ![m.client].wb_acks = wb] /\ UNCHANGED lost
          ELSE lost' = lost + 1 /\ UNCHANGED rec
       /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                      bookie_fenced, crashed, crashes, writer_status, writer_version, writer_lap,
                      writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

\* With RepliesInFlight = 1: the bookie stores the add, or refuses it if fenced, and sends its reply.
AddServed(m) ==
    /\ IF bookie_fenced[m.bookie] /\ ~m.recovery
       THEN /\ net' = (net \ {m}) \cup {Reply("AddFenced", m, -1, -1)}
            /\ UNCHANGED <<bookie_entries, bookie_data, bookie_lac>>
       ELSE /\ net' = (net \ {m}) \cup {Reply("AddAck", m, -1, -1)}
            /\ Stores(m)
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version, bookie_fenced, crashed, crashes, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
                   reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* A fenced bookie rejects normal adds (EFENCED) and accepts recovery      *)
(* adds; it stores an add durably, then acks.                              *)
BookieReceivesAdd(m, replied) ==
    /\ m.type = "AddReq"
    /\ replied \in Replies
    /\ m.bookie \notin crashed
    /\ IF RepliesInFlight = 1
       THEN AddServed(m)
       ELSE IF bookie_fenced[m.bookie] /\ ~m.recovery
       THEN AddRejected(m, replied)
       ELSE IF m.client = Writer
            THEN AddStoredForWriter(m, replied)
            ELSE AddStoredForRecoverer(m, replied)

(* Read of the LAC with FLAG_DO_FENCING: the bookie fences itself          *)
(* (journaled), then answers its LAC (FenceReplied).                       *)
BookieReceivesFenceRead(m, replied) ==
    /\ m.type = "FenceReq"
    /\ replied \in Replies
    /\ m.bookie \notin crashed
    /\ LET c == m.client
           b == m.bookie
           r2 == FenceReplied(c, b, bookie_lac[b])
           answered == r2 # rec[c]
       IN /\ bookie_fenced' = [bookie_fenced EXCEPT ![b] = TRUE]
          /\ IF RepliesInFlight = 1
             THEN /\ net' = (net \ {m}) \cup {Reply("FenceResp", m, bookie_lac[b], -1)}
                  /\ UNCHANGED <<rec, lost>>
             ELSE /\ ~answered => replied /\ ~bookie_fenced[b]
                  /\ IF replied
                     THEN /\ rec' = [rec EXCEPT ![c] = r2]
                          /\ net' = (net \ {m}) \cup FenceReplyReads(c, b, bookie_lac[b])
                          /\ UNCHANGED lost
                     ELSE /\ lost' = lost + 1
                          /\ net' = net \ {m}
                          /\ UNCHANGED rec
          /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                         bookie_entries, bookie_data, bookie_lac, crashed, crashes, writer_status,
                         writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* A recovery read fences the bookie when its flag is set, then answers    *)
(* found, with the entry's data, or NoSuchEntry (ReadReplied).             *)
BookieReceivesRecoveryRead(m, replied) ==
    /\ m.type = "ReadReq"
    /\ replied \in Replies
    /\ m.bookie \notin crashed
    /\ LET c == m.client
           b == m.bookie
           e == m.entry
           found == e \in bookie_entries[b]
           d == IF found THEN DataOn(b, e) ELSE -1
           r2 == ReadReplied(c, b, e, found, d)
           answered == r2 # rec[c]
       IN /\ bookie_fenced' = IF m.fence THEN [bookie_fenced EXCEPT ![b] = TRUE] ELSE bookie_fenced
          /\ IF RepliesInFlight = 1
             THEN /\ net' = (net \ {m}) \cup {Reply(IF found THEN "ReadResp" ELSE "NoSuchEntry", m, -1, d)}
                  /\ UNCHANGED <<rec, lost>>
             ELSE /\ ~answered => replied /\ m.fence /\ ~bookie_fenced[b]
                  /\ IF replied
                     THEN /\ rec' = [rec EXCEPT ![c] = r2]
                          /\ net' = (net \ {m}) \cup ReadReplySends(c, e, found, d)
                          /\ UNCHANGED lost
                     ELSE /\ lost' = lost + 1
                          /\ net' = net \ {m}
                          /\ UNCHANGED rec
          /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                         bookie_entries, bookie_data, bookie_lac, crashed, crashes, writer_status,
                         writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* With RepliesInFlight = 1: client p.client takes bookie p.bookie's reply *)
(* p and acts on it, as the bookie's step does at once with 0.  A late     *)
(* reply changes nothing but the messages in flight.                       *)
ClientReceivesReply(p) ==
    /\ p.type \in ReplyTypes
    /\ CASE p.type = "AddAck" /\ p.client = Writer ->
              LET acked == WriterAcked(p.entry, p.bookie)
              IN /\ writer_acks' = acked[1]
                 /\ writer_lac' = acked[2]
                 /\ net' = net \ {p}
                 /\ UNCHANGED <<writer_status, rec>>
         [] p.type = "AddAck" ->
              /\ rec' = [rec EXCEPT ![p.client].wb_acks = WriteBackAcked(p.client, p.entry, p.bookie)]
              /\ net' = net \ {p}
              /\ UNCHANGED <<writer_status, writer_acks, writer_lac>>
         [] p.type = "AddFenced" ->
              /\ writer_status' = IF p.client = Writer /\ writer_status = "WRITING" THEN "FENCED" ELSE writer_status
              /\ net' = net \ {p}
              /\ UNCHANGED <<writer_acks, writer_lac, rec>>
         [] p.type = "FenceResp" ->
              /\ rec' = [rec EXCEPT ![p.client] = FenceReplied(p.client, p.bookie, p.lac)]
              /\ net' = (net \ {p}) \cup FenceReplyReads(p.client, p.bookie, p.lac)
              /\ UNCHANGED <<writer_status, writer_acks, writer_lac>>
         [] OTHER ->
              LET found == p.type = "ReadResp"
              IN /\ rec' = [rec EXCEPT ![p.client] = ReadReplied(p.client, p.bookie, p.entry, found, p.data)]
                 /\ net' = (net \ {p}) \cup ReadReplySends(p.client, p.entry, found, p.data)
                 /\ UNCHANGED <<writer_status, writer_acks, writer_lac>>
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, lost,
                   writer_version, writer_lap, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac,
                   writer_explicit_lac>>

\* The bookie stops; what it stored stays on its disk, unreachable until it restarts.
BookieCrashes(b) ==
    /\ b \notin crashed
    /\ crashes < MaxCrashes
    /\ crashed' = crashed \cup {b}
    /\ crashes' = crashes + 1
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, net, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
                   reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

\* A crashed bookie starts again: its journal replay restores every entry, fence and LAC it had.
BookieRestarts(b) ==
    /\ b \in crashed
    /\ crashed' = crashed \ {b}
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashes, net, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

-----------------------------------------------------------------------------
(* The network. *)

\* A request may be lost, up to MaxLoss losses of requests and replies together.
NetworkLosesMessage(m) ==
    /\ lost < MaxLoss
    /\ net' = net \ {m}
    /\ lost' = lost + 1
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

-----------------------------------------------------------------------------
(* Recovering clients. *)

(* Open with recovery: CAS OPEN -> IN_RECOVERY (or join a recovery under   *)
(* way) and send the fencing read of the LAC to the last ensemble; a       *)
(* closed ledger needs no recovery.  A client whose recovery failed may    *)
(* open it again, afresh: ReadOnlyLedgerHandle.recover (release-4.17.2)    *)
(* runs LedgerRecoveryOp again on a ledger still IN_RECOVERY.              *)
RecovererStartsRecovery(c) ==
    /\ rec[c].phase \in {"IDLE", "FAILED"}
    /\ IF meta_status = "CLOSED"
       THEN /\ rec' = [rec EXCEPT ![c] = [Idle EXCEPT !.phase = "DONE", !.version = meta_version]]
            /\ UNCHANGED <<meta_status, meta_version, net>>
       ELSE LET version == IF meta_status = "OPEN" THEN meta_version + 1 ELSE meta_version
            IN /\ meta_status' = "IN_RECOVERY"
               /\ meta_version' = version
               /\ net' = net \cup {FenceReq(c, b) : b \in Range(LastEnsemble)}
               /\ rec' = [rec EXCEPT ![c] = [Idle EXCEPT !.phase = "FENCING", !.version = version,
                                                        !.segments = meta_segments]]
    /\ UNCHANGED <<meta_segments, meta_last_entry, bookie_entries, bookie_data, bookie_lac,
                   bookie_fenced, crashed, crashes, lost, writer_status, writer_version,
                   writer_lap, writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* With every recovered entry on Qa bookies, CAS IN_RECOVERY -> CLOSED at  *)
(* the last entry, with the ensembles the write-back changed              *)
(* (closeRecovered); if another client changed the metadata, reread it:   *)
(* closed at the same entry is success, anything else fails.               *)
RecovererClosesLedger(c) ==
    LET r == rec[c] IN
    /\ r.phase = "WRITING_BACK"
    /\ RecoveryLac(c) = r.last
    /\ IF meta_version # r.version
       THEN /\ rec' = [rec EXCEPT ![c].phase = IF meta_status = "CLOSED" /\ meta_last_entry = r.last
                                               THEN "DONE" ELSE "FAILED",
                                  ![c].version = meta_version]
            /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version>>
       ELSE /\ meta_status' = "CLOSED"
            /\ meta_segments' = RecoverySegments(c)
            /\ meta_last_entry' = r.last
            /\ meta_version' = meta_version + 1
            /\ rec' = [rec EXCEPT ![c].phase = "DONE", ![c].version = meta_version + 1]
    /\ UNCHANGED <<bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes,
                   net, lost, writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* Has recovering client c given up on bookie b's ack for a write-back it  *)
(* sent b, pending or already complete?  Write-backs are recovery adds of  *)
(* the same PendingAddOp: a failure that reaches a complete one is kept    *)
(* (notifyWriteFailed, inherited by ReadOnlyLedgerHandle, 4.17.2).         *)
RecovererGaveUpOn(c, b) ==
    {e \in rec[c].start + 1 .. rec[c].last : /\ b \in WriteSetIn(RecoverySegments(c), e)
                                            /\ <<e, b>> \notin rec[c].wb_acks
                                            /\ TimedOut("AddReq", c, b, e)} # {}

(* ReadOnlyLedgerHandle.handleBookieFailure (release-4.17.2): bookie b     *)
(* will not ack a write-back, so the recovering handle replaces it by nb   *)
(* in its own ensembles from its LAC + 1 (newEnsemblesFromRecovery,        *)
(* written by the close, not now) and sends the pending write-backs to nb  *)
(* (unsetSuccessAndSendWriteRequest).  Some write-back is pending: the one *)
(* that failed, or the next, whose initiate acts on a kept failure         *)
(* (maybeHandleDelayedWriteBookieFailure).                                 *)
RecovererChangesEnsemble(c, b, nb) ==
    LET r == rec[c]
        segs == RecoverySegments(c)
        ens == segs[Len(segs)][2]
        lac == RecoveryLac(c)
        first == lac + 1
        changed == [i \in 1 .. E |-> IF ens[i] = b THEN nb ELSE ens[i]]
        own == Append(SelectSeq(r.ensembles, LAMBDA s : s[1] < first), <<first, changed>>)
        newsegs == SelectSeq(r.segments, LAMBDA s : s[1] < own[1][1]) \o own
        acks == {a \in r.wb_acks : ~(a[2] = b /\ a[1] >= first)}
    IN
    /\ r.phase \in {"READING", "WRITING_BACK"}
    /\ b \in Range(ens)
    /\ nb \notin Range(ens)
    /\ nb \notin crashed
    /\ lac # r.last
    /\ RecovererGaveUpOn(c, b)
    /\ IF Bug = "recovery_change_ends_at_lac"
       \* seeded bug: the pending write-backs are dropped and the recovery ends at its LAC
       THEN /\ rec' = [rec EXCEPT ![c].ensembles = own, ![c].wb_acks = acks,
                                  ![c].phase = "WRITING_BACK", ![c].last = lac]
            /\ UNCHANGED net
       ELSE /\ rec' = [rec EXCEPT ![c].ensembles = own, ![c].wb_acks = acks]
            /\ net' = net \cup {AddReq(c, nb, e, -1, RecoveredData(c, e), TRUE) :
                                  e \in {x \in first .. r.last : nb \in WriteSetIn(newsegs, x)}}
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* Every bookie asked has answered or timed out, and neither fencing nor   *)
(* the entry read is decided.  In release-4.17.2 ReadLastConfirmedOp fails *)
(* the fencing read once no reply is pending and the replies do not cover  *)
(* every write set; PendingReadOp.logErrorAndReattemptRead fails a         *)
(* recovery read with its first error once every bookie of the write set   *)
(* answered and fewer than Qw - Qa + 1 said NoSuchEntry.  LedgerRecoveryOp *)
(* then fails the recovery: the ledger stays IN_RECOVERY, its bookies      *)
(* fenced, and the application may open it with recovery again.            *)
RecovererGivesUp(c) ==
    LET r == rec[c] IN
    /\ r.phase \in {"FENCING", "READING"}
    /\ IF r.phase = "FENCING"
       THEN \A b \in Range(RecovererEnsemble(c)) : b \notin r.fence_replies => TimedOut("FenceReq", c, b, -1)
       ELSE \A b \in WriteSetIn(r.segments, r.next) : b \notin r.no_such => TimedOut("ReadReq", c, b, r.next)
    \* a fencing that never completed leaves no replies behind: NoNewAcksToFencedWriter
    \* reads the fence_replies of a FAILED client as a fencing that did complete
    /\ rec' = [rec EXCEPT ![c].phase = "FAILED",
                          ![c].fence_replies = IF r.phase = "READING" THEN @ ELSE {}]
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, net, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

\* Retries after a timeout: a lost request or reply is asked for again.
Resend(m) ==
    /\ net' = net \cup {m}
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec, reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

\* No fencing reply from b, and none can come: ask again.
RecovererResendsFenceRead(c, b) ==
    /\ rec[c].phase = "FENCING"
    /\ b \notin rec[c].fence_replies
    /\ b \notin crashed
    /\ b \in Range(RecovererEnsemble(c))
    /\ TimedOut("FenceReq", c, b, -1)
    /\ Resend(FenceReq(c, b))

\* No read reply from b for the entry being recovered, and none can come: ask again.
RecovererResendsRead(c, b) ==
    /\ rec[c].phase = "READING"
    /\ b \notin crashed
    /\ b \notin rec[c].no_such
    /\ b \in WriteSetIn(rec[c].segments, rec[c].next)
    /\ TimedOut("ReadReq", c, b, rec[c].next)
    /\ Resend(ReadReq(c, b, rec[c].next))

\* A recovery add of entry e to b got no ack, and none can come: send it again.
RecovererResendsWriteBack(c, e, b) ==
    /\ rec[c].phase \in {"READING", "WRITING_BACK"}
    /\ e \in rec[c].start + 1 .. rec[c].last
    /\ b \in RecoveryWriteSet(c, e)
    /\ b \notin crashed
    /\ <<e, b>> \notin rec[c].wb_acks
    /\ TimedOut("AddReq", c, b, e)
    /\ Resend(AddReq(c, b, e, -1, RecoveredData(c, e), TRUE))

-----------------------------------------------------------------------------
(* Plain readers. *)

(* The highest LAC a bookie serves: piggybacked on the last entry it      *)
(* stored, or its explicit LAC (ReadLacProcessorV3 answers both).          *)
MaxBookieLac ==
    LET lacs == {Max(bookie_lac[b], bookie_explicit_lac[b]) : b \in Bookies}
    IN CHOOSE m \in lacs : \A x \in lacs : x <= m

(* LedgerOpenOp.openWithMetadata (release-4.17.2), doRecovery = false: a    *)
(* closed ledger's LAC is its lastEntryId; an open one's comes from         *)
(* LedgerHandle.asyncReadLastConfirmed (PendingReadLacOp with the v3 wire   *)
(* protocol: the highest LAC among the replies, once they cover every write *)
(* set), each reply the higher of the bookie's explicit LAC and the one    *)
(* piggybacked on its last entry.  A reader learns a higher LAC by reading *)
(* it again.  Replies carry a LAC a bookie held when it answered: any LAC  *)
(* up to the highest a bookie serves now.  A long poll                      *)
(* (ReadLastConfirmedAndEntryOp) is this step, then ReaderReadsEntry.       *)
ReaderReadsLac(r, lac) ==
    /\ reader_lac[r] < lac
    /\ lac <= Max(MaxBookieLac, meta_last_entry)
    /\ reader_lac' = [reader_lac EXCEPT ![r] = lac]
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, net, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
                   reader_read, bookie_explicit_lac, writer_explicit_lac>>

(* LedgerHandle.asyncReadEntries (release-4.17.2; a ReadOnlyLedgerHandle   *)
(* inherits it) refuses entries past the handle's LAC; PendingReadOp reads  *)
(* entry e from a bookie that holds it and returns its data.  The reader's  *)
(* copy of the metadata may be older than the store's, so any bookie        *)
(* holding e may be asked.  The seeded bug reads past the LAC, as           *)
(* readUnconfirmedEntries does.                                             *)
ReaderReadsEntry(r, e, b) ==
    /\ Bug # "reader_reads_unconfirmed" => e <= reader_lac[r]
    /\ b \notin crashed
    /\ e \in bookie_entries[b]
    /\ <<e, DataOn(b, e)>> \notin reader_read[r]
    /\ reader_read' = [reader_read EXCEPT ![r] = @ \cup {<<e, DataOn(b, e)>>}]
    /\ UNCHANGED <<meta_status, meta_segments, meta_last_entry, meta_version,
                   bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes, net, lost,
                   writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac, rec,
                   reader_lac, bookie_explicit_lac, writer_explicit_lac>>

ReaderSteps ==
    \E r \in Readers :
        \/ \E lac \in Entries : ReaderReadsLac(r, lac)
        \/ \E e \in Entries, b \in Bookies : ReaderReadsEntry(r, e, b)

-----------------------------------------------------------------------------
WriterSteps ==
    \/ \E lac \in PackagedLacs : WriterAddsEntry(lac)
    \/ \E b, nb \in Bookies : WriterChangesEnsemble(b, nb)
    \/ WriterClosesLedger
    \/ \E at \in Entries : WriterSendsExplicitLac(at)

BookieSteps ==
    \/ \E m \in net, replied \in Replies : BookieReceivesAdd(m, replied)
    \/ \E m \in net, replied \in Replies : BookieReceivesFenceRead(m, replied)
    \/ \E m \in net, replied \in Replies : BookieReceivesRecoveryRead(m, replied)
    \/ \E m \in net : BookieReceivesWriteLac(m)
    \/ \E p \in net : ClientReceivesReply(p)
    \/ \E b \in Bookies : BookieCrashes(b)
    \/ \E b \in Bookies : BookieRestarts(b)

NetworkSteps == \E m \in net : NetworkLosesMessage(m)

RecovererSteps ==
    \E c \in Recoverers :
        \/ RecovererStartsRecovery(c)
        \/ RecovererClosesLedger(c)
        \/ \E b, nb \in Bookies : RecovererChangesEnsemble(c, b, nb)
        \/ RecovererGivesUp(c)
        \/ \E b \in Bookies : RecovererResendsFenceRead(c, b)
        \/ \E b \in Bookies : RecovererResendsRead(c, b)
        \/ \E e \in Entries, b \in Bookies : RecovererResendsWriteBack(c, e, b)

Next == WriterSteps \/ BookieSteps \/ NetworkSteps \/ RecovererSteps \/ ReaderSteps

Spec == Init /\ [][Next]_vars

(* Fairness: the Python spec's fairness="weak" actions, for each recoverer *)
(* (and each instance of their parameters), each live bookie serving some *)
(* request with its reply delivered (or sent), and the clients taking the  *)
(* replies sent.                                                           *)
Fairness ==
    /\ \A c \in Recoverers :
          /\ WF_vars(RecovererStartsRecovery(c))
          /\ WF_vars(RecovererClosesLedger(c))
          /\ \A b \in Bookies : WF_vars(RecovererResendsFenceRead(c, b))
          /\ \A b \in Bookies : WF_vars(RecovererResendsRead(c, b))
          /\ \A e \in Entries, b \in Bookies : WF_vars(RecovererResendsWriteBack(c, e, b))
    /\ \A b \in Bookies :
          WF_vars(\E m \in net : /\ m.bookie = b
                                 /\ \/ BookieReceivesAdd(m, TRUE)
                                    \/ BookieReceivesFenceRead(m, TRUE)
                                    \/ BookieReceivesRecoveryRead(m, TRUE))
    /\ WF_vars(\E p \in net : ClientReceivesReply(p))

LiveSpec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Symmetry. Recovering clients are interchangeable. TLC's SYMMETRY        *)
(* permutes model values, and the clients here are numbers (the writer is  *)
(* client 0), so both engines tell states apart by their orbit instead:    *)
(* the state under every renaming of the recovering clients, given to TLC  *)
(* as its VIEW (model-check --symmetry).                                   *)

\* The state with recovering client c renamed p[c].
Renamed(p) ==
    LET name(c) == IF c \in Recoverers THEN p[c] ELSE c
        was(d) == CHOOSE c \in Recoverers : p[c] = d
    IN <<meta_status, meta_segments, meta_last_entry, meta_version,
         bookie_entries, bookie_data, bookie_lac, bookie_fenced, crashed, crashes,
         {[m EXCEPT !.client = name(m.client)] : m \in net}, lost,
         writer_status, writer_version, writer_lap, writer_lac, writer_acks, writer_add_lac,
         [d \in Recoverers |-> rec[was(d)]], reader_lac, reader_read, bookie_explicit_lac, writer_explicit_lac>>

RecovererOrbit == {Renamed(p) : p \in Permutations(Recoverers)}

-----------------------------------------------------------------------------
(* Invariants. *)

Phases == {"IDLE", "FENCING", "READING", "WRITING_BACK", "DONE", "FAILED"}

\* Every variable holds a value of its type, within the model's bounds.
TypeOK ==
    /\ meta_status \in {"OPEN", "IN_RECOVERY", "CLOSED"}
    /\ writer_status \in {"WRITING", "CLOSED", "FENCED"}
    /\ -1 <= writer_lac /\ writer_lac <= writer_lap /\ writer_lap < MaxEntries
    /\ \A e \in Entries : -1 <= writer_add_lac[e + 1] /\ writer_add_lac[e + 1] < e
    /\ \A b \in Bookies : bookie_entries[b] = {p[1] : p \in bookie_data[b]}
    /\ crashed \subseteq Bookies /\ Cardinality(crashed) <= crashes /\ crashes <= MaxCrashes /\ lost <= MaxLoss
    /\ \A i \in 1 .. Len(meta_segments) :
          LET seg == meta_segments[i]
          IN /\ Len(seg[2]) = E
             /\ Cardinality(Range(seg[2])) = E
             /\ 0 <= seg[1] /\ seg[1] <= MaxEntries
    /\ \A c \in Recoverers : rec[c].phase \in Phases
    /\ \A r \in Readers : -1 <= reader_lac[r] /\ reader_lac[r] < MaxEntries
    /\ -1 <= writer_explicit_lac /\ writer_explicit_lac < MaxEntries
    /\ \A b \in Bookies : -1 <= bookie_explicit_lac[b] /\ bookie_explicit_lac[b] < MaxEntries

\* Every entry acknowledged to the writer's application is in the closed ledger.
NoAckedEntryLost ==
    meta_status = "CLOSED" => writer_lac <= meta_last_entry

\* A reader may read any entry up to a LAC a bookie serves: all of them are in the closed ledger.
ReadersAgreeUpToLac ==
    meta_status = "CLOSED" => \A b \in Bookies : Max(bookie_lac[b], bookie_explicit_lac[b]) <= meta_last_entry

(* No bookie serves an explicit LAC past what is durable: every entry up   *)
(* to it is stored on Qa bookies.                                          *)
ExplicitLacIsDurable ==
    \A b \in Bookies : \A e \in 0 .. bookie_explicit_lac[b] :
        Cardinality({x \in Bookies : e \in bookie_entries[x]}) >= Qa

(* Readers agree on the content of every entry up to the LAC, the ledger  *)
(* open or closed: every copy a bookie holds of an entry a reader may read *)
(* (up to the writer's LAC, or the last entry once closed) is the data the *)
(* application added.                                                      *)
ReadersAgreeOnContent ==
    \A b \in Bookies : \A p \in bookie_data[b] :
        p[1] <= Max(writer_lac, meta_last_entry) => p[2] = Payload(p[1])

(* A plain reader never sees past the LAC: the LAC it learned, and every  *)
(* entry it read, are acknowledged to the writer (or in the closed ledger). *)
ReaderSeesOnlyConfirmed ==
    \A r \in Readers :
        /\ reader_lac[r] <= Max(writer_lac, meta_last_entry)
        /\ \A p \in reader_read[r] : p[1] <= Max(writer_lac, meta_last_entry)

\* What a plain reader read is what the writer's application added.
ReaderReadsWhatWriterWrote ==
    \A r \in Readers : \A p \in reader_read[r] : p[2] = Payload(p[1])

\* Every entry of a closed ledger is stored on a bookie of its write set.
ClosedLedgerIsReadable ==
    meta_status = "CLOSED" =>
        \A e \in 0 .. meta_last_entry : \E b \in WriteSet(e) : e \in bookie_entries[b]

\* Once fencing completes, no write set the writer sends to has Qa bookies that still accept its adds.
NoNewAcksToFencedWriter ==
    (\E c \in Recoverers : rec[c].phase \in {"READING", "WRITING_BACK", "DONE", "FAILED"}
                           /\ rec[c].fence_replies # {})
    => \A i \in 0 .. E - 1 :
          Cardinality({k \in 0 .. Qw - 1 : ~bookie_fenced[WriterEnsemble[((i + k) % E) + 1]]}) < Qa

\* Once CLOSED, the ledger's metadata stays as it is (checked as a PROPERTY).
ClosedLedgerNeverChanges ==
    [][meta_status = "CLOSED" =>
         /\ meta_status' = "CLOSED"
         /\ meta_last_entry' = meta_last_entry
         /\ meta_segments' = meta_segments]_vars

\* Liveness (under LiveSpec): a recovery once started ends with the ledger closed.
RecoveryCloses ==
    (\E c \in Recoverers : rec[c].phase # "IDLE") ~> meta_status = "CLOSED"

=============================================================================
