"""A run's live state (shared state backend) as named fields, for the admin API and the dashboard.

The state backend keeps a run's counters under internal field names
(`core.requests`, `core.usd`, and each detector's own hashed fields such as
`spiral.w.419d7576`). `live_view` turns them into the documented fields of
`docs/admin-api.md`; detector fields are summarised by detector name only
(their values are hashes and counters that mean nothing outside the detector).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runguard.proxy.core.ops import OpResult
from runguard.proxy.guard import BreakerRecord, breaker

# internal field -> (documented name, type)
_NAMED: dict[str, tuple[str, type]] = {
    "core.requests": ("requests", int),
    "core.started": ("started_at", float),
    "core.seen": ("last_request_at", float),
    "core.usd": ("usd", float),
    "core.in": ("input_tokens", int),
    "core.out": ("output_tokens", int),
    "core.inflight": ("in_flight", int),
    "core.last_in": ("last_input_tokens", int),
}
_WARNING = "core.warned"


def _number(value: OpResult, kind: type) -> int | float:
    try:
        number = float(value) if isinstance(value, (int, float, str)) else 0.0
    except ValueError:
        number = 0.0
    return int(number) if kind is int else round(number, 6)


def breaker_view(record: BreakerRecord | None) -> dict[str, Any]:
    """A breaker record as documented fields; `{"state": "closed"}` when there is none."""
    if record is None:
        return {"state": "closed"}
    return {
        "state": record.state.value,
        "detector": record.detector,
        "reason": record.reason,
        "opened_at": record.opened_at,
        "cooldown_s": record.cooldown,
        "latched": record.latched,  # stays open until reset (a loop, cycle or cap stopped the run)
        "reopens_at": None if record.latched else record.reopens_at(),
        "trips": record.trips,
        "request_index": record.request_index,
    }


def live_view(fields: Mapping[str, OpResult]) -> dict[str, Any] | None:
    """The run's live counters by name (None when the state holds nothing of the run: it ended long
    ago, was reset, or ran on a proxy whose in-memory state this one does not share)."""
    if not any(name != breaker.FIELD for name in fields):
        return None
    live: dict[str, Any] = {name: 0 if kind is int else 0.0 for name, kind in _NAMED.values()}
    for field, (name, kind) in _NAMED.items():
        if field in fields:
            live[name] = _number(fields[field], kind)
    warning = fields.get(_WARNING)
    live["pending_warning"] = warning if isinstance(warning, str) and warning else None
    detectors = {name.partition(".")[0] for name in fields if not name.startswith("core.") and name != breaker.FIELD}
    live["detectors_with_state"] = sorted(detectors)
    return live
