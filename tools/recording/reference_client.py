"""The reference ledger client on bookies it reaches over TCP, each scenario's client-mode trace checked.

The other direction of the recordings of :mod:`.real_systems`: there the
released Java client is judged on real bookies; here the reference client
(:mod:`ledgerspec.reference.ledger.client`) speaks BookKeeper's v3 protocol,
or v2 as Pulsar's brokers do (:mod:`ledgerspec.reference.wire.network`), to
bookies that are not its own,
so that its behaviour is judged against a real server. The bookies are
either

- BookKeeper's own (``real``): a
  :class:`~ledgerspec.conformance.adapters.cluster.BookKeeperCluster` of four
  bookies from the pinned jars, whose ZooKeeper holds the ledgers' metadata
  in BookKeeper's format; there the released Java client then opens each
  ledger the reference client wrote and reads it back; or
- reference bookies served over TCP (``reference``,
  :class:`~ledgerspec.reference.wire.ServedBookies`), the metadata in the
  embedded store: no Java needed.

Each scenario's events are recorded as the ledger spec's ``client``
observation mode sees them (:class:`~ledgerspec.reference.ledger.trace.ClientTraceRecorder`)
and checked against the spec. A scenario also checks the promises of the
client API itself: every entry acknowledged is read back, from the closed
ledger, by the reference reader and, on real bookies, by the Java client.
For each scenario, ``OUT/<scenario>/`` gets ``trace.ndjson``, its
``manifest.json`` (``ledgerspec check OUT/<scenario>`` checks it again) and
``verdict.json``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster
from ledgerspec.conformance.adapters.jars import JarSet, ensure_jars
from ledgerspec.conformance.checker import Bounds, check_trace
from ledgerspec.conformance.events import events_from_json
from ledgerspec.conformance.manifest import manifest_json, write_manifest
from ledgerspec.reference.ledger.client import (
    BookKeeperClient,
    ClientConfig,
    LedgerHandle,
    OrderedPlacement,
    RecoveryOpen,
)
from ledgerspec.reference.ledger.client_view import ClientView, client_view
from ledgerspec.reference.ledger.trace import ClientTraceRecorder
from ledgerspec.reference.metadata.embedded import EmbeddedMetadataStore
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore
from ledgerspec.reference.metadata.store import MetadataStore
from ledgerspec.reference.metadata.zookeeper import ZooKeeperMetadataStore
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.reference.wire.network import WireNetwork
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.vocabulary import ndjson
from ledgerspec.tools.recording.real_systems import LedgerRecording, ScenarioRecording

__all__ = ["BOOKIES", "CLIENT_SCENARIOS", "ClientScenario", "record_reference_client"]

#: Bookies of each cluster: an ensemble of three and one to replace a bookie that fails.
BOOKIES = 4
#: The ledgers' password: the Java harness opens ledgers with it (``LedgerspecHarness.PASSWORD``).
PASSWORD = b"ledgerspec"
#: Bounds for the hidden steps between two events the clients see (a crash, lost replies): as many in a row as the
#: observation mode asks for.
BOUNDS = Bounds(max_candidates=10_000)
#: How long a scenario's client may take to do what it was asked.
_WITHIN = 60.0

_T = TypeVar("_T")


class ScenarioBookies(Protocol):
    """The bookies a scenario runs on: their ids (bookie ``n`` is ``ids[n - 1]``), crash and restart."""

    @property
    def ids(self) -> list[str]: ...

    def crash(self, n: int) -> None: ...

    def restart(self, n: int) -> None: ...

    def metadata(self) -> MetadataStore: ...

    def read_back(self, ledger_id: int, last: int) -> list[str] | None:
        """The ledger's entries 0 .. last as another client reads them; None where there is none."""
        ...


