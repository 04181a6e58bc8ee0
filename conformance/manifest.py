"""Trace manifests: what a directory's traces were recorded under, in a file beside them that ``check`` reads.

A trace says what happened; whether that is allowed depends on the spec,
the observation mode and the spec's constants (how many bookies, which
quorums, how many crashes). Every writer of traces in this project puts a
``manifest.json`` beside them (docs/trace-format.md, "Manifests"):

.. code-block:: json

    {"format": "ledgerspec-traces", "v": 1, "spec": "ledger", "mode": "client",
     "constants": {"NumBookies": 5},
     "files": ["trace.ndjson"],
     "traces": [{"trace": "fenced-writer-L4", "constants": {"MaxCrashes": 1}}],
     "not_traces": {"observations.ndjson": "what the harness reported, unmapped"}}

``constants`` hold for every trace of the listed ``files``; a trace's own
``constants`` add to them or replace them. ``mutant``, when a writer sets
it, names the seeded bug the traces were recorded with: their violations
are expected, and the report tells them apart from surprises. ``not_traces`` names the files of
the directory that look like traces and are not, with the reason. Other keys
are the writer's own (a seed, the command that made the traces) and are
kept as they are.

:func:`find_inputs` turns the paths given to ``check`` into the files to
read, the manifests that describe them and the files it left unread with
the reason; :meth:`CheckInputs.constants_of` gives each trace's constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.reader import TRACE_SUFFIXES, TraceFileError, expand_paths
from ledgerspec.spec.vocabulary import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION, manifest_json, write_manifest

__all__ = [
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "CheckInputs",
    "TraceManifest",
    "find_inputs",
    "manifest_json",
    "read_manifest",
    "write_manifest",
]

# A recording of a real system before it is mapped (tools/recording/real_systems.py): the harness's raw
# observations and the run's facts, no trace yet.
_RECORDING_FILES = ("run.json", "observations.ndjson")


@attrs.frozen
class TraceManifest:
    """One ``manifest.json``, read."""

    path: Path
    spec: str
    mode: str
    constants: Mapping[str, Any]
    files: tuple[str, ...]  # trace files, relative to the manifest's directory
    traces: tuple[str, ...]  # the traces it lists (it need not list them all)
    trace_constants: Mapping[str, Mapping[str, Any]]  # a trace's own constants, over ``constants``
    not_traces: Mapping[str, str]  # file -> why it is not a trace file
    seeded_bug: str | None = None  # the mutant the traces were recorded with: their violations are expected

    @property
    def directory(self) -> Path:
        return self.path.parent

    def constants_of(self, trace: str) -> dict[str, Any]:
        return {**self.constants, **self.trace_constants.get(trace, {})}

    def constant_sets(self) -> list[dict[str, Any]]:
        """The constants of its traces: those of each listed trace, and the shared ones for any it does not
        list or that has none of its own."""
        shared = not self.traces or any(t not in self.trace_constants for t in self.traces)
        return ([dict(self.constants)] if shared else []) + [self.constants_of(t) for t in self.trace_constants]


def read_manifest(path: Path) -> TraceManifest:
    """Read a ``manifest.json``; :class:`TraceFileError` names the file and what is wrong with it."""
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise TraceFileError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise TraceFileError(f'{path}: not a trace manifest (no "format": "{MANIFEST_FORMAT}")')
    if data.get("v") != MANIFEST_VERSION:
        raise TraceFileError(f"{path}: manifest version {data.get('v')!r}; this checker reads {MANIFEST_VERSION}")

    def field(name: str, kind: type, default: Any = None) -> Any:
        value = data.get(name, default)
        if not isinstance(value, kind):
            raise TraceFileError(f'{path}: "{name}" must be a JSON {_JSON_NAMES[kind]}, got {value!r}')
        return value

    spec, mode = field("spec", str), field("mode", str)
    constants = field("constants", dict, {})
    files = field("files", list)
    if not all(isinstance(f, str) and f and "/" not in f and f not in (".", "..") for f in files):
        raise TraceFileError(f'{path}: "files" must name files of the manifest\'s directory, got {files!r}')
    own: dict[str, Mapping[str, Any]] = {}
    listed = []
    for i, trace in enumerate(field("traces", list, [])):
        if not isinstance(trace, dict) or not isinstance(trace.get("trace"), str):
            raise TraceFileError(f'{path}: traces[{i}] must be an object with a "trace" id')
        if not isinstance(trace.get("constants", {}), dict):
            raise TraceFileError(f"{path}: traces[{i}].constants must be a JSON object")
        listed.append(trace["trace"])
        if trace.get("constants"):
            own[trace["trace"]] = trace["constants"]
    not_traces = field("not_traces", dict, {})
    seeded_bug = data.get("mutant")
    if seeded_bug is not None and not (isinstance(seeded_bug, str) and seeded_bug):
        raise TraceFileError(f'{path}: "mutant" must name a seeded bug (a JSON string) or be null, got {seeded_bug!r}')
    return TraceManifest(path, spec, mode, constants, tuple(files), tuple(listed), own, not_traces, seeded_bug)


_JSON_NAMES: dict[type, str] = {str: "string", dict: "object", list: "array"}


@attrs.frozen
class CheckInputs:
    """What ``check`` reads: the trace files, the manifests that describe them, the files it leaves."""

    files: tuple[str, ...]  # named as the reader names them: str(path), or a URL as given
    manifests: tuple[TraceManifest, ...]
    not_read: tuple[tuple[Path, str], ...]  # (file, why)
    _by_file: Mapping[str, TraceManifest] = attrs.field(alias="by_file", repr=False)

    def manifest_of(self, file: str) -> TraceManifest | None:
        """The manifest of a file, named as the reader names it (``str(path)``)."""
        return self._by_file.get(file)

    def seeded_bug_of(self, file: str) -> str | None:
        """The seeded bug a file's traces were recorded with, if its manifest names one."""
        manifest = self._by_file.get(file)
        return None if manifest is None else manifest.seeded_bug

    def constants_of(self, trace: str, file: str) -> dict[str, Any] | None:
        """The constants ``trace`` was recorded under, if the manifest of ``file`` (one of its files) says."""
        manifest = self._by_file.get(file)
        return None if manifest is None else manifest.constants_of(trace)


