"""Ended days' sums, read once per dashboard: kept by name and day, and forgotten once they are more than a
month older than the newest day put, so the memory stays small however long the proxy runs."""

from __future__ import annotations

from runguard.proxy.admin.ui.past_days import DAY, PastDays

ROWS = [{"group": "k_a", "usd": 1.5}]


def test_a_day_put_is_given_back_by_name_and_start() -> None:
    past = PastDays()
    past.put("spend:key_hash", 10 * DAY, ROWS)
    assert past.get("spend:key_hash", 10 * DAY) == ROWS
    assert past.get("spend:model", 10 * DAY) is None
    assert past.get("spend:key_hash", 11 * DAY) is None


def test_days_older_than_a_month_before_the_newest_are_forgotten() -> None:
    past = PastDays()
    for day in range(100):
        past.put("spend", day * DAY, ROWS)
    kept = [day for day in range(100) if past.get("spend", day * DAY) is not None]
    assert kept == list(range(99 - PastDays.KEEP_DAYS, 100))
