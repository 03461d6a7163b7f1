"""The dashboard's memory of ended days: their spend sums no longer change, so each is read once."""

from __future__ import annotations

from typing import Any

DAY = 86400.0


class PastDays:
    """Per-day sums of days that have ended (`store.spend.DayCache`), kept by one dashboard, so only
    today's requests are read again on every page (at 100,000 runs the whole week is most of a page's cost).
    Days older than `KEEP_DAYS` before the newest one put are forgotten, so it stays small.
    """

    KEEP_DAYS = 31

    def __init__(self) -> None:
        self._days: dict[tuple[str, float], list[dict[str, Any]]] = {}

    def get(self, name: str, start: float) -> list[dict[str, Any]] | None:
        return self._days.get((name, start))

    def put(self, name: str, start: float, rows: list[dict[str, Any]]) -> None:
        self._days[(name, start)] = rows
        oldest = start - self.KEEP_DAYS * DAY
        for key in [key for key in self._days if key[1] < oldest]:
            del self._days[key]
