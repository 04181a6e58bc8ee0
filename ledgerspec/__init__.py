"""ledgerspec: specs, a reference engine and a conformance oracle for BookKeeper and Pulsar storage.

The import names mirror the source tree, and the layers it shows:

- :mod:`ledgerspec.spec` (``spec/``): the specs in TLA+ and in Python, the language they are written in, and
  the trace vocabulary; it imports nothing above it;
- :mod:`ledgerspec.reference` (``reference/``): the reference engine, each subsystem with its check against
  its spec;
- :mod:`ledgerspec.conformance` (``conformance/``): the oracle, which judges traces by the specs alone and never
  imports the engine;
- :mod:`ledgerspec.tools` (``tools/``): on top of all three, the command line, model checking, proofs, the
  crash and mutation harness, recordings of the real systems and benchmarks.

:mod:`ledgerspec.java` is the one place Java is looked for, by whichever layer needs it.
"""

__version__ = "0.1.0"
