"""What of the records is live, as plain values (no SQLAlchemy): the runs seen within the idle time, each key's
spend today, the blocking trips a rebuild keeps (`live.read_live` reads them, `guard.records.rebuild` writes
them back to the state)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runguard.proxy.core.errors import RunGuardError


class RecordsUnavailable(RunGuardError):
    """The record store did not answer (down, unreachable, or its schema not there yet)."""


@dataclass(slots=True)
class LiveRun:
    """A run seen within the idle time, with its counters (since its last reset, if it had one)."""

    run_id: str
    key_hash: str
    first_seen: float
    last_seen: float
    requests: int
    usd: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class LiveTrip:
    """A blocking trip after the last reset of what it tripped: `target` is the run id, the key hash or
    key hash|model (`scope`: run, thread, key, key_day, key_model); `count`: such trips in the window."""

    scope: str
    target: str
    run_id: str
    key_hash: str
    detector: str
    reason: str
    request_index: int
    at: float
    count: int = 1


@dataclass(slots=True)
class Live:
    day: str  # the UTC day of `key_day_usd`, YYYY-MM-DD
    key_day_usd: dict[str, float] = field(default_factory=dict)
    runs: list[LiveRun] = field(default_factory=list)
    trips: list[LiveTrip] = field(default_factory=list)
    resets: int = 0
