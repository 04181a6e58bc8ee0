"""A Hypothesis state machine that drives the engine and checks, step by step, that it refines the ledger spec.

Each rule takes one step of a :class:`~.simulation.LedgerSimulation` (or
several, for a read): adds, closes, deliveries with the reply kept or lost,
lost requests, bookie crashes and restarts, timeouts (ensemble changes and
resends), recoveries by other clients racing the writer, their closes, the
explicit LAC, and reads. After every engine step the
:class:`~.refinement.RefinementCheck` compares the abstraction of the
engine's state with the spec's successor by the action the step logged (a
step that logs nothing must be a stutter) and checks the spec's invariants.
The machine's own invariants check what the application sees: adds complete
in entry order, and a reader reads, up to the LAC, what the writer wrote.

Bundles hold the ids: bookies that are up and down, recovering clients that
have not started, entries added. Requests are drawn from those in flight at
the time of the rule. Every rule notes what it did, so a shrunk failure
reads as a scenario.

``machine_for(config)`` makes the machine for one configuration; the
model tests run it (``model_tests/``) with the settings that fit the suite.
"""

from __future__ import annotations

from typing import Any

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from ledgerspec.reference.ledger.protocol import Request
from ledgerspec.reference.ledger.refinement import RefinementCheck
from ledgerspec.reference.ledger.simulation import LedgerSimulation, SimulationConfig, Step, StepKind
from ledgerspec.reference.ledger.writer import WriterStatus

__all__ = ["LedgerMachine", "machine_for"]

MAX_READ_STEPS = 200  # engine steps a read may take before the rule gives up on it


