"""ledgerspec: specs, a reference engine and a conformance oracle for BookKeeper and Pulsar storage.

The import names mirror the source tree:

- :mod:`ledgerspec.spec` (``spec/``): the specs, in TLA+ and in Python, and the explorer;
- :mod:`ledgerspec.tools` (``tools/``): the command line and the TLC runner;
- :mod:`ledgerspec.reference`, :mod:`ledgerspec.conformance`: the engine and the oracle.
"""

__version__ = "0.1.0"
