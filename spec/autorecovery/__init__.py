"""Autorecovery: ``autorecovery.tla``, its Python twin ``autorecovery.py``, its trace mapping and its models."""
