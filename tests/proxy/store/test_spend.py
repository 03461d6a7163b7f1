"""SpendReader on SQLite and PostgreSQL: spend per day by key and model, per key, today; ended days cached."""

from __future__ import annotations

import pytest

from runguard.proxy.admin.ui.past_days import PastDays
from runguard.proxy.store import StoreReader
from runguard.proxy.store.spend import DAY, day_start
from tests.proxy.store import factory, readers
from tests.proxy.store.conftest import SinkFactory

T0 = factory.T0


def test_a_day_starts_at_midnight_utc() -> None:
    assert day_start(T0) == T0 - T0 % DAY and day_start(day_start(T0)) == day_start(T0)


async def test_spend_by_day_and_keys(make_sink: SinkFactory) -> None:
    reader = await readers.many(make_sink)
    starts, rows = await reader.spend.by_day(7, "key_hash")
    today = len(starts) - 1
    by = {(row["day"], row["group"]): row["usd"] for row in rows}
    assert by[(today, "kh-b")] == pytest.approx(24 * 0.001) and by[(today, "kh-a")] == pytest.approx(96 * 0.001)
    assert by[(today - 1, "kh-a")] == pytest.approx(0.25)
    keys = await reader.spend.keys(7)
    assert [key["key_hash"] for key in keys] == ["kh-a", "kh-b"] and keys[0]["requests"] == 97
    assert await reader.spend.today(["kh-a"]) == {"kh-a": pytest.approx(0.096)}
    assert await reader.spend.today([]) == {}


async def test_ended_days_are_read_once_and_today_every_time(make_sink: SinkFactory) -> None:
    """With a day cache, a record that arrives late for a day that has ended is not read again (it is past
    the settling time), while today's sums stay live."""
    reader = await readers.many(make_sink)
    cache = PastDays()
    first = await reader.spend.by_day(7, "model", cache)
    assert first == await reader.spend.by_day(7, "model")  # the same figures as without a cache
    sink = make_sink()
    sink.submit(factory.request("late", 1, at=T0 - 2 * DAY, usd=5.0, model="gpt-4o", tool_calls=()))
    sink.submit(factory.request("now", 1, at=T0 + 150, usd=1.0, model="gpt-4o", tool_calls=()))
    await sink.flush()
    starts, rows = await reader.spend.by_day(7, "model", cache)
    by = {(row["day"], row["group"]): row["usd"] for row in rows}
    assert (len(starts) - 3, "gpt-4o") not in by  # the ended day came from the cache
    assert by[(len(starts) - 1, "gpt-4o")] == pytest.approx(60 * 0.001 + 1.0)  # today is read again


async def test_unpriced_requests_are_counted_apart_from_the_spend(make_sink: SinkFactory) -> None:
    sink = make_sink()
    sink.submit(factory.request("a", 1, at=T0, usd=0.5, key_hash="kh-a"))
    sink.submit(factory.request("a", 2, at=T0 + 1, model="acme-coder-9", unpriced=True, key_hash="kh-a"))
    await sink.flush()
    spend = StoreReader.on(sink.engine, clock=lambda: T0 + 10).spend
    _, rows = await spend.by_day(1, "model")
    assert {row["group"]: (row["usd"], row["n"], row["unpriced"]) for row in rows} == {
        "gpt-4o-mini": (pytest.approx(0.5), 1, 0),
        "acme-coder-9": (0.0, 1, 1),
    }
    (key,) = await spend.keys(1)
    assert (key["usd"], key["requests"], key["unpriced"]) == (pytest.approx(0.5), 2, 1)
    assert await spend.today(["kh-a"]) == {"kh-a": pytest.approx(0.5)}