class LedgerMachine(RuleBasedStateMachine):
    """The engine on an in-process cluster, checked against the ledger spec after every step."""

    config = SimulationConfig()

    up_bookies = Bundle("up_bookies")
    down_bookies = Bundle("down_bookies")
    idle_recoverers = Bundle("idle_recoverers")
    entries = Bundle("entries")

    def __init__(self) -> None:
        super().__init__()
        self.sim = LedgerSimulation(self.config)
        self.check = RefinementCheck(self.sim).attach()
        self.steps = 0

    def teardown(self) -> None:
        self.sim.close()

    # -- ids ---------------------------------------------------------------------------
    @initialize(target=up_bookies)
    def bookies(self) -> Any:
        return multiple(*self.sim.cluster.nodes)

    @initialize(target=idle_recoverers)
    def recovering_clients(self) -> Any:
        return multiple(*self.sim.recovering_clients)

    def _take(self, step: Step) -> None:
        note(f"  {step}")
        events = self.sim.take(step)
        self.steps += 1
        note("    -> " + (", ".join(str(e) for e in events) if events else "no spec step"))

    # -- the writer --------------------------------------------------------------------
    @precondition(lambda self: self.sim.can_add())
    @rule(target=entries)
    def add_entry(self) -> int:
        self._take(Step(StepKind.ADD))
        return self.sim.handle.last_add_pushed

    # The writer closes once it has added two entries or more: closing earlier would end most runs early.
    @precondition(lambda self: self.sim.handle.writer.can_close() and self.sim.handle.last_add_pushed >= 1)
    @rule()
    def close_ledger(self) -> None:
        self._take(Step(StepKind.CLOSE))

    # -- bookies and the network -------------------------------------------------------
    @precondition(lambda self: bool(self.sim.cluster.deliverable()))
    @rule(data=st.data(), count=st.integers(1, 4))
    def deliver(self, data: st.DataObject, count: int) -> None:
        """Up to ``count`` requests, one engine step each: a bookie serves it, the reply arrives or is lost."""
        for _ in range(count):
            deliverable = self.sim.cluster.deliverable()
            if not deliverable:
                return
            request = _draw(data, deliverable)
            can_lose = self.sim.cluster.lost < self.config.max_loss
            lose_reply = can_lose and data.draw(st.booleans(), label="lose_reply")
            self._take(Step(StepKind.DELIVER, request, lose_reply=lose_reply))

    @precondition(lambda self: self.sim.cluster.lost < self.config.max_loss and bool(self.sim.cluster.in_flight))
    @rule(data=st.data())
    def lose_request(self, data: st.DataObject) -> None:
        request = _draw(data, self.sim.cluster.in_flight)
        self._take(Step(StepKind.LOSE, request))

    @precondition(lambda self: self.sim.cluster.crashes < self.config.max_crashes)
    @rule(target=down_bookies, bookie=consumes(up_bookies), data=st.data())
    def crash_bookie(self, bookie: str, data: st.DataObject) -> str:
        """The bookie loses power: between two requests, or with an add journaled and not yet fsynced."""
        node = self.sim.cluster.nodes[bookie]
        adds = [r for r in self.sim.cluster.deliverable() if r.bookie == bookie and node.journals_add(r)]
        names = ["between requests", *(f"before the fsync of {r!r}" for r in adds)]
        choice = names.index(data.draw(st.sampled_from(names), label="crash"))
        if choice:
            self._take(Step(StepKind.CRASH_BEFORE_FSYNC, adds[choice - 1]))
        else:
            self._take(Step(StepKind.CRASH, bookie=bookie))
        return bookie

    @rule(target=up_bookies, bookie=consumes(down_bookies))
    def restart_bookie(self, bookie: str) -> str:
        self._take(Step(StepKind.RESTART, bookie=bookie))
        return bookie

    @precondition(lambda self: bool(self.sim.cluster.timeouts()))
    @rule(data=st.data())
    def time_out(self, data: st.DataObject) -> None:
        request = _draw(data, self.sim.cluster.timeouts())
        self._take(Step(StepKind.TIMEOUT, request))

    # -- other clients -----------------------------------------------------------------
    @rule(client=consumes(idle_recoverers))
    def recover(self, client: int) -> None:
        self._take(Step(StepKind.RECOVER, client=client))

    @precondition(lambda self: any(c.local_steps() for c in self.sim.cluster.clients.values()))
    @rule(data=st.data())
    def local_step(self, data: st.DataObject) -> None:
        steps = [s for c in self.sim.cluster.clients.values() for s in c.local_steps()]
        self._take(Step(StepKind.LOCAL, local=data.draw(st.sampled_from(steps), label="local step")))

    @rule()
    def read_last_add_confirmed(self) -> None:
        """A reader reads the LAC: no bookie knows a LAC past the writer's, or past the end of a closed ledger."""
        sim = self.sim
        handle = sim.reader_client.open_ledger(sim.ledger_id, password=b"ledgerspec")
        lac = handle.read_last_add_confirmed()
        self._pump_reader(lac.done)
        if not lac.done():
            note("  read LAC: could not be read (bookies down)")
            return
        closed = handle.metadata.closed
        limit = handle.metadata.last_entry_id if closed else sim.handle.last_add_confirmed
        note(f"  read LAC: {lac.result()} ({'closed at' if closed else 'writer LAC'} {limit})")
        assert lac.result() <= limit, f"a reader read LAC {lac.result()}, past {limit}"

    @rule(entry=entries)
    def read(self, entry: int) -> None:
        """A reader reads the LAC and, if ``entry`` is at most it, reads the entry: it must be what was added."""
        sim = self.sim
        handle = sim.reader_client.open_ledger(sim.ledger_id, password=b"ledgerspec")
        lac = handle.read_last_add_confirmed()
        self._pump_reader(lac.done)
        if not lac.done():
            note(f"  read: the LAC could not be read (bookies down); entry {entry} not read")
            return
        if entry > lac.result():
            note(f"  read: LAC {lac.result()}, entry {entry} is not readable yet")
            return
        payloads = handle.read(entry, entry)
        self._pump_reader(payloads.done)
        if not payloads.done() or payloads.exception() is not None:
            note(f"  read: entry {entry} <= LAC {lac.result()} could not be read now")
            return
        note(f"  read: entry {entry} <= LAC {lac.result()} read back")
        assert payloads.result() == [sim.payloads[entry]], (
            f"entry {entry} <= LAC {lac.result()} read as {payloads.result()!r}, added as {sim.payloads[entry]!r}"
        )

    def _pump_reader(self, done: Any) -> None:
        """Deliver the reader's requests (and its timeouts) until ``done()``, each an engine step."""
        reader = self.sim.reader_client.client_id
        for _ in range(MAX_READ_STEPS):
            if done():
                return
            ready = [r for r in self.sim.cluster.deliverable() if r.client == reader]
            if ready:
                self.sim.take(Step(StepKind.DELIVER, ready[0]))
                continue
            stuck = [r for r in self.sim.cluster.timeouts() if r.client == reader]
            if not stuck:
                return
            self.sim.take(Step(StepKind.TIMEOUT, stuck[0]))

    # -- what the application sees -----------------------------------------------------
    @invariant()
    def adds_complete_in_entry_order(self) -> None:
        acknowledged = self.sim.acknowledged
        assert acknowledged == list(range(len(acknowledged))), f"adds completed in the order {acknowledged}"
        assert len(acknowledged) == self.sim.handle.last_add_confirmed + 1 or (
            self.sim.handle.status is not WriterStatus.WRITING
        )

    @invariant()
    def reads_agree(self) -> None:
        assert not self.sim.read_problems, self.sim.read_problems


def _draw(data: st.DataObject, requests: list[Request]) -> Request:
    """One of the requests, drawn by its short form, so that a failing example prints readably."""
    names = [repr(r) for r in requests]
    return requests[names.index(data.draw(st.sampled_from(names), label="request"))]


def machine_for(config: SimulationConfig, name: str = "LedgerMachine") -> type[LedgerMachine]:
    """The machine for one configuration (a subclass with ``config`` set)."""
    return type(name, (LedgerMachine,), {"config": config})
