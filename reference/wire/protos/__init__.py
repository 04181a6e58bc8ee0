"""BookKeeper's v3 wire protocol, copied from its .proto file; the ``_pb2`` module is generated."""
