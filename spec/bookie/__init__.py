"""One bookie's storage and its crashes: ``bookie.tla``, its Python twin ``bookie.py``, its trace mapping and its
models."""
