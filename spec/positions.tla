------------------------------ MODULE positions ------------------------------
(***************************************************************************)
(* Positions in a Pulsar managed ledger, shared by managed_ledger.tla and  *)
(* cursor.tla.  The twin of spec/positions.py.                             *)
(*                                                                         *)
(* A position is <<ledger id, entry id>> (Pulsar's Position), ordered      *)
(* ledger first, then entry.  Entry id -1 stands before the first entry of *)
(* its ledger.  A managed ledger's entries are given as `entries`, the     *)
(* sequence of all ledgers ever created with their entries (ledger ids are *)
(* handed out from one counter starting at 1, so ledger l is entries[l]),  *)
(* and `ledgers`, the increasing ids of the ledger list.                   *)
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
NextPosition(entries, ledgers, pos) ==
    IF pos[1] \in Range(ledgers) /\ pos[2] + 1 < Len(entries[pos[1]])
    THEN <<pos[1], pos[2] + 1>>
    ELSE LET later == {x \in LaterLedgers(ledgers, pos[1]) : Len(entries[x]) > 0}
         IN IF later = {} THEN NoPosition ELSE <<SetMin(later), 0>>

\* The last entry of the ledger list (getLastPosition); NoPosition when it holds none.
LastPosition(entries, ledgers) ==
    LET full == {x \in Range(ledgers) : Len(entries[x]) > 0}
    IN IF full = {} THEN NoPosition ELSE LET l == SetMax(full) IN <<l, Len(entries[l]) - 1>>
=============================================================================
