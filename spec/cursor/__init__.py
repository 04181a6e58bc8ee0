"""A Pulsar durable cursor: ``cursor.tla``, its Python twin ``cursor.py``, its trace mapping and its models."""
