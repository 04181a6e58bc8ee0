"""The reference engine under faults, judged by the specs: :mod:`.crash_check` crashes the bookie at every file
operation; :mod:`.mutants` runs seeded bugs and scores the oracle by the ones it catches."""
