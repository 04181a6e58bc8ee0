"""Record scenarios on a real Apache BookKeeper cluster and check every trace with the oracle.

:func:`record_bookkeeper` starts a cluster from the pinned jars
(``conformance/adapters``), runs the scenarios one after another on it, and
writes, for each scenario, into ``OUT/<scenario>/``:

``trace.ndjson``
    the clients' view as ledger-spec events (client mode), one trace per ledger;
``observations.ndjson``
    what the harness reported, unmapped: each trace event names its
    observation in ``x-obs`` (and the send of its request in ``x-sent``);
``run.json``
    the run's facts: the cluster's bookies, the ledgers, the entries the
    writer saw acknowledged, the bookies the scenario crashed; with the
    observations, all that :func:`check_recording` needs to check it again;
``metadata.json``
    each ledger's znode as ZooKeeper holds it at the end, decoded with the
    project's ``LedgerMetadataFormat`` reader, beside its znode version;
``verdict.json``
    each trace's verdict, the constants it was checked with, and the
    observations that map to no event with the reason;
``evidence.json``
    when the scenario inspected its bookies or restarted one: what their
    files said at the moments it asked (lastMark, the ledger's fence and
    ledger-key records in the journals, its index file), and each restart's
    journal replay, as the bookie logged it, trimmed to the lines about the
    scenario's ledgers and the replay's frame (:data:`REPLAY_LOG_RULE`).

When every scenario has run, the cluster stops (the bookies flush and write
their lastMark) and each bookie's journals, lastMark, entry logs and index
are read with the ``inspect-bookie`` readers into ``OUT/bookies/bookie-N.json``,
with the problems those readers find. Every entry the writer saw
acknowledged must be in the journal of enough bookies of its write set: a
summary of that is ``OUT/bookies/acknowledged.json``.

The scenarios run on one cluster per bookie storage: the suite's storage
(``storage``, one of ``cluster.SUITE_STORAGES``) for those that need none in
particular, and each storage a scenario needs (``Scenario.storage``).
BookKeeper's default storage runs in ``OUT/cluster``, its files in
``OUT/bookies``; another storage S in ``OUT/cluster-S`` and ``OUT/bookies-S``.
Each ``run.json`` names the storage its scenario ran on.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.adapters.bookkeeper import LedgerTraceMapper, MappingError
from ledgerspec.conformance.adapters.broker_scenarios import (
    BROKER_SCENARIOS,
    SUBSCRIPTION,
    BrokerScenario,
    LostMessageError,
    TopicDriver,
)
from ledgerspec.conformance.adapters.broker_topic import BrokerMappingError, BrokerTopicTraceMapper
from ledgerspec.conformance.adapters.cluster import SUITE_STORAGES, BookKeeperCluster, ClusterError, ScenarioCluster
from ledgerspec.conformance.adapters.findings import FINDINGS, Finding
from ledgerspec.conformance.adapters.jars import ARTIFACTS, BROKER_ARTIFACTS, JarSet, ensure_jars
from ledgerspec.conformance.adapters.managed_ledger import CursorMappingError, CursorTraceMapper
from ledgerspec.conformance.adapters.managed_ledger_topic import TopicMappingError, TopicTraceMapper
from ledgerspec.conformance.adapters.ml_scenarios import (
    CURSOR,
    ML_SCENARIOS,
    BrokerDriver,
    ManagedLedgerScenario,
    SkippedMessageError,
)
from ledgerspec.conformance.adapters.scenarios import SCENARIOS, BrokenPromiseError, Driver, Scenario
from ledgerspec.conformance.checker import Bounds, check_trace
from ledgerspec.conformance.events import events_from_json
from ledgerspec.conformance.manifest import manifest_json, write_manifest
from ledgerspec.conformance.verdict import INCONCLUSIVE, VIOLATES, Verdict
from ledgerspec.reference.bookie.disk import check_bookie_files, read_bookie_files
from ledgerspec.reference.bookie.formats import JournalScan, RecordKind
from ledgerspec.reference.bookie.layout import BookieLayout
from ledgerspec.reference.bookie.report import bookie_files_json
from ledgerspec.reference.metadata.ledger_metadata_format import decode_ledger_metadata
from ledgerspec.reference.metadata.ledger_paths import ledger_path
from ledgerspec.reference.metadata.managed_ledger_format import (
    decode_managed_cursor_info,
    decode_managed_ledger_info,
    to_json,
)
from ledgerspec.reference.metadata.managed_ledger_paths import cursor_path, managed_ledger_path
from ledgerspec.spec.codecs import short_json
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.spec.vocabulary import ndjson
from ledgerspec.tools.recording.reference_bookies import REFERENCE_STORAGE, ReferenceBookieCluster

__all__ = [
    "LedgerRecording",
    "ScenarioRecording",
    "check_broker_recording",
    "check_cursor_recording",
    "check_recording",
    "record_bookkeeper",
    "record_managed_ledger",
    "record_pulsar_broker",
]

#: Bookies in the cluster: enough for E=5, and for an ensemble of 3 to lose two bookies.
CLUSTER_BOOKIES = 5
#: Whose bookies the ledger scenarios run on: BookKeeper's from the jars, or reference bookies over TCP.
BOOKIES = ("bookkeeper", "reference")
#: Late replies (the third ack of a closed ledger's last entry) reach the client within this.
_SETTLE_SECONDS = 0.3
#: Bounds for the hidden steps between two observed events (a crash, a restart, lost replies): as many in a row as
#: each observation mode asks for.
BOUNDS = Bounds(max_candidates=10_000)


class RecordingError(Exception):
    """A stored recording that cannot be read or mapped: names the file, and the line or observation."""


def _read_run(directory: Path, needs: Sequence[str]) -> dict[str, Any]:
    path = directory / "run.json"
    try:
        run = json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file; a recording holds run.json and observations.ndjson") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: not JSON ({exc})") from None
    if not isinstance(run, dict):
        raise RecordingError(f"{path}: not an object: {short_json(run)}")
    missing = [key for key in needs if key not in run]
    if missing:
        raise RecordingError(f"{path}: lacks {', '.join(map(repr, missing))}")
    return run


def _read_observations(directory: Path) -> list[dict[str, Any]]:
    path = directory / "observations.ndjson"
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    observations = []
    for number, line in enumerate(lines, 1):
        try:
            obs = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RecordingError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(obs, dict) or "ev" not in obs:
            raise RecordingError(f'{path}:{number}: not an observation (an object with "ev"): {line[:80]!r}')
        observations.append(obs)
    return observations


#: The files of a recording as a scenario leaves them, before the check writes its traces and verdicts.
RECORDING_FILES = ("run.json", "observations.ndjson", "metadata.json", "evidence.json")

_LEDGER_RUN = ("scenario", "ledgers", "cluster_bookies", "bookies_crashed", "failure", "seconds")
_CURSOR_RUN = ("scenario", "managed_ledger", "cursor", "max_entries_per_ledger", "metadata_max_entries_per_ledger",
               "failure", "seconds")  # fmt: skip


def recheck(system: str, root: Path, out: Path, names: Sequence[str] | None = None) -> list[ScenarioRecording]:
    """Check stored recordings of ``system`` again, without Java: ``root`` is one, or a directory of them.

    Only ``run.json`` and ``observations.ndjson`` are read, and nothing under
    ``root`` is written: each recording is copied to ``out/<its directory's
    name>`` (:data:`RECORDING_FILES`), and its ``trace.ndjson``,
    ``verdict.json`` and ``manifest.json`` are written there. ``names`` keeps
    only those scenarios.
    """
    if (root / "run.json").exists():
        directories = [root]
    elif root.is_dir():
        directories = sorted(p for p in root.iterdir() if (p / "run.json").exists())
    else:
        raise RecordingError(f"{root}: no such directory")
    if not directories:
        raise RecordingError(f"{root}: no recording here (a directory with run.json, or directories of them)")
    inputs = [d.resolve() for d in directories]
    written = out.resolve()
    clash = [d for d in inputs if written == d or d in written.parents or written in d.parents]
    if clash:
        raise RecordingError(
            f"--out {out} is in the recordings read ({clash[0]}) or holds them: the recordings are not written; "
            "give --out another directory"
        )
    check = {"bookkeeper": check_recording, "pulsar-broker": check_broker_recording}.get(system, check_cursor_recording)
    recordings = []
    for directory in directories:
        run = _read_run(directory, ())
        recorded = run.get("system", "bookkeeper")
        if recorded != system:
            raise RecordingError(f"{directory / 'run.json'}: a recording of {recorded}, not of {system}")
        if names is None or run.get("scenario") in names:
            copy = out / directory.name
            copy.mkdir(parents=True, exist_ok=True)
            for name in RECORDING_FILES:
                if (directory / name).is_file():
                    shutil.copyfile(directory / name, copy / name)
            recordings.append(check(copy))
    absent = sorted(set(names or ()) - {r.name for r in recordings})
    if absent:
        raise RecordingError(f"{root}: no recording of {', '.join(absent)}")
    return recordings


@attrs.frozen
class LedgerRecording:
    trace_id: str
    ledger: int
    constants: dict[str, int]
    events: int
    skipped: int
    verdict: Verdict
    spec: str = "ledger"  # the spec it was checked against


@attrs.frozen
class ScenarioRecording:
    name: str
    summary: str
    directory: Path
    ledgers: tuple[LedgerRecording, ...]
    failure: str | None  # a promise of the client API broken, seen by the scenario itself
    seconds: float

    expects: str | None = None  # the finding the scenario shows (findings.py)
    may_show: tuple[str, ...] = ()  # findings a race in the scenario may bring about
    evidence: tuple[str, ...] = ()  # what the bookies' files and replay logs said (evidence.json), line by line
    unmapped: str | None = None  # why the observations could not be mapped to traces (they stay on disk)
    storage: str | None = None  # the ledger storage of BookKeeper's bookies it ran on (cluster.BOOKIE_STORAGES)
    not_checked: dict[str, str] = attrs.field(factory=dict)  # spec -> why the recording is not checked against it

    def labels(self) -> list[tuple[Verdict, Finding | None]]:
        """Each violation, with the finding (of those the scenario expects or may show) that explains it. The
        verdict labels it (``Verdict.finding``: ``bug`` when the reports break a promise, else ``difference``)."""
        allowed = [FINDINGS[name] for name in (*([self.expects] if self.expects else []), *self.may_show)]
        return [
            (r.verdict, next((f for f in allowed if f.explains(r.verdict.reason)), None))
            for r in self.ledgers
            if r.verdict.status == VIOLATES
        ]

    @property
    def status(self) -> str:
        """``conforms``; ``known`` (it shows the finding it expects, or one it may show, and nothing else);
        ``violates`` or ``failed`` (something new: a violation, or a broken promise of the client API);
        ``mislabelled`` (a known finding, which the oracle's verdict labels a bug where the finding says
        difference, or the other way round); ``missed`` (the expected finding did not show); ``inconclusive``
        (a search bound was hit); ``unmapped`` (the observations could not be mapped to traces)."""
        if self.unmapped is not None:
            return "unmapped"
        finding = FINDINGS[self.expects] if self.expects is not None else None
        labels = self.labels()
        violations = [v for v, _ in labels]
        if any(f is None for _, f in labels):
            return "violates"
        if any(f is not None and f.kind != v.finding for v, f in labels):
            return "mislabelled"
        if self.failure is not None and (finding is None or finding.kind != "bug"):
            return "failed"
        if any(r.verdict.status == INCONCLUSIVE for r in self.ledgers):
            return "inconclusive"
        if finding is not None:
            shown = any(finding.explains(v.reason) for v in violations) and (
                finding.kind != "bug" or self.failure is not None
            )
            return "known" if shown else "missed"
        return "known" if violations else "conforms"


def record_bookkeeper(
    names: Sequence[str],
    out: Path,
    *,
    jars: JarSet | None = None,
    progress: Callable[[ScenarioRecording], None] | None = None,
    status: Callable[[str], None] | None = None,
    bookies: str = "bookkeeper",
    storage: str = "default",
) -> list[ScenarioRecording]:
    """Run ``names`` (scenario names) on one fresh cluster; write and check their traces (module docstring).

    ``progress`` is given each scenario's recording as it is done; ``status`` is told of each step as it
    starts: the fetch of the jars, the start of each process of the cluster, each scenario, the reading of
    what the cluster kept. ``storage`` (one of ``cluster.SUITE_STORAGES``) is the bookies' ledger storage for
    the scenarios that need none in particular. ``bookies="reference"`` runs them on reference bookies in place
    of BookKeeper's (:mod:`.reference_bookies`), all on one cluster, in ``OUT/cluster-reference``.
    """
    if bookies not in BOOKIES:
        raise ValueError(f"unknown bookies {bookies!r}; the bookies: {', '.join(BOOKIES)}")
    if storage not in SUITE_STORAGES:
        raise ValueError(f"unknown suite storage {storage!r}; the suite runs on {', '.join(SUITE_STORAGES)}")
    if bookies == "reference" and storage != "default":
        raise ValueError("reference bookies keep their own storage: the suite storage is BookKeeper's bookies'")
    unfit = [name for name in names if name in SCENARIOS and not SCENARIOS[name].runs_on(bookies)]
    if unfit:
        raise ValueError(
            f"{', '.join(unfit)} command faults that only reference bookies take: record them with bookies='reference'"
        )
    return _record_suite(
        names,
        SCENARIOS,
        out,
        jars,
        progress,
        _record_one,
        deleted_ok=False,
        status=status,
        storage_of=lambda name: REFERENCE_STORAGE if bookies == "reference" else SCENARIOS[name].storage_in(storage),
    )


#: Runs one scenario on the cluster into its directory, and adds the entries it saw acknowledged.
_RecordOne = Callable[[Any, str, Path, dict[int, list[int]]], ScenarioRecording]


def _record_suite(
    names: Sequence[str],
    known: Mapping[str, object],
    out: Path,
    jars: JarSet | None,
    progress: Callable[[ScenarioRecording], None] | None,
    record_one: _RecordOne,
    *,
    deleted_ok: bool,
    status: Callable[[str], None] | None = None,
    storage_of: Callable[[str], str] = lambda _name: "default",
) -> list[ScenarioRecording]:
    """Scenarios one after another on one fresh cluster per storage (``storage_of`` a scenario's name); then the
    bookies' files, once it has stopped.

    ``deleted_ok``: a ledger with acknowledged entries may have been deleted
    since (trimmed), and is then only counted in ``acknowledged.json``.
    """
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KeyError(f"no scenario {', '.join(unknown)}; the scenarios: {', '.join(known)}")
    say = status or (lambda _step: None)
    out.mkdir(parents=True, exist_ok=True)
    jars = jars or ensure_jars(status=status)
    by_storage: dict[str, list[str]] = {}
    for name in names:
        by_storage.setdefault(storage_of(name), []).append(name)
    recordings: dict[str, ScenarioRecording] = {}
    for storage, group in by_storage.items():
        suffix = "" if storage == "default" else f"-{storage}"
        cluster_dir = out / f"cluster{suffix}"
        shutil.rmtree(cluster_dir, ignore_errors=True)
        acknowledged: dict[int, list[int]] = {}
        cluster_of_storage: BookKeeperCluster | ReferenceBookieCluster = (
            ReferenceBookieCluster(jars, cluster_dir, CLUSTER_BOOKIES, status=status)
            if storage == REFERENCE_STORAGE
            else BookKeeperCluster(jars, cluster_dir, CLUSTER_BOOKIES, storage, status=status)
        )
        with cluster_of_storage as cluster:
            for name in group:
                say(f"scenario {name} ({len(recordings) + 1} of {len(names)})")
                started = time.monotonic()
                try:
                    recording = record_one(cluster, name, out / name, acknowledged)
                except RecordingError as exc:
                    # The observations are written before they are mapped: the scenarios after this one still
                    # run, and ``--recheck`` maps this one again once the mapping can.
                    scenario = known[name]
                    recording = ScenarioRecording(
                        name,
                        getattr(scenario, "summary", ""),
                        out / name,
                        (),
                        None,
                        time.monotonic() - started,
                        getattr(scenario, "expects", None),
                        tuple(getattr(scenario, "may_show", ())),
                        unmapped=str(exc),
                        storage=storage if isinstance(scenario, Scenario) and storage != REFERENCE_STORAGE else None,
                    )
                recordings[name] = recording
                if progress is not None:
                    progress(recording)
            say("reading the ledgers' metadata")
            metadata = _read_metadata(cluster, sorted(acknowledged), deleted_ok=deleted_ok)
            say("stopping the cluster")
        say("reading the bookies' files")
        _record_bookies(cluster, out / f"bookies{suffix}", metadata, acknowledged)
    return [recordings[name] for name in names]


def _record_one(
    cluster: ScenarioCluster, name: str, directory: Path, acknowledged: dict[int, list[int]]
) -> ScenarioRecording:
    """Run one scenario and write what was seen (``observations.ndjson``, ``run.json``, ``metadata.json``)."""
    assert cluster.harness is not None
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    scenario = SCENARIOS[name]
    started = time.monotonic()
    cluster.harness.take_observations()
    driver = Driver(cluster, name, lambda n, ledgers: read_bookie_now(cluster, n, ledgers))
    failure = None
    try:
        scenario.run(driver)
    except (BrokenPromiseError, ClusterError) as exc:
        failure = str(exc)
    finally:
        driver.finish()
    time.sleep(_SETTLE_SECONDS)
    observations = cluster.harness.take_observations()
    (directory / "observations.ndjson").write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in observations))
    for ledger in driver.ledgers:
        acknowledged[ledger.ledger_id] = list(ledger.acknowledged)
    ledger_ids = [ledger.ledger_id for ledger in driver.ledgers]
    run = {
        "scenario": name,
        "artifacts": list(ARTIFACTS),
        "cluster_bookies": cluster.bookie_ids,
        "ledgers": ledger_ids,
        "acknowledged": {str(ledger.ledger_id): ledger.acknowledged for ledger in driver.ledgers},
        "bookies_crashed": driver.crashes,
        "failure": failure,
        "seconds": round(time.monotonic() - started, 3),
    }
    if cluster.storage == REFERENCE_STORAGE:
        run["bookies"] = "reference"  # the scenario cannot show a finding of BookKeeper's bookie
    else:
        run["storage"] = cluster.storage
    (directory / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    (directory / "metadata.json").write_text(json.dumps(_read_metadata(cluster, ledger_ids), indent=2) + "\n")
    if driver.inspections or driver.restart_logs:
        evidence = {
            "storage": cluster.storage,
            "inspections": driver.inspections,
            "replays": [
                {"bookie": cluster.bookie_ids[n - 1], **_trimmed_replay_log(text, ledger_ids)}
                for n, text in driver.restart_logs
            ],
            "rule": REPLAY_LOG_RULE,
        }
        (directory / "evidence.json").write_text(_one_item_a_line(evidence))
    return check_recording(directory)


def _one_item_a_line(value: dict[str, Any]) -> str:
    """A JSON object with each of its values, and each item of a list value, on a line of its own."""
    parts = []
    for key, item in value.items():
        if isinstance(item, list) and item:
            inner = ",\n".join(f"    {json.dumps(x)}" for x in item)
            parts.append(f"  {json.dumps(key)}: [\n{inner}\n  ]")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(item)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def read_bookie_now(cluster: ScenarioCluster, n: int, ledger_ids: Sequence[int]) -> dict[str, Any]:
    """What bookie ``n``'s files say now about ``ledger_ids``, read with the ``inspect-bookie`` readers.

    The bookie may be running: a journal record it is writing reads as a torn
    tail, which the reader stops at. The shape is ``scenarios.BookieReader``'s.
    """
    layout = BookieLayout.discover(str(cluster.bookie_directory(n)))
    if layout is None:
        raise ClusterError(f"bookie {n} has no journal directory in {cluster.bookie_directory(n)}")
    files = read_bookie_files(layout)
    marks = [c.mark for c in files.marks if c.mark is not None]
    ledgers: dict[str, Any] = {}
    for ledger_id in ledger_ids:
        index = files.index(ledger_id)
        ledgers[str(ledger_id)] = {
            "fence_records": _records_of(files.journals, ledger_id, RecordKind.FENCE),
            "ledger_key_records": _records_of(files.journals, ledger_id, RecordKind.LEDGER_KEY),
            "index": None if index is None else {"fenced": index.header.fenced, "entries": len(index.locations)},
        }
    return {
        "bookie": cluster.bookie_ids[n - 1],
        "last_mark": [files.persisted_mark.file_id, files.persisted_mark.offset] if marks else None,
        "index_files": len(files.indexes),
        "ledgers": ledgers,
    }


def _records_of(journals: Sequence[JournalScan], ledger_id: int, kind: RecordKind) -> list[list[int]]:
    return [
        [journal.file_id, record.offset]
        for journal in journals
        for record in journal.records
        if record.ledger_id == ledger_id and record.kind is kind
    ]


#: How a restart's log is trimmed for evidence.json, in words (kept in the file beside the lines).
REPLAY_LOG_RULE = (
    "of the lines a bookie logged from its start to its registration, kept: those of the journal replay that name "
    "a ledger of the scenario ('Replay journal - ledger id : L,', 'Skip replaying entries of ledger L '), the "
    "replay's frame ('Replaying journal', 'Finished replaying journal') and the flush after it ('Flush ledger "
    "storage at checkpoint'); every other line is dropped and counted"
)
_FRAME = ("Replaying journal ", "Finished replaying journal", "Flush ledger storage at checkpoint")


def _trimmed_replay_log(text: str, ledger_ids: Sequence[int]) -> dict[str, Any]:
    """A restart's log lines kept by :data:`REPLAY_LOG_RULE`, and how many were dropped."""
    about = re.compile(r"Replay journal - ledger id : (\d+),|Skip replaying entries of ledger (\d+) ")
    ledgers = {str(ledger_id) for ledger_id in ledger_ids}
    kept: list[str] = []
    dropped = 0
    for line in text.splitlines():
        match = about.search(line)
        if (match is not None and (match.group(1) or match.group(2)) in ledgers) or any(f in line for f in _FRAME):
            kept.append(line)
        else:
            dropped += 1
    return {"lines": kept, "dropped": dropped}


def check_recording(directory: Path) -> ScenarioRecording:
    """Map a recorded scenario's observations to ledger traces and check each (``trace.ndjson``, ``verdict.json``).

    Needs only ``run.json`` and ``observations.ndjson``: a recording can be checked
    again, elsewhere, after the mapping or the spec changed.
    """
    run = _read_run(directory, _LEDGER_RUN)
    name = str(run["scenario"])
    scenario = SCENARIOS.get(name)
    observations = _read_observations(directory)
    ledgers = []
    trace_lines: list[dict[str, Any]] = []
    skipped: dict[str, list[dict[str, Any]]] = {}
    for ledger_id in run["ledgers"]:
        # Named by the recording's directory, the scenario's name unless kept under another: two recordings
        # of one scenario, checked together, are two traces.
        mapper = LedgerTraceMapper(f"{directory.name}-L{ledger_id}", int(ledger_id), run["cluster_bookies"])
        try:
            mapper.feed_all(observations)
            constants = mapper.constants(max_crashes=int(run["bookies_crashed"]))
        except MappingError as exc:
            raise RecordingError(f"{directory / 'observations.ndjson'}: ledger {ledger_id}: {exc}") from None
        events = events_from_json(mapper.lines, str(directory / "trace.ndjson"))
        verdict = check_trace(events, LedgerSpec(**constants), "client", BOUNDS)
        trace_lines += mapper.lines
        skipped[mapper.trace_id] = [attrs.asdict(s) for s in mapper.skipped]
        ledgers.append(
            LedgerRecording(mapper.trace_id, int(ledger_id), constants, len(mapper.lines), len(mapper.skipped), verdict)
        )
    return _write_checked(directory, run, scenario, ledgers, trace_lines, skipped, _read_evidence(directory))


def _read_evidence(directory: Path) -> tuple[str, ...]:
    """``evidence.json`` in sentences: what each bookie's files said, then what each restart's replay logged.

    A recording without the file has no evidence; one that is not what the
    recorder writes is refused with the file and what is wrong.
    """
    path = directory / "evidence.json"
    if not path.exists():
        return ()
    try:
        evidence = json.loads(path.read_text())
        lines: list[str] = []
        for inspection in evidence["inspections"]:
            for files in inspection["bookies"]:
                mark = files["last_mark"]
                said = [f"lastMark {'none' if mark is None else _position(mark)}"]
                for ledger_id, ledger in files["ledgers"].items():
                    fences = ", ".join(map(_position, ledger["fence_records"])) or "none"
                    keys = ", ".join(map(_position, ledger["ledger_key_records"])) or "none"
                    index = ledger["index"]
                    state = (
                        "no index file" if index is None else "index " + ("fenced" if index["fenced"] else "not fenced")
                    )
                    said.append(f"ledger {ledger_id}: fence record at {fences}, ledger-key record at {keys}, {state}")
                lines.append(f"{inspection['moment']}, bookie {files['bookie']}: " + "; ".join(said))
        for replay in evidence["replays"]:
            for line in replay["lines"]:
                lines.append(f"restart of bookie {replay['bookie']}: {_log_message(line)}")
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise RecordingError(f"{path}: not the evidence the recorder writes ({type(exc).__name__}: {exc})") from None
    return tuple(lines)


def _position(mark: Sequence[int]) -> str:
    """A journal position, (journal id, offset), in decimal as the bookie logs it."""
    file_id, offset = mark
    return f"({int(file_id)}, {int(offset)})"


def _log_message(line: str) -> str:
    """A log line without its time, level and thread (the layout in cluster.py: time level [thread] logger message)."""
    match = re.fullmatch(r"\S+ +\S+ +\[[^\]]*\] (.*)", line)
    return match.group(1) if match else line


def _write_checked(
    directory: Path,
    run: dict[str, Any],
    scenario: Scenario | ManagedLedgerScenario | BrokerScenario | None,
    ledgers: Sequence[LedgerRecording],
    trace_lines: Sequence[dict[str, Any]],
    skipped: dict[str, list[dict[str, Any]]],
    evidence: tuple[str, ...] = (),
    *,
    topic_lines: Sequence[dict[str, Any]] = (),
    not_checked: dict[str, str] | None = None,
) -> ScenarioRecording:
    """Write a checked recording's traces (``trace.ndjson``; a managed ledger's trace of the managed-ledger spec
    in ``topic/trace.ndjson``), their ``manifest.json`` and the verdicts (``verdict.json``); the recording."""
    spec = {"managed-ledger": "cursor", "pulsar-broker": "managed_ledger"}.get(run.get("system", ""), "ledger")
    _write_traces(directory, run, spec, [r for r in ledgers if r.spec == spec], trace_lines)
    shutil.rmtree(directory / "topic", ignore_errors=True)
    if topic_lines:
        (directory / "topic").mkdir()
        topic = [r for r in ledgers if r.spec == "managed_ledger"]
        _write_traces(directory / "topic", run, "managed_ledger", topic, topic_lines)
    expects, may_show = _expectations(run, scenario)
    recording = ScenarioRecording(
        str(run["scenario"]),
        scenario.summary if scenario is not None else "",
        directory,
        tuple(ledgers),
        run["failure"],
        float(run["seconds"]),
        expects,
        may_show,
        evidence,
        storage=_storage_of(run, scenario),
        not_checked=dict(not_checked or {}),
    )
    (directory / "verdict.json").write_text(json.dumps(_verdict_json(recording, skipped), indent=2) + "\n")
    return recording


def _write_traces(
    directory: Path, run: dict[str, Any], spec: str, ledgers: Sequence[LedgerRecording], lines: Sequence[dict[str, Any]]
) -> None:
    """One spec's traces of a recording, ``trace.ndjson``, and the ``manifest.json`` that ``ledgerspec check``
    reads their spec and constants from."""
    (directory / "trace.ndjson").write_bytes(ndjson(lines))
    write_manifest(
        directory,
        manifest_json(
            spec=spec,
            mode="client",
            constants={},
            files=["trace.ndjson"],
            traces=[{"trace": r.trace_id, "constants": r.constants} for r in ledgers],
            not_traces={
                "observations.ndjson": "what the harness reported, unmapped; `ledgerspec record --recheck` maps it to "
                "trace.ndjson"
            }
            if (directory / "observations.ndjson").is_file()
            else {},
            scenario=str(run["scenario"]),
            system=run.get("system", "bookkeeper"),
        ),
    )


def _storage_of(run: dict[str, Any], scenario: Scenario | ManagedLedgerScenario | BrokerScenario | None) -> str | None:
    """The ledger storage of BookKeeper's bookies a ledger scenario ran on; a recording made before run.json named
    it ran on the one its scenario needs, else on the default."""
    if run.get("system", "bookkeeper") != "bookkeeper" or run.get("bookies") == "reference":
        return None
    if "storage" in run:
        return str(run["storage"])
    return scenario.storage_in("default") if isinstance(scenario, Scenario) else "default"


def _expectations(
    run: dict[str, Any], scenario: Scenario | ManagedLedgerScenario | BrokerScenario | None
) -> tuple[str | None, tuple[str, ...]]:
    """The finding a recording is to show, and those it may show: the scenario's, less those of BookKeeper's
    bookie when it ran on reference bookies."""
    if scenario is None:
        return None, ()
    if run.get("bookies") != "reference":
        return scenario.expects, scenario.may_show

    def of_bookie(name: str) -> bool:
        return FINDINGS[name].part == "bookie"

    expects = None if scenario.expects is None or of_bookie(scenario.expects) else scenario.expects
    return expects, tuple(name for name in scenario.may_show if not of_bookie(name))


def _verdict_json(recording: ScenarioRecording, skipped: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "scenario": recording.name,
        "summary": recording.summary,
        "status": recording.status,
        "storage": recording.storage,
        "expects": recording.expects,
        "failure": recording.failure,
        "evidence": list(recording.evidence),
        "not_checked": recording.not_checked,
        "traces": [
            {
                "trace": r.trace_id,
                "spec": r.spec,
                "ledger": r.ledger,
                "constants": r.constants,
                "events": r.events,
                "verdict": r.verdict.to_json(),
                "skipped_observations": skipped[r.trace_id],
            }
            for r in recording.ledgers
        ],
    }


def _read_metadata(cluster: ScenarioCluster, ledger_ids: Sequence[int], *, deleted_ok: bool = False) -> dict[str, Any]:
    """Each ledger's znode, decoded with the project's LedgerMetadataFormat reader.

    With ``deleted_ok``, a ledger deleted since (a managed ledger trims the
    ledgers its cursors consumed) is left out instead of being an error.
    """
    zk = cluster.zookeeper
    found: dict[str, Any] = {}
    for ledger_id in ledger_ids:
        path = ledger_path(ledger_id)
        if deleted_ok and zk.exists(path) is None:
            continue
        data, stat = zk.get(path)
        m = decode_ledger_metadata(data, ledger_id, where=path)
        found[str(ledger_id)] = {
            "znode": path,
            "znode_version": stat.version,
            "state": m.state.name,
            "ensemble_size": m.ensemble_size,
            "write_quorum_size": m.write_quorum_size,
            "ack_quorum_size": m.ack_quorum_size,
            "segments": [[s.first_entry_id, list(s.ensemble)] for s in m.segments],
            "last_entry_id": m.last_entry_id,
            "length": m.length,
            "digest_type": m.digest_type.name if m.digest_type is not None else None,
        }
    return found


def _record_bookies(
    cluster: ScenarioCluster, out: Path, metadata: dict[str, Any], acknowledged: dict[int, list[int]]
) -> None:
    """Each stopped bookie's files, read and checked; and where each acknowledged entry is journaled, and where it
    is kept at all (in a journal, or in the ledger storage's index)."""
    out.mkdir(parents=True, exist_ok=True)
    journaled: dict[str, set[tuple[int, int]]] = {}
    stored: dict[str, set[tuple[int, int]]] = {}
    for n, bookie_id in enumerate(cluster.bookie_ids, start=1):
        layout = BookieLayout.discover(str(cluster.bookie_directory(n)))
        if layout is None:
            raise FileNotFoundError(f"bookie {n} left no journal directory in {cluster.bookie_directory(n)}")
        files = read_bookie_files(layout)
        problems = check_bookie_files(files, None)
        valid = not any(p.severity == "error" for p in problems)
        (out / f"bookie-{n}.json").write_text(
            json.dumps({"bookie": bookie_id, **bookie_files_json(files, problems, valid)}, indent=2) + "\n"
        )
        journaled[bookie_id] = {
            (record.ledger_id, record.entry_id)
            for journal in files.journals
            for record in journal.records
            if record.kind is RecordKind.ENTRY
        }
        indexed = {(index.ledger_id, entry) for index in files.indexes for entry in index.locations}
        stored[bookie_id] = journaled[bookie_id] | indexed
    (out / "acknowledged.json").write_text(
        json.dumps(_acknowledged_on_journals(metadata, acknowledged, journaled, stored), indent=2) + "\n"
    )


def _acknowledged_on_journals(
    metadata: dict[str, Any],
    acknowledged: dict[int, list[int]],
    journaled: dict[str, set[tuple[int, int]]],
    stored: dict[str, set[tuple[int, int]]],
) -> dict[str, Any]:
    """For each ledger: acknowledged entries journaled on fewer than Qa bookies of their write set
    (``on_fewer_than_qa_journals``: BookKeeper keeps ``maxBackupJournals`` journals past the lastMark, so that
    is where its bookies keep them; the reference bookie deletes a journal once a checkpoint passed it), and
    those kept on fewer than Qa bookies at all, in a journal or in the index (``on_fewer_than_qa_bookies``).

    A ledger deleted since has no write sets left to check against: it is only counted.
    """
    report: dict[str, Any] = {}
    for ledger_id, entries in acknowledged.items():
        m = metadata.get(str(ledger_id))
        if m is None:
            report[str(ledger_id)] = {"acknowledged": len(entries), "ledger_deleted": True}
            continue
        e, qw, qa = m["ensemble_size"], m["write_quorum_size"], m["ack_quorum_size"]
        short, lost = [], []
        for entry in entries:
            ensemble = [seg for first, seg in m["segments"] if first <= entry][-1]
            write_set = [ensemble[(entry + i) % e] for i in range(qw)]
            on = [b for b in write_set if (ledger_id, entry) in journaled.get(b, set())]
            if len(on) < qa:
                short.append({"entry": entry, "write_set": write_set, "journaled_on": on})
            kept = [b for b in write_set if (ledger_id, entry) in stored.get(b, set())]
            if len(kept) < qa:
                lost.append({"entry": entry, "write_set": write_set, "stored_on": kept})
        report[str(ledger_id)] = {
            "acknowledged": len(entries),
            "on_fewer_than_qa_journals": short,
            "on_fewer_than_qa_bookies": lost,
        }
    return report


# -- Pulsar's managed ledger ----------------------------------------------------------------
def record_managed_ledger(
    names: Sequence[str],
    out: Path,
    *,
    jars: JarSet | None = None,
    progress: Callable[[ScenarioRecording], None] | None = None,
    status: Callable[[str], None] | None = None,
) -> list[ScenarioRecording]:
    """Run managed-ledger scenarios (``ml_scenarios.py``) on one fresh cluster; write and check their traces.

    Each scenario directory holds ``observations.ndjson`` (every broker
    process's observations, in order), ``run.json``, ``metadata.json`` (the
    managed ledger's and the cursor's znodes, decoded with the project's
    ``MLDataFormats`` reader), ``trace.ndjson`` (one cursor-spec trace),
    ``topic/trace.ndjson`` (the same run as the managed-ledger spec's clients
    see it, where that spec models every step: not with a reset) and
    ``verdict.json``. As for ``record_bookkeeper``, ``OUT/bookies/`` holds the
    bookies' files once the cluster stops, and ``acknowledged.json`` where
    each published message's entry is journaled. ``progress`` and ``status``
    as for ``record_bookkeeper``.
    """
    return _record_suite(names, ML_SCENARIOS, out, jars, progress, _record_cursor, deleted_ok=True, status=status)


def _record_cursor(
    cluster: BookKeeperCluster, name: str, directory: Path, published: dict[int, list[int]]
) -> ScenarioRecording:
    """Run one scenario, write what was seen, and add the entries its publishes were acknowledged at."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    scenario = ML_SCENARIOS[name]
    started = time.monotonic()
    driver = BrokerDriver(
        cluster,
        name,
        scenario.max_entries_per_ledger,
        scenario.metadata_max_entries_per_ledger,
        scenario.maximum_rollover_ms,
    )
    failure = None
    try:
        scenario.run(driver)
    except (SkippedMessageError, ClusterError) as exc:
        failure = str(exc)
    finally:
        driver.finish()
    (directory / "observations.ndjson").write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in driver.log))
    for ledger, entry in driver.published:
        published.setdefault(int(ledger), []).append(int(entry))
    run = {
        "system": "managed-ledger",
        "scenario": name,
        "artifacts": list(ARTIFACTS),
        "managed_ledger": driver.name,
        "cursor": CURSOR,
        "max_entries_per_ledger": scenario.max_entries_per_ledger,
        "metadata_max_entries_per_ledger": scenario.metadata_max_entries_per_ledger,
        "maximum_rollover_ms": scenario.maximum_rollover_ms,
        "published": [list(p) for p in driver.published],
        "acknowledged": sorted(list(p) for p in driver.acknowledged),
        "failure": failure,
        "seconds": round(time.monotonic() - started, 3),
    }
    (directory / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    (directory / "metadata.json").write_text(json.dumps(_read_cursor_znodes(cluster, driver.name), indent=2) + "\n")
    return check_cursor_recording(directory)


def check_cursor_recording(directory: Path) -> ScenarioRecording:
    """Map a recorded managed-ledger scenario to one cursor trace and check it (``trace.ndjson``, ``verdict.json``)."""
    run = _read_run(directory, _CURSOR_RUN)
    name = str(run["scenario"])
    scenario = ML_SCENARIOS.get(name)
    observations = _read_observations(directory)
    mapper = CursorTraceMapper(name, str(run["managed_ledger"]), str(run["cursor"]))
    try:
        mapper.feed_all(observations)
    except CursorMappingError as exc:
        raise RecordingError(f"{directory / 'observations.ndjson'}: {exc}") from None
    aging = int(run.get("maximum_rollover_ms", 0)) > 0  # a recording made before run.json named it: no aging
    constants = mapper.constants(
        int(run["max_entries_per_ledger"]), int(run["metadata_max_entries_per_ledger"]), rollover_by_time=aging
    )
    events = events_from_json(mapper.lines, str(directory / "trace.ndjson"))
    verdict = check_trace(events, CursorSpec(**constants), "client", BOUNDS)
    traces = [LedgerRecording(name, -1, constants, len(mapper.lines), 0, verdict, "cursor")]
    topic_id, topic_lines, not_checked = f"{name}-topic", [], {}
    max_entries = int(run["max_entries_per_ledger"])
    topic = TopicTraceMapper(topic_id, str(run["managed_ledger"]), str(run["cursor"]), max_entries, aging=aging)
    try:
        topic.feed_all(observations)
    except TopicMappingError as exc:
        not_checked["managed_ledger"] = str(exc)
    else:
        topic_lines = topic.lines
        events = events_from_json(topic_lines, str(directory / "topic" / "trace.ndjson"))
        verdict = check_trace(events, ManagedLedgerSpec(**topic.constants()), "client", BOUNDS)
        traces.append(LedgerRecording(topic_id, -1, topic.constants(), len(topic_lines), 0, verdict, "managed_ledger"))
    skipped: dict[str, list[dict[str, Any]]] = {r.trace_id: [] for r in traces}
    return _write_checked(
        directory, run, scenario, traces, mapper.lines, skipped, topic_lines=topic_lines, not_checked=not_checked
    )


def _read_cursor_znodes(cluster: BookKeeperCluster, managed_ledger: str) -> dict[str, Any]:
    """The managed ledger's znode and its cursors', decoded with the project's MLDataFormats reader."""
    zk = cluster.zookeeper
    path = managed_ledger_path(managed_ledger)
    data, stat = zk.get(path)
    found: dict[str, Any] = {"path": path, "version": stat.version, **to_json(decode_managed_ledger_info(data))}
    cursors = {}
    for child in sorted(zk.get_children(path)):
        data, stat = zk.get(cursor_path(managed_ledger, child))
        cursors[child] = {"version": stat.version, **to_json(decode_managed_cursor_info(data))}
    found["cursors"] = cursors
    return found


# -- a Pulsar broker -----------------------------------------------------------------------
_BROKER_RUN = ("scenario", "topic", "deduplication", "max_entries_per_ledger", "failure", "seconds")


def record_pulsar_broker(
    names: Sequence[str],
    out: Path,
    *,
    jars: JarSet | None = None,
    progress: Callable[[ScenarioRecording], None] | None = None,
    status: Callable[[str], None] | None = None,
) -> list[ScenarioRecording]:
    """Run broker scenarios (``broker_scenarios.py``) with a released Pulsar broker and Java client on one fresh
    cluster; write and check their traces.

    Each scenario directory holds ``observations.ndjson`` (what the client saw
    and what the driver did to the broker, in order), ``run.json``,
    ``trace.ndjson`` (one managed-ledger-spec trace, client mode, with
    ``Dedup`` as the broker ran), its ``manifest.json`` and ``verdict.json``.
    The jars are the broker set (``jars.BROKER_ARTIFACTS``). ``progress`` and ``status`` as for
    ``record_bookkeeper``.
    """
    jars = jars or ensure_jars(BROKER_ARTIFACTS, status=status)

    def record_one(
        cluster: BookKeeperCluster, name: str, directory: Path, answered: dict[int, list[int]]
    ) -> ScenarioRecording:
        return _record_topic(cluster, jars, name, directory, answered)

    return _record_suite(names, BROKER_SCENARIOS, out, jars, progress, record_one, deleted_ok=True, status=status)


def _record_topic(
    cluster: BookKeeperCluster, jars: JarSet, name: str, directory: Path, answered: dict[int, list[int]]
) -> ScenarioRecording:
    """Run one broker scenario, write what was seen, and add the entries its sends were answered at."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    scenario = BROKER_SCENARIOS[name]
    started = time.monotonic()
    driver = TopicDriver(cluster, jars, scenario)
    failure = None
    try:
        scenario.run(driver)
    except LostMessageError as exc:
        failure = str(exc)
    finally:
        driver.finish()
    (directory / "observations.ndjson").write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in driver.log))
    for ledger, entry in driver.answered.values():
        if ledger >= 0:  # -1:-1 answers a duplicate: nothing was written
            answered.setdefault(ledger, []).append(entry)
    run = {
        "system": "pulsar-broker",
        "scenario": name,
        "artifacts": list(BROKER_ARTIFACTS),
        "topic": driver.topic,
        "subscription": SUBSCRIPTION,
        "deduplication": scenario.deduplication,
        "max_entries_per_ledger": scenario.max_entries_per_ledger,
        "answered": {str(seq): list(position) for seq, position in sorted(driver.answered.items())},
        "read": [list(message) for message in driver.read],
        "failure": failure,
        "seconds": round(time.monotonic() - started, 3),
    }
    (directory / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    return check_broker_recording(directory)


def check_broker_recording(directory: Path) -> ScenarioRecording:
    """Map a recorded broker scenario to one managed-ledger-spec trace and check it (``trace.ndjson``,
    ``verdict.json``)."""
    run = _read_run(directory, _BROKER_RUN)
    name = str(run["scenario"])
    mapper = BrokerTopicTraceMapper(
        name,
        str(run.get("subscription", SUBSCRIPTION)),
        int(run["max_entries_per_ledger"]),
        dedup=bool(run["deduplication"]),
    )
    try:
        mapper.feed_all(_read_observations(directory))
    except BrokerMappingError as exc:
        raise RecordingError(f"{directory / 'observations.ndjson'}: {exc}") from None
    constants = mapper.constants()
    events = events_from_json(mapper.lines, str(directory / "trace.ndjson"))
    verdict = check_trace(events, ManagedLedgerSpec(**constants), "client", BOUNDS)
    traces = [LedgerRecording(name, -1, constants, len(mapper.lines), 0, verdict, "managed_ledger")]
    return _write_checked(directory, run, BROKER_SCENARIOS.get(name), traces, mapper.lines, {name: []})
