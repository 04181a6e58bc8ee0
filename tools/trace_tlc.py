"""Validate one fully observed trace with TLC: its TLA+ trace module (ledgerspec.conformance.tla_trace),
checked in this process through JPype (ledgerspec.tools.tlc)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.events import Event
from ledgerspec.conformance.tla_trace import TraceModule, TraceOutcome, trace_module
from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import Spec

__all__ = ["TlcTraceCheck", "validate_with_tlc"]


@attrs.frozen
class TlcTraceCheck:
    outcome: TraceOutcome
    module: TraceModule
    seconds: float  # wall time of the TLC run (the module's writing excluded)
    distinct_states: int


def validate_with_tlc(events: Sequence[Event], spec: Spec[Any], *, directory: Path | None = None) -> TlcTraceCheck:
    """Check the trace on TLC; the module and its config are written to ``directory`` (a temporary one)."""
    from ledgerspec.tools import tlc  # JPype is loaded only when TLC runs

    module = trace_module(events, spec, spec_module=catalog.find(spec.name).tla_module)
    work = directory or Path(tempfile.mkdtemp(prefix="ledgerspec-trace-"))
    path, config = module.write(work, catalog.find(spec.name).tla_path)
    started = time.perf_counter()
    result = tlc.run_tlc(path, config, check_deadlock=False, log_path=work / "tlc.log")
    seconds = time.perf_counter() - started
    first = result.violations[0] if result.violations else None
    outcome = module.outcome(
        (first.name or first.kind) if first is not None else None,
        len(first.trace) if first is not None else 0,
        result.depth,
        result.distinct_states,
    )
    return TlcTraceCheck(outcome, module, seconds, result.distinct_states)
