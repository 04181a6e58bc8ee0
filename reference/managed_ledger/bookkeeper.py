"""The BookKeeper calls a managed ledger makes, each run to its end on the reference ledger engine.

Pulsar's ``ManagedLedgerImpl`` and ``ManagedCursorImpl`` call BookKeeper
asynchronously and go on in the callbacks. The reference managed ledger is
synchronous instead: :class:`BookKeeperLedgers` sends each call through a
:class:`~ledgerspec.reference.ledger.BookKeeperClient` and drives the
in-process cluster (:meth:`~ledgerspec.reference.ledger.InProcessCluster.run_until`)
until it completes. Each call is one step of the managed ledger; what happens
between the bookies during it is the ledger spec's business and is checked
there.

==========================  ===================================================
call                        BookKeeper
==========================  ===================================================
``create()``                ``asyncCreateLedger``: a new ledger id from the
                            metadata store, an ensemble, the metadata
``append(handle, data)``    ``asyncAddEntry``: the entry id once Qa bookies
                            acknowledged
``close(handle)``           ``asyncClose``
``open_recovered(id)``      ``asyncOpenLedger`` (with recovery): fence, recover
                            the last entries, close; the handle to read
``open_closed(id)``         ``asyncOpenLedgerNoRecovery`` of a closed ledger
``read(handle, a, b)``      ``asyncReadEntries``
``delete(id)``              ``asyncDeleteLedger``: the metadata goes; the
                            bookies' garbage collection is left out
==========================  ===================================================

:class:`BookKeeperFaults` makes chosen calls fail as BookKeeper fails them,
for tests: a creation with too few writable bookies
(``BKNotEnoughBookiesException``), an add that cannot reach its quorum.
Losing a ledger (its metadata gone, every open failing with
``BKNoSuchLedgerExistsException``) is :meth:`BookKeeperLedgers.lose`.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from ledgerspec.reference.ledger import (
    BookKeeperClient,
    ClientConfig,
    InProcessCluster,
    LedgerClientError,
    LedgerHandle,
    OrderedPlacement,
    ReadHandle,
)
from ledgerspec.reference.metadata import ANY_VERSION, LedgerMetadataStore, NoSuchLedgerError

__all__ = ["BookKeeperError", "BookKeeperFaults", "BookKeeperLedgers", "NoSuchLedgerError"]


class BookKeeperError(Exception):
    """A BookKeeper call failed: the message says which call, on which ledger, and why."""


@attrs.define
class BookKeeperFaults:
    """Calls to fail on purpose: the next ``creates`` creations, the next ``appends`` adds and the next
    ``first_appends`` adds of a new ledger's first entry, of the ledgers of one ``kind`` (``"cursor"``: cursor
    ledgers; ``"data"``: the topic's ledgers)."""

    kind: str = "cursor"
    creates: int = 0
    appends: int = 0
    first_appends: int = 0
    failed: int = 0  # calls failed on purpose so far

    def take(self, call: str, kind: str) -> bool:
        left = getattr(self, call)
        if kind == self.kind and left > 0:
            setattr(self, call, left - 1)
            self.failed += 1
            return True
        return False


@attrs.frozen
class LedgerConfig:
    """The ensemble of new ledgers (Pulsar's managedLedgerDefaultEnsembleSize, ...WriteQuorum, ...AckQuorum)."""

    ensemble_size: int = 2
    write_quorum: int = 2
    ack_quorum: int = 2


