"""The conformance oracle: check the traces of an implementation against a spec.

The trace format is in docs/trace-format.md, the checker in docs/conformance.md.
The public surface:

- :func:`check_trace` (one trace, a pure function) and :class:`TraceChecker`
  (the same, with caches kept across traces), within :class:`Bounds`,
  giving a :class:`Verdict`;
- :func:`check_files`: every trace of NDJSON files, streamed, into a :class:`CheckRun`;
- :class:`Event`, :func:`parse_event`, :func:`events_from_json`, :class:`InputError`:
  the envelope of one line;
- :mod:`ledgerspec.conformance.generate`: traces from random walks of a spec;
- :mod:`ledgerspec.conformance.itf` and :mod:`ledgerspec.conformance.tlc_json`: ITF traces
  (Apalache, Quint) and TLC's JSON traces (``-dumpTrace json``) as events.
"""

from ledgerspec.conformance.checker import Bounds, TraceChecker, check_trace
from ledgerspec.conformance.events import Event, InputError, events_from_json, parse_event
from ledgerspec.conformance.reader import read_traces
from ledgerspec.conformance.run import CheckRun, check_files
from ledgerspec.conformance.verdict import CONFORMS, INCONCLUSIVE, VIOLATES, BoundHit, Candidate, Failure, Verdict

__all__ = [
    "CONFORMS",
    "INCONCLUSIVE",
    "VIOLATES",
    "BoundHit",
    "Bounds",
    "Candidate",
    "CheckRun",
    "Event",
    "Failure",
    "InputError",
    "TraceChecker",
    "Verdict",
    "check_files",
    "check_trace",
    "events_from_json",
    "parse_event",
    "read_traces",
]
