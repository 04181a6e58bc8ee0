"""``ledgerspec record bookkeeper|managed-ledger|pulsar-broker|reference-client``: run scenarios on the real
systems and check their traces.

Fetches the pinned jars with Maven (once; cached), starts ZooKeeper and five
bookies, each in its own JVM, and a client harness; runs the scenarios on
them; writes each scenario's traces, raw observations, decoded metadata and
verdicts under ``--out`` (see :mod:`ledgerspec.tools.recording.real_systems`).
``bookkeeper`` checks ledger traces against the ledger spec, and keeps every
bookie's files as ``inspect-bookie`` reads them; ``managed-ledger`` runs
Pulsar's managed ledger and a durable cursor in broker JVMs that it kills and
replaces, and checks the consumer's view against the cursor spec; ``pulsar-broker``
runs a released Pulsar broker and its Java client on the cluster, kills the
broker with answers held back, and checks the client's view against the
managed-ledger spec with the broker's deduplication
(:mod:`ledgerspec.conformance.adapters.broker_scenarios`). Exit status 0 when
every scenario conforms or shows exactly the finding it expects, 1 when one
shows something new (a violation, a broken promise of the client API),
misses its finding or could not be mapped (``unmapped``: its observations
stay on disk, the other scenarios still run), 4 when a check was inconclusive, 2 for an unknown
scenario or a recording that cannot be read, 3 when Java, javac or Maven is
missing. ``--recheck DIR`` runs nothing: it maps and checks stored
recordings again, after the mapping or the spec changed, without Java; it
writes nothing under DIR, only under ``--out``. Each scenario's traces get
a ``manifest.json`` beside them, so ``ledgerspec check OUT`` checks them
again with the constants they were recorded under.

``bookkeeper --storage db`` runs the scenarios that need no storage in
particular on bookies that keep their ledgers in ``DbLedgerStorage``, as
Pulsar deploys them, in place of BookKeeper's default storage; the scenarios
about one storage run on theirs. ``--list`` says which findings show on which.

``bookkeeper --bookies reference`` runs the same scenarios with the Java
client on reference bookies served over TCP in place of BookKeeper's
(:mod:`ledgerspec.tools.recording.reference_bookies`); the findings of
BookKeeper's bookie are then not expected. ``reference-client`` turns it round: the project's reference ledger client
speaks BookKeeper's v3 protocol (or v2, ``--protocol v2``, as Pulsar's
brokers do, the explicit LAC on a v3 connection beside it as BookKeeper's
client sends it) to four real bookies
(``--bookies real``, the default) or to four reference bookies served over
TCP (``--bookies reference``, no Java), its client-mode trace is checked against the ledger
spec, and on real bookies the released Java client reads back every ledger
it wrote (:mod:`ledgerspec.tools.recording.reference_client`). Its traces
are made in-process: there is nothing to ``--recheck``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledgerspec.conformance.adapters.broker_scenarios import BROKER_SCENARIOS
from ledgerspec.conformance.adapters.cluster import SUITE_STORAGES, ClusterError
from ledgerspec.conformance.adapters.findings import shown_by
from ledgerspec.conformance.adapters.jars import ARTIFACTS, JavaSetupError
from ledgerspec.conformance.adapters.ml_scenarios import ML_SCENARIOS
from ledgerspec.conformance.adapters.scenarios import SCENARIOS, Scenario, storages_showing
from ledgerspec.conformance.verdict import Verdict
from ledgerspec.reference.wire.network import PROTOCOLS
from ledgerspec.tools.cli.commands.base import (
    EXIT_INCONCLUSIVE,
    EXIT_MISSING_TOOL,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATION,
    UsageError,
    runs_progress,
)
from ledgerspec.tools.recording.real_systems import (
    RecordingError,
    ScenarioRecording,
    recheck,
    record_bookkeeper,
    record_managed_ledger,
    record_pulsar_broker,
)
from ledgerspec.tools.recording.reference_client import (
    CLIENT_SCENARIOS,
    real_bookies,
    record_reference_client,
    reference_bookies,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]

SYSTEMS = ("bookkeeper", "managed-ledger", "pulsar-broker", "reference-client")
_TITLES = {
    "bookkeeper": "Apache BookKeeper",
    "managed-ledger": "Apache Pulsar's managed ledger",
    "pulsar-broker": "An Apache Pulsar broker and its Java client",
    "reference-client": "The reference client on BookKeeper's bookies",
}
BOOKIE_KINDS = ("real", "reference")
_STYLE = {
    "conforms": "green",
    "known": "yellow",
    "violates": "bold red",
    "failed": "bold red",
    "missed": "bold red",
    "mislabelled": "bold red",
    "inconclusive": "magenta",
    "unmapped": "bold red",
}


def register(commands: Any) -> None:
    record = commands.add_parser(
        "record",
        help="run scenarios on the real BookKeeper or Pulsar managed ledger, record what clients see, check it",
    )
    record.add_argument("system", help="the system to run: " + ", ".join(SYSTEMS))
    record.add_argument(
        "--scenario", action="append", metavar="NAME", help="a scenario (repeatable; default: all); see --list"
    )
    record.add_argument("--out", default="ledgerspec-real", help="where the recordings go (default: ledgerspec-real)")
    record.add_argument("--list", action="store_true", help="list the scenarios and findings, and run nothing")
    record.add_argument("--json", action="store_true", help="print one JSON object")
    record.add_argument(
        "--recheck",
        metavar="DIR",
        help="run nothing: map and check again the recordings in DIR (one, or a directory of them), without Java; "
        "the traces and verdicts go under --out, never into DIR",
    )
    record.add_argument(
        "--bookies",
        choices=BOOKIE_KINDS,
        default="real",
        help="bookkeeper and reference-client: BookKeeper's bookies from the jars (real, the default), or reference "
        "bookies served over TCP in their place",
    )
    record.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="v3",
        help="reference-client: the wire protocol the reference client speaks (default: v3)",
    )
    record.add_argument(
        "--storage",
        choices=SUITE_STORAGES,
        help="bookkeeper: the ledger storage of the bookies for the scenarios that need none in particular: "
        "BookKeeper's default (SortedLedgerStorage) or db (DbLedgerStorage, as Pulsar deploys it); default: default",
    )
    record.set_defaults(run=_record)


def _record(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.system not in SYSTEMS:
        raise UsageError(f"unknown system {args.system!r}; systems: {', '.join(SYSTEMS)}")
    suites: dict[str, dict[str, Any]] = {
        "bookkeeper": SCENARIOS,
        "managed-ledger": ML_SCENARIOS,
        "pulsar-broker": BROKER_SCENARIOS,
        "reference-client": CLIENT_SCENARIOS,
    }
    known = suites[args.system]
    if args.bookies != "real" and args.system in ("managed-ledger", "pulsar-broker"):
        raise UsageError("--bookies is an option of bookkeeper and reference-client only")
    if args.storage is not None and (args.system != "bookkeeper" or args.bookies != "real"):
        raise UsageError("--storage is an option of bookkeeper on BookKeeper's bookies only")
    if args.storage is not None and args.recheck is not None:
        raise UsageError("--recheck runs nothing: each recording's run.json names the storage it ran on")
    names = args.scenario or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown scenario {', '.join(map(repr, unknown))}; scenarios: {', '.join(known)}")
    # record_bookkeeper's name for the bookies: BookKeeper's ("real" on the command line) or reference ones
    suite_bookies = "reference" if args.bookies == "reference" else "bookkeeper"
    if args.system == "bookkeeper" and args.recheck is None and not args.list:
        unfit = [n for n in names if not SCENARIOS[n].runs_on(suite_bookies)]
        if unfit and args.scenario:
            raise UsageError(
                f"{', '.join(unfit)} command faults that only reference bookies take: add --bookies reference"
            )
        names = [n for n in names if n not in unfit]
    if args.protocol != "v3" and args.system != "reference-client":
        raise UsageError("--protocol is an option of reference-client only")
    if args.list:
        if args.json:
            print(json.dumps(_list_json(args.system, known), indent=2))
        else:
            _print_list(out, args.system, known)
        return EXIT_OK
    if args.recheck is not None and args.system == "reference-client":
        raise UsageError(
            "reference-client has nothing to --recheck: its traces are made as it runs; "
            "`ledgerspec check DIR` checks them again"
        )
    if args.recheck is not None:
        try:
            recordings = recheck(args.system, Path(args.recheck), Path(args.out), args.scenario)
        except RecordingError as exc:
            err.print(f"[bold red]{escape(str(exc))}[/]", soft_wrap=True)
            return EXIT_USAGE
        return _report(args, out, recordings, Path(args.out), f"read from {args.recheck}, checked again")

    def progress(recording: ScenarioRecording) -> None:
        if not args.json:
            style = _STYLE[recording.status]
            err.print(f"[{style}]{recording.status:>12}[/] {escape(recording.name)} ({recording.seconds:.1f} s)")

    try:
        with runs_progress(err, quiet=args.json, transient=True) as steps:
            if args.system == "reference-client":
                recordings = _record_reference_client(args, names, progress, steps.step)
            elif args.system == "bookkeeper":
                recordings = record_bookkeeper(
                    names,
                    Path(args.out),
                    progress=progress,
                    status=steps.step,
                    bookies=suite_bookies,
                    storage=args.storage or "default",
                )
            elif args.system == "pulsar-broker":
                recordings = record_pulsar_broker(names, Path(args.out), progress=progress, status=steps.step)
            else:
                recordings = record_managed_ledger(names, Path(args.out), progress=progress, status=steps.step)
    except JavaSetupError as exc:
        err.print(f"[bold red]{escape(str(exc))}[/]", soft_wrap=True)
        return EXIT_MISSING_TOOL
    except ClusterError as exc:
        err.print(f"[bold red]the cluster failed: {escape(str(exc))}[/]", soft_wrap=True)
        return EXIT_MISSING_TOOL
    except RecordingError as exc:
        err.print(f"[bold red]what the harness reported cannot be mapped: {escape(str(exc))}[/]", soft_wrap=True)
        return EXIT_VIOLATION
    return _report(args, out, recordings, Path(args.out), "recorded")


def _record_reference_client(
    args: argparse.Namespace,
    names: list[str],
    progress: Callable[[ScenarioRecording], None],
    status: Callable[[str], None],
) -> list[ScenarioRecording]:
    out = Path(args.out)
    bookies = (
        real_bookies(out / "cluster", status=status) if args.bookies == "real" else reference_bookies(out / "bookies")
    )
    with bookies as started:
        return record_reference_client(names, started, out, protocol=args.protocol, progress=progress)


def _report(args: argparse.Namespace, out: Console, recordings: list[ScenarioRecording], root: Path, how: str) -> int:
    if args.json:
        print(json.dumps(_to_json(args.system, recordings, root), indent=2))
    else:
        _print(out, args.system, recordings, root, how)
    statuses = {r.status for r in recordings}
    if statuses & {"violates", "failed", "missed", "mislabelled", "unmapped"}:
        return EXIT_VIOLATION
    if "inconclusive" in statuses:
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _label(verdict: Verdict) -> str:
    """The oracle's label of a violation: ``bug`` with the promises it breaks, or ``difference``."""
    promises = ", ".join(verdict.promise_names)
    return f"{verdict.finding} ({promises})" if promises else str(verdict.finding)