def find_inputs(paths: Iterable[str | Path]) -> CheckInputs:
    """The files ``check`` reads for ``paths``, with their manifests.

    A directory with a manifest stands for the files the manifest lists; the
    other trace-like files in it are left, with the reason. A directory with no
    trace file but with subdirectories that have manifests (the ``--out`` of
    ``record``) stands for those. A file stands for itself, with the manifest
    beside it if that lists it. A directory that holds a real system's
    recording before it was mapped is an error that says how to map it.
    """
    files: list[Path | str] = []
    manifests: dict[Path, TraceManifest] = {}
    not_read: list[tuple[Path, str]] = []
    for raw in paths:
        if "://" in str(raw):  # a URL for Spark's file systems: read there, with no manifest
            files.append(str(raw))
            continue
        path = Path(raw)
        if path.is_dir():
            _directory(path, files, manifests, not_read)
        elif path.name == MANIFEST_NAME and path.is_file():
            _directory(path.parent, files, manifests, not_read)
        else:
            found = expand_paths([path])
            beside = path.parent / MANIFEST_NAME
            if not beside.exists() and path.name in _RECORDING_FILES:
                _refuse_recording(path.parent, path)
            if beside.is_file():
                manifest = manifests.get(beside) or read_manifest(beside)
                why = manifest.not_traces.get(path.name)
                if why is not None:
                    raise TraceFileError(f"{path}: not a trace file ({beside}): {why}")
                if path.name in manifest.files:
                    manifests[beside] = manifest
            files += found
    by_file = {str(m.directory / f): m for m in manifests.values() for f in m.files}
    unique = list(dict.fromkeys(str(f) for f in files))
    return CheckInputs(tuple(unique), tuple(manifests.values()), tuple(not_read), by_file=by_file)


def _directory(
    directory: Path, files: list[Path | str], manifests: dict[Path, TraceManifest], not_read: list[tuple[Path, str]]
) -> None:
    path = directory / MANIFEST_NAME
    if path.is_file():
        manifest = read_manifest(path)
        manifests[path] = manifest
        listed = []
        for name in manifest.files:
            listed += expand_paths([directory / name])  # missing or empty: an error naming the file
        files += listed
        for other in sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES)):
            if other not in listed:
                not_read.append((other, manifest.not_traces.get(other.name) or f"not listed in {path}"))
        return
    _refuse_recording(directory, directory)
    if any(p.is_file() and p.name.endswith(TRACE_SUFFIXES) for p in directory.iterdir()):
        files += expand_paths([directory])
        return
    nested = sorted(p for p in directory.iterdir() if p.is_dir() and (p / MANIFEST_NAME).is_file())
    if not nested:
        expand_paths([directory])  # raises: a directory without trace files
    for sub in nested:
        _directory(sub, files, manifests, not_read)


def _refuse_recording(directory: Path, given: Path) -> None:
    """Raise if ``directory`` holds a real system's recording that was never mapped to traces."""
    if not all((directory / name).is_file() for name in _RECORDING_FILES):
        return
    try:
        system = orjson.loads((directory / "run.json").read_bytes()).get("system", "bookkeeper")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        system = "SYSTEM"
    raise TraceFileError(
        f"{given}: part of a recording of a real system, not yet mapped to traces: "
        f"`ledgerspec record {system} --recheck {directory} --out OUT` maps and checks it, and writes its traces "
        f"and their {MANIFEST_NAME} under OUT"
    )
