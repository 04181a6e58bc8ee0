"""Autorecovery: ``autorecovery.tla``, its Python twin ``autorecovery.py`` and its trace mapping."""
