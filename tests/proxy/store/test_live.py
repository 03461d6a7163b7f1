"""What `read_live` reads back from the records: only what is live, and nothing a reset released."""

from __future__ import annotations

import pytest

from runguard.proxy.store import make_engine, parse
from runguard.proxy.store.live import Live, RecordsUnavailable, day_start, read_live
from runguard.proxy.store.resets import ResetLog
from tests.proxy.store.conftest import SinkFactory
from tests.proxy.store.factory import request, trip

NOW = day_start(1_800_000_000.0)[1] + 12 * 3600.0  # noon UTC
IDLE = 3600.0


async def _live(url: str, now: float = NOW) -> Live:
    engine = make_engine(parse(url))
    try:
        return await read_live(engine, now, idle_seconds=IDLE, breaker_seconds=900.0)
    finally:
        await engine.dispose()


async def test_a_keys_spend_is_todays_and_runs_are_the_live_ones(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink()
    sink.submit(request("yesterday", 1, key_hash="k_a", at=NOW - 13 * 3600.0, usd=5.0))  # before midnight
    sink.submit(request("morning", 1, key_hash="k_a", at=NOW - 3 * 3600.0, usd=0.25))  # today, idle since
    sink.submit(request("live", 1, key_hash="k_a", at=NOW - 60.0, usd=0.5, input_tokens=70, output_tokens=7))
    sink.submit(request("live", 2, key_hash="k_a", at=NOW - 30.0, usd=0.5, input_tokens=30, output_tokens=3))
    sink.submit(request("other", 1, key_hash="k_b", at=NOW - 10.0, usd=0.125))
    await sink.flush()
    live = await _live(store_url)
    assert live.key_day_usd == {"k_a": pytest.approx(1.25), "k_b": pytest.approx(0.125)}
    runs = {run.run_id: run for run in live.runs}
    assert set(runs) == {"live", "other"}  # `morning` is idle past the idle time, `yesterday` too
    assert (runs["live"].requests, runs["live"].usd, runs["live"].input_tokens, runs["live"].output_tokens) == (
        2,
        pytest.approx(1.0),
        100,
        10,
    )
    assert (runs["live"].first_seen, runs["live"].last_seen) == (NOW - 60.0, NOW - 30.0)


async def test_trips_of_live_runs_and_keys_after_their_last_reset(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink()
    for run_id in ("stopped", "released", "forgotten"):
        at = NOW - (2 * IDLE if run_id == "forgotten" else 100.0)
        sink.submit(request(run_id, 1, key_hash="k_a", at=at))
        sink.submit(trip(run_id, "max_requests", key_hash="k_a", request_index=1, at=at + 1))
    sink.submit(trip("stopped", "non_progress", action="warn", key_hash="k_a", at=NOW - 50.0))  # not blocking
    sink.submit(request("failing", 2, key_hash="k_f", model="gpt-4o", at=NOW - 20.0))
    for at in (NOW - 40.0, NOW - 20.0):
        sink.submit(trip("failing", "retry_cascade", key_hash="k_f", scope="key_model", request_index=2, at=at))
    sink.submit(trip("spender", "budget", key_hash="k_s", scope="key", at=NOW - 5.0))
    sink.submit(trip("spender-2", "budget", key_hash="k_r", scope="key", at=NOW - 5.0))
    await sink.flush()
    engine = make_engine(parse(store_url))
    resets = ResetLog(engine, clock=lambda: NOW - 2.0)
    await resets.record("run", "released", "k_a")
    await resets.record("key", "k_r")
    await engine.dispose()
    live = await _live(store_url)
    found = {(t.scope, t.target): t for t in live.trips}
    assert set(found) == {("run", "stopped"), ("key_model", "k_f|gpt-4o"), ("key", "k_s")}
    assert found[("run", "stopped")].detector == "max_requests"
    assert found[("key_model", "k_f|gpt-4o")].count == 2  # its cooldown doubles as the breaker's did
    assert live.resets == 2
    # The released run had no request since its reset: nothing of it is live.
    assert "released" not in {run.run_id for run in live.runs}


async def test_a_reset_runs_counters_start_from_its_reset(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink()
    for index in (1, 2, 3):
        sink.submit(request("reset-run", index, key_hash="k_a", at=NOW - 100.0 + index, usd=0.25))
    await sink.flush()
    engine = make_engine(parse(store_url))
    await ResetLog(engine, clock=lambda: NOW - 97.5).record("run", "reset-run")  # after requests 1 and 2
    await engine.dispose()
    (run,) = (await _live(store_url)).runs
    assert (run.requests, run.usd, run.first_seen) == (1, pytest.approx(0.25), NOW - 97.0)


async def test_a_store_that_does_not_answer_is_said_so() -> None:
    engine = make_engine(parse("postgresql+asyncpg://nobody@127.0.0.1:1/none"))
    try:
        with pytest.raises(RecordsUnavailable):
            await read_live(engine, NOW, idle_seconds=IDLE, breaker_seconds=900.0)
    finally:
        await engine.dispose()


async def test_a_run_stopped_before_the_window_and_refused_since_keeps_its_stop(
    make_sink: SinkFactory, store_url: str
) -> None:
    """A latched stop two hours old, and the run's agent refused every few minutes since: the refusals keep the
    run live and write no trip of their own, so the stop is read back however old it is. A run whose last record
    is no stop is read as before (its old trips are not)."""
    sink = make_sink()
    long_ago = NOW - 2 * IDLE
    for run_id in ("still-refused", "recovered"):
        sink.submit(request(run_id, 1, key_hash="k_a", at=long_ago))
        sink.submit(trip(run_id, "non_progress", key_hash="k_a", request_index=1, at=long_ago + 1))
    sink.submit(request("still-refused", 2, key_hash="k_a", at=NOW - 60.0, blocked_by="non_progress"))
    sink.submit(request("recovered", 2, key_hash="k_a", at=NOW - 60.0))  # reset by hand, say, and working again
    await sink.flush()
    live = await _live(store_url)
    assert {run.run_id for run in live.runs} == {"still-refused", "recovered"}
    (kept,) = live.trips
    assert (kept.target, kept.detector, kept.at) == ("still-refused", "non_progress", long_ago + 1)