@attrs.define
class RealBookies:
    """BookKeeper's bookies of a :class:`BookKeeperCluster`; its ZooKeeper holds the metadata."""

    cluster: BookKeeperCluster
    _readers: int = 0

    @property
    def ids(self) -> list[str]:
        return self.cluster.bookie_ids

    def crash(self, n: int) -> None:
        self.cluster.kill_bookie(n)

    def restart(self, n: int) -> None:
        self.cluster.restart_bookie(n)

    def metadata(self) -> MetadataStore:
        return ZooKeeperMetadataStore(f"127.0.0.1:{self.cluster.zk_port}")

    def read_back(self, ledger_id: int, last: int) -> list[str] | None:
        """The released Java client opens the ledger without recovery and reads it."""
        harness = self.cluster.harness
        assert harness is not None
        self._readers += 1
        client = 100 + self._readers  # a Java client of its own for each read
        harness.call("open", client=client, ledger=ledger_id, recovery=False)
        entries: list[str] = harness.call("read", client=client, ledger=ledger_id, first=0, last=last)["entries"]
        return entries


@attrs.define
class ServedReferenceBookies:
    """Reference bookies served over TCP; the metadata in one embedded store."""

    served: ServedBookies
    store: EmbeddedMetadataStore = attrs.field(factory=EmbeddedMetadataStore)

    @property
    def ids(self) -> list[str]:
        return list(self.served.bookie_ids)

    def crash(self, n: int) -> None:
        self.served.crash(n)

    def restart(self, n: int) -> None:
        self.served.restart(n)

    def metadata(self) -> MetadataStore:
        return self.store.open_session()

    def read_back(self, ledger_id: int, last: int) -> list[str] | None:
        return None


