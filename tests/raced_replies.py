"""A recovery that races a writer's adds, simulated as the BookKeeper harness would log it.

The writer pipelines adds to ``bookies`` bookies, each entry to ``qw`` of them. A
recovering client fences every bookie, and once ``fenced_by`` fencing replies are in
it reads entries with the fencing flag, one after another, and writes each back.
Each bookie serves requests in the order they reach it, and each client's channel
to a bookie keeps its order. A fencing read fences the bookie; an add of the writer
served after that is refused at once, one served before is acknowledged when the
bookie's journal next syncs (group commit), so that its ack may come long after. The
harness logs sends and replies in the order they happen; the writer sends nothing
after its first refusal, and the mapping keeps that refusal alone.

The lines are those the mapping (``conformance/adapters/bookkeeper.py``) gives
before ``order_by_service``, in the order of the log, each reply with ``x-sent``;
``x-served`` is the time its bookie served it, which the log does not show.
"""

from __future__ import annotations

import heapq
import itertools
import random
from typing import Any

__all__ = ["raced_lines"]


def raced_lines(seed: int, *, entries: int = 40, bookies: int = 3, qw: int = 2, fenced_by: int = 2) -> list[dict]:
    rng = random.Random(seed)
    order = itertools.count()
    queue: list[tuple[float, int, str, dict[str, Any] | None]] = []
    log: list[tuple[float, str, dict[str, Any] | None]] = []
    channel_free: dict[tuple[int, int], float] = {}
    bookie_free = dict.fromkeys(range(1, bookies + 1), 0.0)
    fenced = dict.fromkeys(range(1, bookies + 1), False)
    sync_period = rng.choice([0.2, 1.0, 3.0, 6.0])

    def at(t: float, kind: str, request: dict[str, Any] | None) -> None:
        heapq.heappush(queue, (t, next(order), kind, request))

    def send(t: float, request: dict[str, Any]) -> None:
        log.append((t, "send", request))
        channel = (request["client"], request["bookie"])
        arrives = max(t + rng.expovariate(rng.choice([2.0, 5.0, 20.0])), channel_free.get(channel, 0.0) + 1e-6)
        channel_free[channel] = arrives
        at(arrives, "arrive", request)

    t = 0.0
    for e in range(entries):
        t += rng.expovariate(1.0)
        for i in range(qw):
            at(t + i * 1e-9, "add", {"client": 0, "bookie": (e + i) % bookies + 1, "entry": e, "kind": "add"})
    at(rng.uniform(0, t), "recover", None)
    writer_fenced = False
    fence_replies = 0
    reads = rng.randint(1, 8)
    while queue:
        now, _, kind, request = heapq.heappop(queue)
        if kind == "add" and not writer_fenced:
            assert request is not None
            send(now, request)
        elif kind == "recover":
            log.append((now, "start", None))
            for b in range(1, bookies + 1):
                send(now + b * 1e-9, {"client": 1, "bookie": b, "entry": -1, "kind": "fence"})
        elif kind == "arrive":
            assert request is not None
            b = request["bookie"]
            served = bookie_free[b] = max(now, bookie_free[b]) + rng.expovariate(50.0)
            request["served"] = served
            if request["kind"] in ("fence", "read"):
                fenced[b] = True
                request["result"] = request["kind"]
            elif request["client"] == 0 and fenced[b]:
                request["result"] = "refused"
            else:
                request["result"] = "ack"
                served = (int(served / sync_period) + 1) * sync_period
            at(served + rng.expovariate(5.0), "reply", request)
        elif kind == "reply":
            assert request is not None
            if request["result"] == "refused":
                if not writer_fenced:
                    log.append((now, "reply", request))
                writer_fenced = True
                continue
            log.append((now, "reply", request))
            if request["kind"] == "fence":
                fence_replies += 1
                if fence_replies == fenced_by:
                    send(now, {"client": 1, "bookie": rng.randint(1, bookies), "entry": 0, "kind": "read"})
            elif request["kind"] == "read":
                reads -= 1
                e = request["entry"]
                for i in range(qw):
                    send(now + i * 1e-9, {"client": 1, "bookie": (e + i) % bookies + 1, "entry": e, "kind": "wb"})
                if reads > 0:
                    send(now + 1e-6, {"client": 1, "bookie": rng.randint(1, bookies), "entry": e + 1, "kind": "read"})
    return _lines(sorted(log, key=lambda item: item[0]), bookies)


_ACTIONS = {"fence": "BookieReceivesFenceRead", "read": "BookieReceivesRecoveryRead"}


def _lines(log: list[tuple[float, str, dict[str, Any] | None]], bookies: int) -> list[dict[str, Any]]:
    sent_at = {id(request): n for n, (_, kind, request) in enumerate(log) if kind == "send"}
    lines: list[dict[str, Any]] = []
    for n, (_, kind, request) in enumerate(log):
        if kind == "start":
            lines.append({"process": "recoverer-1", "type": "RecovererStartsRecovery", "params": {"c": 1}, "x-obs": n})
        elif kind == "send" and request is not None and request["client"] == 0:
            if request["bookie"] == request["entry"] % bookies + 1:  # the add's first send
                lines.append({"process": "writer", "type": "WriterAddsEntry", "x-obs": n})
        elif kind == "reply" and request is not None:
            c, b, e = request["client"], request["bookie"], request["entry"]
            if request["kind"] in ("add", "wb"):
                m = {"type": "AddReq", "client": c, "bookie": b, "entry": e, "recovery": c != 0, "fence": False}
                action = "BookieReceivesAdd"
            else:
                m = {"type": "FenceReq" if e == -1 else "ReadReq", "client": c, "bookie": b, "entry": e, "lac": -1}
                m |= {"recovery": False, "fence": True}
                action = _ACTIONS[request["kind"]]
            line = {"process": "writer" if c == 0 else f"recoverer-{c}", "type": action}
            line |= {"params": {"m": m, "replied": True}, "x-obs": n, "x-sent": sent_at[id(request)]}
            if request["result"] == "refused":
                line["observed"] = {"writer_status": "FENCED"}
            line["x-served"] = request["served"]
            lines.append(line)
    for seq, line in enumerate(lines, start=1):
        line["seq"] = seq
    return lines
