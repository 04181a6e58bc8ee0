"""Proofs with Z3: :mod:`.quorum_proofs` proves the quorum rules, :mod:`.quorum_replay` replays a counterexample
in the ledger spec."""
