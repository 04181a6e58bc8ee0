"""The BookKeeper ledger protocol: ``ledger.tla``, its Python twin ``ledger.py``, its trace mapping and its models."""