def _note(recording: ScenarioRecording) -> str:
    if recording.unmapped is not None:
        return recording.unmapped
    if recording.status in ("known", "mislabelled"):
        notes = []
        for verdict, finding in recording.labels():
            assert finding is not None
            note = f"{_label(verdict)}: {finding.title}"
            if finding.kind != verdict.finding:
                note += f" (listed as a {finding.kind}: {finding.name})"
            notes.append(note)
        return "; ".join(dict.fromkeys(notes))
    if recording.status == "missed" and recording.expects is not None:
        return f"expected, not shown: {recording.expects}"
    for ledger in recording.ledgers:
        if ledger.verdict.status != "conforms":
            return f"{ledger.trace_id}: {ledger.verdict.reason}"
    return recording.failure or ""


def _print(out: Console, system: str, recordings: list[ScenarioRecording], root: Path, how: str) -> None:
    table = Table(title=f"{_TITLES[system]}, {how} under {root}")
    with_storage = any(r.storage is not None for r in recordings)  # BookKeeper's bookies: their ledger storage
    columns = ("scenario", *(("storage",) if with_storage else ()), "status", "traces", "events", "s", "note")
    for column in columns:
        table.add_column(column, justify="right" if column in ("traces", "events", "s") else "left")
    for r in recordings:
        table.add_row(
            escape(r.name),
            *((r.storage or "",) if with_storage else ()),
            f"[{_STYLE[r.status]}]{r.status}[/]",
            str(len(r.ledgers)),
            str(sum(x.events for x in r.ledgers)),
            f"{r.seconds:.1f}",
            escape(_note(r)),
        )
    out.print(table)
    for r in recordings:
        for line in r.evidence:  # what the bookies' files and replay logs said (evidence.json)
            out.print(f"{escape(r.name)}: {escape(line)}", soft_wrap=True)
    counts: dict[str, int] = {}
    for r in recordings:
        counts[r.status] = counts.get(r.status, 0) + 1
    out.print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + f" of {len(recordings)} scenarios")