class Run:
    """One scenario's clients on the bookies, and what they saw: the client-mode trace, the facts, the failure."""

    def __init__(self, bookies: ScenarioBookies, name: str, protocol: str = "v3") -> None:
        self.bookies = bookies
        self.name = name
        ids = bookies.ids
        self.network = WireNetwork(lambda: list(ids), lambda b: ids.index(b) + 1, protocol=protocol)
        self.store = bookies.metadata()
        self.ledgers = LedgerMetadataStore(self.store)
        self.writer = self._client(0)
        self.recoverers: dict[int, BookKeeperClient] = {}
        self.crashed: list[int] = []
        self.facts: dict[str, Any] = {}
        self.failure: str | None = None
        self.constants: dict[str, int] = {}
        self.recorder: ClientTraceRecorder | None = None

    def _client(self, client_id: int, *, explicit_lac: bool = False) -> BookKeeperClient:
        client = BookKeeperClient(
            client_id,
            self.ledgers,
            self.network,
            # explicitLacInterval's default is 0: no explicit LAC
            config=ClientConfig(explicit_lac=explicit_lac),
            placement=OrderedPlacement(),
            events=self.network.events,
        )
        return self.network.attach(client)

    # -- what a scenario does -----------------------------------------------------------
    def create(
        self, ensemble: int, write: int, ack: int, *, entries: int, recoverers: int = 0, explicit_lac: bool = False
    ) -> LedgerHandle:
        """A ledger of ``entries`` entries at most, with ``recoverers`` recovering clients and the writer's explicit
        LAC on or off; recorded from here."""
        if explicit_lac:
            self.writer = self._client(0, explicit_lac=True)
        self.constants = {
            "NumBookies": len(self.bookies.ids),
            "E": ensemble,
            "Qw": write,
            "Qa": ack,
            "NumRecoverers": recoverers,
            "NumReaders": 0,
            "MaxEntries": entries,
            "Throttle": 0,
            "LacLag": 0,
            "ExplicitLac": int(explicit_lac),
            "MaxCrashes": 0,
            "MaxLoss": 0,
        }
        self.recoverers = {c: self._client(c) for c in range(1, recoverers + 1)}
        self.recorder = ClientTraceRecorder(
            self.network.events, self._view, LedgerSpec(**self.constants), f"{self.name}-reference-client"
        )
        self.network.observers.append(self.recorder.step_done)
        return self._step(self.writer.create_ledger(ensemble, write, ack, password=PASSWORD))

    def _step(self, result: _T) -> _T:
        """A call of the application's is over: the trace records what it logged."""
        assert self.recorder is not None
        self.recorder.step_done()
        return result

    def _view(self) -> ClientView:
        (handle,) = self.writer.writers()
        recoveries = {
            c: client.recoveries()[0].recovery for c, client in self.recoverers.items() if client.recoveries()
        }
        return client_view(
            self.ledgers,
            handle.ledger_id,
            handle.writer,
            recoveries,
            number=self.network.events.number,
            added=self.network.events.added,
            max_entries=self.constants["MaxEntries"],
            recoverers=self.constants["NumRecoverers"],
        )

    def add(self, handle: LedgerHandle, count: int) -> list[Future[int]]:
        first = handle.last_add_pushed + 1
        return [self._step(handle.add_entry(_payload(handle.ledger_id, first + i))) for i in range(count)]

    def wait_explicit_lac(self, handle: LedgerHandle) -> None:
        """Until the writer has sent its LAC on its own and the bookies answered."""
        self.network.run_until(
            lambda: handle.writer.explicit_lac_at == handle.last_add_confirmed and not self.network.unanswered,
            within=_WITHIN,
        )
        self._step(None)

    def close_ledger(self, handle: LedgerHandle) -> None:
        closing = self._step(handle.close())
        self.wait(closing)

    def start_recovery(self, client: int, ledger_id: int) -> RecoveryOpen:
        """Recovering client ``client`` opens the ledger with recovery; the open goes on as the network runs."""
        return self._step(self.recoverers[client].recover_ledger(ledger_id, password=PASSWORD))

    def recover(self, client: int, ledger_id: int) -> None:
        self.wait(self.start_recovery(client, ledger_id).future)

    def wait(self, *futures: Future[Any]) -> None:
        self.network.run_until(lambda: all(f.done() for f in futures), within=_WITHIN)

    def crash(self, n: int) -> None:
        self.bookies.crash(n)
        self.crashed.append(n)
        self.constants["MaxCrashes"] += 1

    def acknowledged(self, futures: Sequence[Future[int]]) -> list[int]:
        return [f.result() for f in futures if f.done() and f.exception() is None]

    def check_read_back(self, ledger_id: int, acknowledged: Sequence[int]) -> None:
        """The closed ledger holds every acknowledged entry, read by a reference reader and by the bookies' own
        client where there is one; a failure of the client API otherwise."""
        reader = self.network.attach(BookKeeperClient(50, self.ledgers, self.network))  # no spec client: no events
        handle = reader.open_ledger(ledger_id, password=PASSWORD)
        last = handle.last_add_confirmed
        self.facts["last_entry"] = last
        if acknowledged and last < max(acknowledged):
            self.failure = f"the ledger was closed at entry {last}, before acknowledged entry {max(acknowledged)}"
            return
        expected = [_payload(ledger_id, e).decode() for e in range(last + 1)]
        read = handle.read(0, last) if last >= 0 else None
        if read is not None:
            self.wait(read)
            got = [p.decode() for p in read.result()]
            if got != expected:
                self.failure = f"the reference reader read {got}, not {expected}"
                return
        other = self.bookies.read_back(ledger_id, last) if last >= 0 else None
        if other is not None:
            self.facts["read_by_bookies_client"] = len(other)
            if other != expected:
                self.failure = f"the bookies' own client read {other}, not {expected}"

    def close(self) -> None:
        self.network.close()
        self.store.close()
        for n in self.crashed:
            self.bookies.restart(n)


def _payload(ledger_id: int, entry_id: int) -> bytes:
    return f"entry {entry_id} of ledger {ledger_id}".encode()


