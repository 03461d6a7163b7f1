"""The guard's own counters: the ops that open and close every request's batches.

Every request's first batch starts with `request_ops` (count the request, note
when the run began, count it in flight, read spend and the breakers) and its
results become `RunFacts`. After the response, `response_ops` adds its usage
and cost and releases the in-flight slot; a request that never got a response
still runs `release_ops`. Fields live under `core.` in each scope, apart from
the breaker records (`breaker.FIELD`).

Warnings found after a response has gone to the client (its headers were
sent) wait in the run's state (`carry_ops`); the run's next request takes
them (in `request_ops`), and its response shows them. So does a nudge's note
(`nudge_ops`), which the next request carries to the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from runguard.detectors.support import RunFacts
from runguard.proxy.core.events import Usage
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.ops import Add, Get, Op, OpResult, Push, Put, PutNX, Scope
from runguard.proxy.guard import breaker, ending
from runguard.proxy.guard.breaker import BreakerRecord


@frozen
class Breakers:
    """The breaker records of the three scopes a request belongs to."""

    run: BreakerRecord | None
    key: BreakerRecord | None
    key_model: BreakerRecord | None

    def of(self, scope: Scope) -> BreakerRecord | None:
        return self.key if scope is Scope.KEY_DAY else getattr(self, scope, None)


def _num(value: OpResult) -> float:
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return 0.0


# Ops that are the same for every request, built once (ops are immutable). Their order is
# the order `facts_from` reads the results in.
_COUNT = Add(Scope.RUN, "core.requests", 1)
_TOTALS_AND_IN_FLIGHT = (
    Get(Scope.RUN, "core.usd"),
    Get(Scope.RUN, "core.in"),
    Get(Scope.RUN, "core.out"),
    Add(Scope.RUN, "core.inflight", 1),
    Get(Scope.KEY_DAY, "core.usd"),
    Get(Scope.RUN, "core.last_in"),
)
_BREAKERS = (
    Get(Scope.RUN, breaker.FIELD),
    Get(Scope.KEY, breaker.FIELD),
    Get(Scope.KEY_MODEL, breaker.FIELD),
)
_RELEASE = Add(Scope.RUN, "core.inflight", -1)
# What in-memory state must keep until it is idle, never drop for room (`state.bounds`): a breaker
# (open, latched, probing) wherever it is, and a key's spend of the day.
HELD_FIELDS = {
    Scope.RUN: (breaker.FIELD,),
    Scope.THREAD: (breaker.FIELD,),
    Scope.KEY: (breaker.FIELD,),
    Scope.KEY_MODEL: (breaker.FIELD,),
    Scope.KEY_DAY: ("core.usd",),
}
_CARRIED = "core.warned"
_TAKE_CARRIED = Put(Scope.RUN, _CARRIED, None)  # its result: what was waiting
_NUDGED = "core.nudged"  # the detectors that nudged the run (`nudge`): the next time they fire, they block
_GET_NUDGED = Get(Scope.RUN, _NUDGED)
_NOTE = "core.note"  # a nudge found after a response, for the run's next request to carry
_TAKE_NOTE = Put(Scope.RUN, _NOTE, None)


def request_ops(now: float, body_hash: str) -> list[Op]:
    return [
        _COUNT,
        PutNX(Scope.RUN, "core.started", repr(now)),
        *_TOTALS_AND_IN_FLIGHT,
        Push(Scope.RUN, "core.body", (body_hash,), keep=2),
        *_BREAKERS,
        _TAKE_CARRIED,
        _GET_NUDGED,
        _TAKE_NOTE,
        *ending.READS,
    ]


REQUEST_OPS = len(request_ops(0.0, ""))
ENDING_AT = REQUEST_OPS - len(ending.READS)  # where the pending-end mark's results are (`ending`)


def refresh_ops() -> list[tuple[int, Op]]:
    """What an end changes, as (index in `request_ops`, op reading it again): the run's totals, the key's
    spend, the breakers (read again by a request that waited for its run's pending end)."""
    totals = [(2 + i, op) for i, op in enumerate(_TOTALS_AND_IN_FLIGHT) if isinstance(op, Get)]
    return [*totals, *((9 + i, op) for i, op in enumerate(_BREAKERS))]


def facts_from(results: Sequence[OpResult]) -> tuple[RunFacts, Breakers]:
    """Read the results of `request_ops` (the first REQUEST_OPS results of the batch)."""
    bodies = results[8]
    duplicate = isinstance(bodies, tuple) and len(bodies) == 2 and bodies[0] == bodies[1]
    facts = RunFacts(
        request_index=int(_num(results[0])),
        started_at=_num(results[1]),
        usd=_num(results[2]),
        input_tokens=int(_num(results[3])),
        output_tokens=int(_num(results[4])),
        in_flight=int(_num(results[5])),
        key_day_usd=_num(results[6]),
        last_input_tokens=int(_num(results[7])),
        duplicate=duplicate,
    )
    breakers = Breakers(
        BreakerRecord.loads(results[9]), BreakerRecord.loads(results[10]), BreakerRecord.loads(results[11])
    )
    return facts, breakers


def seen_op(now: float) -> Op:
    """Note the time of the run's request; its result is the time of the one before (for runs found by
    their root, which start over after an idle time: `roots`)."""
    return Put(Scope.RUN, "core.seen", repr(now))


def last_seen_from(result: OpResult) -> float:
    """When the run's previous request came (epoch seconds; 0 for its first), from `seen_op`'s result."""
    return _num(result)


def carried_from(results: Sequence[OpResult]) -> str | None:
    """The warnings an earlier response of the run left for this request's answer (from `request_ops`)."""
    carried = results[12]
    return carried if isinstance(carried, str) and carried else None


def carry_ops(warnings: str) -> list[Op]:
    """Leave `warnings` for the run's next answer (replacing any still waiting)."""
    return [Put(Scope.RUN, _CARRIED, warnings)]


def nudged_from(results: Sequence[OpResult]) -> frozenset[str]:
    """The detectors that have nudged the run already (from `request_ops`)."""
    nudged = results[13]
    return frozenset(nudged) if isinstance(nudged, tuple) else frozenset()


def note_from(results: Sequence[OpResult]) -> str | None:
    """A nudge's note an earlier response of the run left for this request to carry (from `request_ops`)."""
    note = results[14]
    return note if isinstance(note, str) and note else None


def nudge_ops(detectors: Sequence[str], note: str | None) -> list[Op]:
    """Remember that `detectors` nudged the run; `note`: leave it for the run's next request."""
    ops: list[Op] = [Push(Scope.RUN, _NUDGED, tuple(detectors), keep=64, unique=True)]
    if note is not None:
        ops.append(Put(Scope.RUN, _NOTE, note))
    return ops


def release_ops() -> list[Op]:
    return [_RELEASE]


# What a request knows of its run when its state step failed (the guard failed open): nothing. No
# detector is run with it; the response's usage is still counted (`usage_ops`) and recorded.
UNKNOWN_FACTS = RunFacts(
    request_index=0, started_at=0.0, usd=0.0, input_tokens=0, output_tokens=0, in_flight=0, key_day_usd=0.0
)


def usage_ops(usage: Usage | None, usd: float) -> list[Op]:
    """Add a response's usage and cost to its run and to its key's day (nothing without usage)."""
    if usage is None:
        return []
    ops: list[Op] = [
        Add(Scope.RUN, "core.usd", usd),
        Add(Scope.RUN, "core.in", usage.input_tokens),
        Add(Scope.RUN, "core.out", usage.output_tokens),
        Add(Scope.KEY_DAY, "core.usd", usd),
    ]
    if usage.input_tokens:
        ops.append(Put(Scope.RUN, "core.last_in", str(usage.input_tokens)))
    return ops


def response_ops(usage: Usage | None, usd: float) -> list[Op]:
    """Release a response's in-flight slot, and add its usage and cost."""
    return [_RELEASE, *usage_ops(usage, usd)]