def _to_json(system: str, recordings: list[ScenarioRecording], root: Path) -> dict[str, Any]:
    return {
        "system": system,
        "artifacts": list(ARTIFACTS),
        "out": str(root),
        "scenarios": [
            {
                "scenario": r.name,
                "storage": r.storage,
                "status": r.status,
                "expects": r.expects,
                "failure": r.failure,
                "unmapped": r.unmapped,
                "not_checked": r.not_checked,
                "seconds": round(r.seconds, 3),
                "evidence": list(r.evidence),
                "findings": [
                    {
                        "trace": v.trace,
                        "label": v.finding,
                        "promises": list(v.promise_names),
                        "known": None if f is None else f.name,
                        "listed_as": None if f is None else f.kind,
                    }
                    for v, f in r.labels()
                ],
                "traces": [
                    {
                        "trace": x.trace_id,
                        "spec": x.spec,
                        "events": x.events,
                        "skipped": x.skipped,
                        "constants": x.constants,
                        "verdict": x.verdict.to_json(),
                    }
                    for x in r.ledgers
                ],
            }
            for r in recordings
        ],
    }


def _storages(scenario: Any) -> tuple[str, ...]:
    """The ledger storages a BookKeeper scenario runs on; none for the other systems'."""
    return scenario.storages() if isinstance(scenario, Scenario) else ()