# -- the scenarios ---------------------------------------------------------------------------------
def _write_close_read(run: Run) -> None:
    handle = run.create(3, 2, 2, entries=6)
    adds = run.add(handle, 6)
    run.wait(*adds)
    run.close_ledger(handle)
    run.check_read_back(handle.ledger_id, run.acknowledged(adds))


def _recover_open_ledger(run: Run) -> None:
    handle = run.create(3, 2, 2, entries=5, recoverers=1)
    adds = run.add(handle, 4)
    run.wait(*adds)
    run.recover(1, handle.ledger_id)
    late = run.add(handle, 1)
    run.wait(*late)
    run.facts["late_add"] = type(late[0].exception()).__name__ if late[0].exception() else "acknowledged"
    if late[0].exception() is None:
        run.failure = "the writer's add after the recovery was acknowledged: a fenced writer appended"
        return
    run.check_read_back(handle.ledger_id, run.acknowledged(adds))


def _bookie_crashes_while_writing(run: Run) -> None:
    handle = run.create(3, 3, 2, entries=6)
    first = run.add(handle, 3)
    run.wait(*first)
    run.crash(2)
    rest = run.add(handle, 3)
    run.wait(*rest)
    run.close_ledger(handle)
    run.facts["ensembles"] = [list(s.ensemble) for s in run.ledgers.read(handle.ledger_id).metadata.segments]
    run.check_read_back(handle.ledger_id, run.acknowledged([*first, *rest]))


def _explicit_lac_read_while_open(run: Run) -> None:
    handle = run.create(3, 2, 2, entries=3, explicit_lac=True)
    adds = run.add(handle, 3)  # packaged before any ack: each carries LAC -1
    run.wait(*adds)
    run.wait_explicit_lac(handle)
    # a reader of the open ledger: its LAC comes from the bookies' explicit LAC, which no add carried
    reader = run.network.attach(BookKeeperClient(50, run.ledgers, run.network))  # no spec client: no events
    lac = reader.open_ledger(handle.ledger_id, password=PASSWORD).read_last_add_confirmed()
    run.wait(lac)
    run.facts["lac_read_while_open"] = lac.result()
    if lac.result() != max(run.acknowledged(adds)):
        run.failure = f"a reader of the open ledger learned LAC {lac.result()}, not {max(run.acknowledged(adds))}"
        return
    run.close_ledger(handle)
    run.check_read_back(handle.ledger_id, run.acknowledged(adds))


def _recover_with_bookie_down(run: Run) -> None:
    handle = run.create(3, 3, 2, entries=4, recoverers=1)
    adds = run.add(handle, 4)
    run.wait(*adds)
    run.crash(3)
    run.recover(1, handle.ledger_id)
    run.facts["ensembles"] = [list(s.ensemble) for s in run.ledgers.read(handle.ledger_id).metadata.segments]
    run.check_read_back(handle.ledger_id, run.acknowledged(adds))


@attrs.frozen
class ClientScenario:
    name: str
    summary: str
    run: Callable[[Run], None]
    expects: str | None = None  # no finding: each must conform
    may_show: tuple[str, ...] = ()


CLIENT_SCENARIOS = {
    s.name: s
    for s in (
        ClientScenario(
            "write-close-read", "E=3 Qw=2 Qa=2: six adds, close, read back by both clients", _write_close_read
        ),
        ClientScenario(
            "recover-open-ledger",
            "four adds; a second client recovers the open ledger; the writer's next add is refused",
            _recover_open_ledger,
        ),
        ClientScenario(
            "bookie-crashes-while-writing",
            "E=3 Qw=3 Qa=2: three adds, a bookie of the ensemble killed, three more (an ensemble change), close",
            _bookie_crashes_while_writing,
        ),
        ClientScenario(
            "explicit-lac-read-while-open",
            "E=3 Qw=2 Qa=2, the explicit LAC on: three adds carrying LAC -1; a reader of the open ledger learns LAC 2",
            _explicit_lac_read_while_open,
        ),
        ClientScenario(
            "recover-with-bookie-down",
            "E=3 Qw=3 Qa=2: four adds, a bookie killed; recovery replaces it for its write-back and closes",
            _recover_with_bookie_down,
        ),
    )
}


