"""Validate one fully observed trace with TLC: its TLA+ trace module (ledgerspec.tools.model_checking.tlc.trace_module),
checked in this process through JPype (ledgerspec.tools.model_checking.tlc.runner)."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.events import Event
from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import Spec
from ledgerspec.tools.model_checking.tlc.trace_module import TraceModule, TraceOutcome, trace_module

__all__ = ["TlcTraceCheck", "validate_with_tlc"]


@attrs.frozen
class TlcTraceCheck:
    outcome: TraceOutcome
    module: TraceModule
    seconds: float  # wall time of the TLC run (the module's writing excluded)
    distinct_states: int


def validate_with_tlc(events: Sequence[Event], spec: Spec[Any], *, directory: Path | None = None) -> TlcTraceCheck:
    """Check the trace on TLC; the module, its config and TLC's output are written to ``directory``, and
    kept there; by default to a temporary directory, removed before this returns."""
    from ledgerspec.tools.model_checking.tlc import runner as tlc  # JPype is loaded only when TLC runs

    entry = catalog.find(spec.name)
    module = trace_module(events, spec, spec_module=entry.tla_module)
    with contextlib.ExitStack() as stack:
        work = directory or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ledgerspec-trace-")))
        path, config = module.write(work)
        started = time.perf_counter()
        library = [entry.tla_path.parent, catalog.tla_library()]
        result = tlc.run_tlc(path, config, check_deadlock=False, log_path=work / "tlc.log", library=library)
        seconds = time.perf_counter() - started
    first = result.violations[0] if result.violations else None
    outcome = module.outcome(
        (first.name or first.kind) if first is not None else None,
        len(first.trace) if first is not None else 0,
        result.depth,
        result.distinct_states,
    )
    return TlcTraceCheck(outcome, module, seconds, result.distinct_states)