def _print_list(out: Console, system: str, scenarios: dict[str, Any]) -> None:
    on_storages = system == "bookkeeper"
    table = Table(title="scenarios")
    for column in ("name", "what it does", *(("storage",) if on_storages else ()), "expects"):
        table.add_column(column)
    for s in scenarios.values():
        storage = (", ".join(_storages(s)),) if on_storages else ()
        table.add_row(escape(s.name), escape(s.summary), *storage, escape(s.expects or ""))
    out.print(table)
    shown = shown_by(scenarios.values())
    if not shown:
        out.print("findings: none (each scenario must conform)")
        return
    findings = Table(title="findings")
    for column in ("name", "kind", *(("shows on",) if on_storages else ()), "what"):
        findings.add_column(column)
    for f in shown:
        storages = (", ".join(storages_showing(f.name, scenarios.values())),) if on_storages else ()
        findings.add_row(escape(f.name), f.kind, *storages, escape(f.title))
    out.print(findings)


def _list_json(system: str, scenarios: dict[str, Any]) -> dict[str, Any]:
    """``--list --json``: the ``system``, its ``scenarios`` (each ``name``, ``summary``, ``expects``: the finding
    it is there to show, or null, ``may_show``: the findings a race in it may bring about, and, for bookkeeper,
    ``storages``: the ledger storages it runs on) and the ``findings`` they can show (each ``name``, ``kind``: bug
    or difference, ``title``, and, for bookkeeper, ``storages``: those on which a scenario can show it)."""
    on_storages = system == "bookkeeper"
    return {
        "system": system,
        "scenarios": [
            {
                "name": s.name,
                "summary": s.summary,
                "expects": s.expects,
                "may_show": list(s.may_show),
                **({"storages": list(_storages(s))} if on_storages else {}),
            }
            for s in scenarios.values()
        ],
        "findings": [
            {
                "name": f.name,
                "kind": f.kind,
                "title": f.title,
                **({"storages": list(storages_showing(f.name, scenarios.values()))} if on_storages else {}),
            }
            for f in shown_by(scenarios.values())
        ],
    }
