"""Adapters that record traces from other implementations of the protocol.

An adapter runs a system, watches what its clients see, and writes what it
saw as traces in the project's format (docs/trace-format.md), for the checker
to judge. The first system judged is the real one: Apache BookKeeper, from
its released jars (``bookkeeper.py``); ``jars.py`` fetches them,
``cluster.py`` runs ZooKeeper, bookies and a client harness from them.
docs/adapters.md says how to write an adapter for your own system.
"""
