"""The circuit breaker: a pure transition function over a small record.

States and the only legal transitions:

    CLOSED    --trip-->              OPEN       (a blocking verdict)
    OPEN      --cooldown elapsed-->  HALF_OPEN  (exactly one probe request is admitted)
    HALF_OPEN --probe succeeded-->   CLOSED     (the record is deleted)
    HALF_OPEN --probe failed-->      OPEN       (cooldown doubles, up to the cap)
    HALF_OPEN --probe timed out-->   HALF_OPEN  (a new probe may be admitted)
    any       --manual reset-->      CLOSED

A *latched* record (a run stopped for a loop, a cycle or a cap) never reaches
HALF_OPEN: it stays OPEN until the manual reset, or until the run's state is
forgotten. Cooldowns and probes are for upstream failures, which heal by
themselves; a looping agent let back in after a cooldown loops again.

A CLOSED breaker has no record. The record is stored as one JSON string field
per scope (run, key, key+model) through the state backend; admitting the probe
is a compare-and-set on that field, so only one replica ever sends it.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum

import orjson

from runguard.proxy.core.frozen import frozen

FIELD = "breaker"


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@frozen
class BreakerRecord:
    state: BreakerState
    opened_at: float
    cooldown: float
    trips: int
    detector: str
    reason: str
    request_index: int = 0
    probe_at: float = 0.0
    latched: bool = False  # stays OPEN until reset (no cooldown, no probe)

    def dumps(self) -> str:
        return orjson.dumps(dataclasses.asdict(self)).decode()

    @classmethod
    def loads(cls, raw: object) -> BreakerRecord | None:
        """The record in a stored value; None for absent or unreadable values (fail open)."""
        if not isinstance(raw, str):
            return None
        try:
            data = orjson.loads(raw)
            data["state"] = BreakerState(data["state"])
            return cls(**data)
        except (orjson.JSONDecodeError, TypeError, KeyError, ValueError):
            return None

    def reopens_at(self) -> float:
        return self.opened_at + self.cooldown


class GateKind(StrEnum):
    ALLOW = "allow"  # closed: forward
    DENY = "deny"  # open, or another request is the probe: answer locally
    PROBE = "probe"  # cooldown over: try to become the single probe


@frozen
class Gate:
    kind: GateKind
    record: BreakerRecord | None = None
    candidate: BreakerRecord | None = None  # PROBE: the HALF_OPEN record to compare-and-set


def gate(record: BreakerRecord | None, now: float, probe_timeout: float) -> Gate:
    """What a request may do given the breaker record."""
    if record is None or record.state is BreakerState.CLOSED:
        return Gate(GateKind.ALLOW)
    if record.state is BreakerState.OPEN and (record.latched or now < record.reopens_at()):
        return Gate(GateKind.DENY, record)
    if record.state is BreakerState.HALF_OPEN and now - record.probe_at < probe_timeout:
        return Gate(GateKind.DENY, record)
    probing = dataclasses.replace(record, state=BreakerState.HALF_OPEN, probe_at=now)
    return Gate(GateKind.PROBE, record, probing)


def trip(
    record: BreakerRecord | None,
    *,
    detector: str,
    reason: str,
    now: float,
    request_index: int,
    base_cooldown: float,
    max_cooldown: float,
    latched: bool = False,
) -> BreakerRecord:
    """Open the breaker; each re-trip before a successful probe doubles the cooldown.

    `latched`: it stays open until reset, whatever the cooldown says (a run stopped for a loop).
    """
    trips = record.trips + 1 if record is not None else 1
    cooldown = min(base_cooldown * 2 ** (trips - 1), max_cooldown)
    return BreakerRecord(BreakerState.OPEN, now, cooldown, trips, detector, reason, request_index, latched=latched)
