"""Protobuf messages of Apache BookKeeper, copied from its .proto files; the ``_pb2`` modules are generated."""
