"""A Pulsar durable cursor: ``cursor.tla``, its Python twin ``cursor.py`` and its trace mapping."""
