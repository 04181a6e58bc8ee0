"""A Pulsar managed ledger: ``managed_ledger.tla`` and its Python twin ``managed_ledger.py``."""
