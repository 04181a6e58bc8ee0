------------------------------ MODULE positions ------------------------------
(***************************************************************************)
(* Positions in a Pulsar managed ledger, shared by managed_ledger.tla and  *)
(* cursor.tla.  The twin of spec/positions.py.                             *)
(*                                                                         *)
(* A position is <<ledger id, entry id>> (Pulsar's Position), ordered      *)
(* ledger first, then entry.  Entry id -1 stands before the first entry of *)
(* its ledger.  A managed ledger is its ledger list (ids are              *)
(* handed out from one counter), given as `ledgers`, the increasing ids of *)
(* the ledger list, and an operator Count(l), a ledger's entries.          *)
(***************************************************************************)
EXTENDS Integers, Sequences

NoPosition == <<-1, -1>>

PosLess(a, b) == a[1] < b[1] \/ (a[1] = b[1] /\ a[2] < b[2])
PosLeq(a, b) == ~PosLess(b, a)

Range(f) == {f[i] : i \in DOMAIN f}
SetMin(S) == CHOOSE x \in S : \A y \in S : x <= y
SetMax(S) == CHOOSE x \in S : \A y \in S : y <= x

\* The ledgers of the list after ledger l.
LaterLedgers(ledgers, l) == {x \in Range(ledgers) : x > l}

(* The first entry after pos in the ledger list (getNextValidPosition),    *)
(* passing over ledgers that hold no entry; NoPosition when there is none. *)
(* Count(l) is the number of entries of ledger l.                          *)
NextPosition(ledgers, Count(_), pos) ==
    IF pos[1] \in Range(ledgers) /\ pos[2] + 1 < Count(pos[1])
    THEN <<pos[1], pos[2] + 1>>
    ELSE LET later == {x \in LaterLedgers(ledgers, pos[1]) : Count(x) > 0}
         IN IF later = {} THEN NoPosition ELSE <<SetMin(later), 0>>

(* lastConfirmedEntry (getLastPosition): the last entry of the last ledger *)
(* of the list; <<l, -1>> when that ledger l holds none yet.               *)
LastConfirmed(ledgers, Count(_)) ==
    IF ledgers = <<>> THEN NoPosition
    ELSE LET l == ledgers[Len(ledgers)] IN <<l, Count(l) - 1>>

(* isNoMessagesAfterPos (ManagedLedgerImpl, Pulsar 4.0.7): no entry of     *)
(* the list lies after pos.  From an empty last ledger it steps back to    *)
(* the last entry of the latest ledger that holds one                      *)
(* (getPreviousPosition); with none written, no message follows any        *)
(* position.                                                               *)
NoMessagesAfter(ledgers, Count(_), pos) ==
    LET written == {x \in Range(ledgers) : Count(x) > 0}
    IN IF written = {} THEN TRUE
       ELSE LET l == SetMax(written) IN PosLeq(<<l, Count(l) - 1>>, pos)

(* recoveredCursor: a restored mark-delete at <<l, -1>> of a ledger no     *)
(* longer listed moves to the next ledger of the list; none is left past   *)
(* the last entry.                                                         *)
RecoveredPosition(ledgers, Count(_), md) ==
    LET later == LaterLedgers(ledgers, md[1])
        moved == IF md[2] = -1 /\ md[1] \notin Range(ledgers) /\ later # {} THEN <<SetMin(later), -1>> ELSE md
        last == LastConfirmed(ledgers, Count)
    IN IF PosLeq(moved, last) THEN moved ELSE last

(* internalTrimLedgers (ManagedLedgerImpl, Pulsar 4.0.7): the ledger       *)
(* before which the ledgers of the list may go, from the slowest reader's  *)
(* position <<x, e>>: x, or x + 1 when e is the last entry of x and x is   *)
(* not the last ledger of the list.                                        *)
SlowestReaderLedger(ledgers, Count(_), p) ==
    IF p[1] \in Range(ledgers) /\ p[1] # ledgers[Len(ledgers)] /\ Count(p[1]) = p[2] + 1 THEN p[1] + 1 ELSE p[1]
=============================================================================