# -- running them --------------------------------------------------------------------------------------
@contextmanager
def real_bookies(
    directory: Path, jars: JarSet | None = None, status: Callable[[str], None] | None = None
) -> Iterator[RealBookies]:
    """A cluster of :data:`BOOKIES` BookKeeper bookies from the pinned jars, with its harness."""
    with BookKeeperCluster(jars or ensure_jars(status=status), directory, BOOKIES, status=status) as cluster:
        cluster.wait_for_bookies(BOOKIES)
        yield RealBookies(cluster)


@contextmanager
def reference_bookies(directory: Path) -> Iterator[ServedReferenceBookies]:
    """:data:`BOOKIES` reference bookies served over TCP."""
    with ServedBookies(directory, BOOKIES) as served:
        yield ServedReferenceBookies(served)


def record_reference_client(
    names: Sequence[str],
    bookies: ScenarioBookies,
    out: Path,
    *,
    protocol: str = "v3",
    progress: Callable[[ScenarioRecording], None] | None = None,
) -> list[ScenarioRecording]:
    """Run the scenarios ``names`` one after another on ``bookies``, the client speaking ``protocol``; write and
    check each one's trace."""
    unknown = [n for n in names if n not in CLIENT_SCENARIOS]
    if unknown:
        raise KeyError(f"no scenario {', '.join(unknown)}; the scenarios: {', '.join(CLIENT_SCENARIOS)}")
    recordings = []
    for name in names:
        recording = _record_one(CLIENT_SCENARIOS[name], bookies, out / name, protocol)
        recordings.append(recording)
        if progress is not None:
            progress(recording)
    return recordings


def _record_one(
    scenario: ClientScenario, bookies: ScenarioBookies, directory: Path, protocol: str
) -> ScenarioRecording:
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    run = Run(bookies, scenario.name, protocol)
    try:
        scenario.run(run)
    finally:
        run.close()
    seconds = time.monotonic() - started
    assert run.recorder is not None
    # A request given up on at a bookie that did not crash is, for the spec, a message the network lost.
    crashed = {bookies.ids[n - 1] for n in run.crashed}
    run.constants["MaxLoss"] = sum(1 for r in run.network.given_up if r.bookie not in crashed)
    lines = run.recorder.lines
    trace_id = run.recorder.trace_id
    verdict = check_trace(
        events_from_json(lines, str(directory / "trace.ndjson")), LedgerSpec(**run.constants), "client", BOUNDS
    )
    (directory / "trace.ndjson").write_bytes(ndjson(lines))
    write_manifest(
        directory,
        manifest_json(
            spec="ledger",
            mode="client",
            constants={},
            files=["trace.ndjson"],
            traces=[{"trace": trace_id, "constants": run.constants}],
            scenario=scenario.name,
            system="reference-client",
            protocol=protocol,
        ),
    )
    (handle,) = run.writer.writers()
    recording = ScenarioRecording(
        scenario.name,
        scenario.summary,
        directory,
        (LedgerRecording(trace_id, handle.ledger_id, run.constants, len(lines), 0, verdict),),
        run.failure,
        seconds,
    )
    verdict_json = {
        "scenario": scenario.name,
        "summary": scenario.summary,
        "protocol": protocol,
        "status": recording.status,
        "failure": run.failure,
        "facts": run.facts,
        "bookies_crashed": run.crashed,
        "requests_given_up": run.network.timeouts,
        # answers the network handed over later than they came, in the order their bookie served the requests
        "answers_held_back": run.network.held_back,
        "traces": [{"trace": trace_id, "constants": run.constants, "events": len(lines), "verdict": verdict.to_json()}],
    }
    (directory / "verdict.json").write_text(json.dumps(verdict_json, indent=2) + "\n")
    return recording
