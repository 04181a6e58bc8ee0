"""One bookie's storage and its crashes: ``bookie.tla``, its Python twin ``bookie.py`` and its trace mapping."""
