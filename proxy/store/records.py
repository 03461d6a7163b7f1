"""What the proxy records about its traffic: compact, content-free by default.

The guard emits these to a `RecordSink` (the store's queue) off the hot path.
They hold ids, hashes, counts, costs and verdicts, never API keys and never
message content; `RecordedBody` exists only in the opt-in record mode, with
keys and auth headers already removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Protocol

from runguard.proxy.core.frozen import frozen


@frozen
class VerdictRecord:
    detector: str
    action: str  # "block", "nudge" (a note to the model first: see `nudge`) or "warn"
    reason: str


@frozen
class RecordedBody:
    """Opt-in (store.record_bodies): the traffic, for `runguard-proxy replay`."""

    path: str
    query: str
    request: bytes
    response: bytes  # the body, or the raw stream bytes
    status: int | None


@frozen
class RequestRecord:
    """One request through the proxy (forwarded, or answered locally)."""

    run_id: str
    key_hash: str
    index: int  # 1-based position in the run
    at: float  # epoch seconds when the request arrived
    agent: str
    model: str
    provider: str
    api: str
    streamed: bool
    status: int | None  # status the client got; None if the client went away first
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    usage_estimated: bool = False
    usd: float = 0.0
    # The model has no price (`pricing`): its cost is unknown. `usd` is 0.0 (it adds nothing to a spend), the
    # store keeps NULL, and the views say unpriced, never $0.
    unpriced: bool = False
    upstream_ms: float | None = None  # None when nothing went upstream
    overhead_ms: float = 0.0  # time spent in the proxy itself
    tool_calls: tuple[str, ...] = ()  # tool names the response called
    handoff_to: str | None = None
    finish_reason: str | None = None
    blocked_by: str | None = None  # detector that answered this request locally
    error: str | None = None  # upstream failure or client disconnect, as a short code
    verdicts: tuple[VerdictRecord, ...] = ()
    body: RecordedBody | None = None
    # A background response's result, found finished by a poll (`background`): `index` is the request that
    # started it. Its tokens and cost count in the run's totals; it is no request of its own.
    polled: bool = False


@frozen
class TripRecord:
    """A detector verdict that blocked (or would have, in warn mode)."""

    run_id: str
    key_hash: str
    detector: str
    action: str  # "block", "nudge" (a note to the model first: see `nudge`) or "warn"
    reason: str
    scope: str  # whose breaker: run, key, key_model
    request_index: int
    at: float
    usd_so_far: float
    tokens_so_far: int
    usd_avoided_estimate: float
    evidence: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""  # the request's model (a key_model breaker is reset by key and model)
    # The request's model has no price: `usd_so_far` leaves its cost out (an alert says unpriced, never $0).
    unpriced: bool = False


Record = RequestRecord | TripRecord


class RecordSink(Protocol):
    def submit(self, record: Record) -> None:
        """Queue a record; never blocks and never raises (drops and counts when full)."""
        ...