class BookKeeperLedgers:
    """One broker's BookKeeper client on an in-process cluster; every call completes before it returns."""

    def __init__(
        self,
        cluster: InProcessCluster,
        ledgers: LedgerMetadataStore,
        *,
        client_id: int = 100,
        config: LedgerConfig | None = None,
        faults: BookKeeperFaults | None = None,
        password: bytes = b"",
        on_create: Callable[[int], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.ledgers = ledgers
        self.config = config or LedgerConfig()
        self.faults = faults or BookKeeperFaults()
        self.password = password
        self.on_create = on_create  # told the id of every ledger created
        self.client = cluster.attach(
            BookKeeperClient(
                client_id, ledgers, cluster, config=ClientConfig(explicit_lac=False), placement=OrderedPlacement()
            )
        )

    def create(self, kind: str = "data") -> LedgerHandle:
        """A new ledger; ``kind`` (``"data"`` or ``"cursor"``) only tells the faults which calls to fail."""
        if self.faults.take("creates", kind):
            raise BookKeeperError("creating a ledger failed: not enough writable bookies (injected)")
        c = self.config
        try:
            handle = self.client.create_ledger(c.ensemble_size, c.write_quorum, c.ack_quorum, password=self.password)
        except LedgerClientError as e:
            raise BookKeeperError(f"creating a ledger failed: {e}") from e
        if self.on_create is not None:
            self.on_create(handle.ledger_id)
        return handle

    def append(self, handle: LedgerHandle, data: bytes, kind: str = "data", *, call: str = "appends") -> int:
        """Add ``data``; ``call`` names the faults that may fail it (``appends``, or ``first_appends`` for a new
        ledger's first entry)."""
        if not self.exists(handle.ledger_id):
            raise BookKeeperError(f"adding to ledger {handle.ledger_id} failed: the ledger no longer exists")
        if self.faults.take(call, kind):
            raise BookKeeperError(f"adding to ledger {handle.ledger_id} failed: no ack quorum (injected)")
        future = handle.add_entry(data)
        self._run(future.done, f"adding to ledger {handle.ledger_id}")
        try:
            return future.result()
        except LedgerClientError as e:
            raise BookKeeperError(f"adding to ledger {handle.ledger_id} failed: {e}") from e

    def close(self, handle: LedgerHandle) -> None:
        try:
            future = handle.close()
        except NoSuchLedgerError as e:  # deleted under this handle (by a broker that took the topic over)
            raise BookKeeperError(f"closing ledger {handle.ledger_id} failed: {e}") from e
        self._run(future.done, f"closing ledger {handle.ledger_id}")
        try:
            future.result()
        except LedgerClientError as e:
            raise BookKeeperError(f"closing ledger {handle.ledger_id} failed: {e}") from e

    def open_recovered(self, ledger_id: int) -> ReadHandle:
        """Open with recovery; :class:`NoSuchLedgerError` when the ledger is gone."""
        recovery = self.client.recover_ledger(ledger_id, password=self.password)
        self._run(recovery.future.done, f"recovering ledger {ledger_id}")
        try:
            return recovery.future.result()
        except LedgerClientError as e:
            raise BookKeeperError(f"recovering ledger {ledger_id} failed: {e}") from e

    def open_closed(self, ledger_id: int) -> ReadHandle:
        """Open a closed ledger without recovery (``asyncOpenLedgerNoRecovery``), to read it."""
        try:
            return self.client.open_ledger(ledger_id, password=self.password)
        except LedgerClientError as e:
            raise BookKeeperError(f"opening ledger {ledger_id} failed: {e}") from e

    def read(self, handle: ReadHandle, first: int, last: int) -> list[bytes]:
        future = handle.read(first, last)
        self._run(future.done, f"reading entries {first}..{last} of ledger {handle.ledger_id}")
        try:
            return future.result()
        except LedgerClientError as e:
            raise BookKeeperError(f"reading entries {first}..{last} of ledger {handle.ledger_id} failed: {e}") from e

    def delete(self, ledger_id: int) -> None:
        """Delete the ledger's metadata; a ledger already gone is fine (Pulsar ignores NoSuchLedger here)."""
        self.ledgers.delete(ledger_id, ANY_VERSION)

    def exists(self, ledger_id: int) -> bool:
        try:
            self.ledgers.read(ledger_id)
        except NoSuchLedgerError:
            return False
        return True

    def lose(self, ledger_id: int) -> None:
        """The ledger becomes unreadable: its metadata is gone, as after a lost ZooKeeper node or a bad delete."""
        self.ledgers.delete(ledger_id, ANY_VERSION)

    def _run(self, done: Callable[[], bool], what: str) -> None:
        try:
            self.cluster.run_until(done)
        except LedgerClientError as e:
            raise BookKeeperError(f"{what}: {e}") from e
