"""The BookKeeper ledger protocol: ``ledger.tla``, its Python twin ``ledger.py`` and its trace mapping."""
