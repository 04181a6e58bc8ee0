"""The trace vocabulary: one step named as the spec names it, and the line of the trace format that logs it.

Every layer that writes or reads traces speaks it, so it is defined once, here
at the bottom: the reference engine logs its steps as :class:`EngineEvent`
values (a spec action's name and its parameters as spec values); the engine's
recorders, the trace generators and the adapters of the real systems write
lines with :func:`trace_line` (a spec mapping's
:meth:`~ledgerspec.spec.tracing.TraceMapping.event_line` encodes an engine
event's parameters first); the oracle reads lines of version
:data:`FORMAT_VERSION` (``ledgerspec.conformance.events`` checks their
envelope). The format itself is documented in docs/trace-format.md, as is
the manifest that says what a directory's traces were recorded under
(:func:`manifest_json`, :func:`write_manifest`; ``ledgerspec.conformance.manifest``
reads it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "EngineEvent",
    "manifest_json",
    "ndjson",
    "trace_line",
    "write_manifest",
]

#: The ``v`` of every line: the version of the trace format this code writes and reads.
FORMAT_VERSION = 1


@attrs.frozen
class EngineEvent:
    """One step of an implementation, named by the spec action it takes (or ``Init``)."""

    action: str  # a spec action's name, or Init
    args: tuple[Any, ...]  # the action's parameters, as spec values
    process: str  # the process that took the step
    observer: str | None  # the client that saw it; None: no client did
    # when it was taken, on the host's monotonic clock (time.monotonic, CLOCK_MONOTONIC on Linux), where the
    # engine reads one: a client's log and served bookies' log on one host are merged by it (conformance/log_merge.py)
    time: float | None = None

    def __str__(self) -> str:
        args = ", ".join(repr(a) for a in self.args)
        return f"{self.process}: {self.action}({args})"


def trace_line(
    trace: str,
    process: str,
    seq: int,
    action: str,
    params: dict[str, Any] | None = None,
    observed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A line of the trace format, its keys in the format's order; ``params`` and ``observed`` when not empty."""
    line: dict[str, Any] = {"v": FORMAT_VERSION, "trace": trace, "process": process, "seq": seq, "type": action}
    if params:
        line["params"] = params
    if observed:
        line["observed"] = observed
    return line


def ndjson(lines: Iterable[dict[str, Any]]) -> bytes:
    """Lines of the trace format as NDJSON: one JSON object per line."""
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


# -- manifests: what a directory's traces were recorded under (docs/trace-format.md, "Manifests") ----------
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "ledgerspec-traces"
MANIFEST_VERSION = 1


def manifest_json(
    *,
    spec: str,
    mode: str,
    constants: Mapping[str, Any],
    files: Sequence[str],
    traces: Sequence[Mapping[str, Any]] = (),
    not_traces: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A manifest as JSON: ``traces`` are objects with a ``trace`` key (and ``constants``, where a trace has its
    own); ``extra`` keys are the writer's."""
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "v": MANIFEST_VERSION,
        "spec": spec,
        "mode": mode,
        "constants": dict(constants),
        "files": list(files),
        "traces": [dict(t) for t in traces],
    }
    if not_traces:
        manifest["not_traces"] = dict(not_traces)
    overlap = sorted(set(manifest) & set(extra))
    if overlap:
        raise ValueError(f"manifest keys given twice: {', '.join(overlap)}")
    return {**manifest, **extra}


def write_manifest(directory: Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest`` (:func:`manifest_json`) as ``directory/manifest.json``."""
    path = directory / MANIFEST_NAME
    path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    return path
