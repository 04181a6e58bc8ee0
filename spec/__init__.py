"""The specs, in TLA+ and in Python, and the language they are written in.

At this level, what every spec shares:

- :mod:`.kernel`, :mod:`.values`: how a Python spec is written so that it reads like its TLA+ twin, and the
  values both engines agree on;
- :mod:`.vocabulary`: the trace vocabulary every layer speaks: a step named by its spec action, and the line
  of the trace format that logs it;
- :mod:`.codecs`, :mod:`.tracing`: spec values as JSON, and trace mappings (how the events an implementation
  logs name a spec's actions and variables);
- :mod:`.catalog`: the specs by the names the command line uses, each with its models (:mod:`.models`);
- :mod:`.positions` (with ``positions.tla``) and :mod:`.quorum`: positions of a managed ledger and the quorum
  rules of a ledger, shared by specs and proofs.

One folder per spec holds its TLA+ text, its Python twin, its trace mapping and its models, under the same
name: ``ledger/``, ``bookie/``, ``managed_ledger/``, ``cursor/``, ``autorecovery/``.

This layer imports nothing above it: the reference engine, the conformance oracle and the tools all build on
it, never the other way round.
"""
