"""A Pulsar managed ledger: ``managed_ledger.tla``, its Python twin ``managed_ledger.py`` and its models."""
