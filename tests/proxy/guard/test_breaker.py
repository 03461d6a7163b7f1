from __future__ import annotations

from runguard.proxy.guard import breaker
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState, GateKind


def _trip(record: BreakerRecord | None, now: float) -> BreakerRecord:
    return breaker.trip(
        record,
        detector="retry_cascade",
        reason="2 failures",
        now=now,
        request_index=3,
        base_cooldown=60,
        max_cooldown=900,
    )


def test_closed_breaker_allows() -> None:
    assert breaker.gate(None, 0.0, 120).kind is GateKind.ALLOW


def test_open_breaker_denies_until_cooldown_then_offers_one_probe() -> None:
    record = _trip(None, 1000.0)
    assert record.state is BreakerState.OPEN and record.cooldown == 60
    assert breaker.gate(record, 1059.9, 120).kind is GateKind.DENY
    probe = breaker.gate(record, 1060.0, 120)
    assert probe.kind is GateKind.PROBE
    assert probe.candidate is not None and probe.candidate.state is BreakerState.HALF_OPEN
    # While the probe is out, everyone else is denied...
    assert breaker.gate(probe.candidate, 1061.0, 120).kind is GateKind.DENY
    # ...until the probe times out, when a new probe may go.
    assert breaker.gate(probe.candidate, 1060.0 + 120, 120).kind is GateKind.PROBE


def test_cooldown_doubles_per_retrip_and_is_capped() -> None:
    record = None
    cooldowns = []
    for i in range(7):
        record = _trip(record, float(i))
        cooldowns.append(record.cooldown)
    assert cooldowns == [60, 120, 240, 480, 900, 900, 900]


def test_record_round_trips_and_garbage_reads_as_closed() -> None:
    record = _trip(None, 5.0)
    assert BreakerRecord.loads(record.dumps()) == record
    assert BreakerRecord.loads("not json") is None
    assert BreakerRecord.loads(None) is None
    assert BreakerRecord.loads('{"state": "weird"}') is None


def test_a_latched_breaker_never_offers_a_probe_and_reads_back_latched() -> None:
    record = breaker.trip(
        None,
        detector="spiral",
        reason="r",
        now=1000.0,
        request_index=3,
        base_cooldown=60,
        max_cooldown=900,
        latched=True,
    )
    assert breaker.gate(record, 1000.0 + 10**6, 120).kind is GateKind.DENY
    again = BreakerRecord.loads(record.dumps())
    assert again is not None and again.latched
    older = BreakerRecord.loads(
        '{"state":"open","opened_at":1.0,"cooldown":60.0,"trips":1,"detector":"d","reason":"r"}'
    )
    assert older is not None and not older.latched  # a record written before latching: it keeps its cooldown
