"""Spend as its readers see it: per UTC day (by key or model), per key over the last days, per key today.

The sums read the requests of the last days through the index on
`requests.at` (with key, model and cost in it). The sums of days that have
ended can be kept between reads (`DayCache`); today's are read every time.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import case, func, select

from runguard.proxy.store.models import Request
from runguard.proxy.store.reading import Reading, Row

DAY = 86400.0
SETTLE = 300.0  # seconds after midnight UTC when a day has ended for `DayCache` (records arrive within seconds)


def day_start(at: float) -> float:
    """The start of the UTC day `at` falls in (the day a key's daily budget counts)."""
    return at - at % DAY


class DayCache(Protocol):
    """Where the sums of ended days are kept between pages (`runguard.proxy.admin.ui.past_days.PastDays`)."""

    def get(self, name: str, start: float) -> list[Row] | None: ...

    def put(self, name: str, start: float, rows: list[Row]) -> None: ...


class SpendReader:
    """The spend the record store holds (see the module docstring)."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading

    def _days(self, days: int) -> list[float]:
        today = day_start(self._reading.now())
        return [today - DAY * back for back in range(days - 1, -1, -1)]

    async def _by_day(self, starts: list[float], groups: list[str], past: DayCache | None) -> list[Row]:
        """Spend and requests per (day index into `starts`, *groups) since `starts[0]`; ended days from `past`."""
        now = self._reading.now()
        name = ",".join(groups)
        ended = [i for i, start in enumerate(starts) if past is not None and start + DAY + SETTLE <= now]
        kept = {i: past.get(name, starts[i]) for i in ended} if past is not None else {}
        read_from = next((i for i in range(len(starts)) if kept.get(i) is None), len(starts))
        rows: list[Row] = [row for i in range(read_from) for row in kept[i] or ()]
        if read_from < len(starts):
            bounds = list(enumerate(starts))[read_from:]
            day = case(*((Request.at >= start, index) for index, start in reversed(bounds)), else_=read_from)
            columns = [getattr(Request, group) for group in groups]
            query = (
                select(
                    day.label("day"),
                    *columns,
                    func.sum(Request.usd).label("usd"),
                    func.count().label("n"),
                    (func.count() - func.count(Request.usd)).label("unpriced"),  # NULL cost: unpriced
                )
                .where(Request.at >= starts[read_from])
                .group_by(day, *columns)
            )
            (fresh,) = await self._reading.read(query)
            for row in fresh:
                row["usd"], row["unpriced"] = float(row["usd"] or 0.0), int(row["unpriced"])
            rows += fresh
            if past is not None:
                for i in ended:
                    if i >= read_from:
                        past.put(name, starts[i], [row for row in fresh if row["day"] == i])
        return rows

    async def by_day(self, days: int, by: str, past: DayCache | None = None) -> tuple[list[float], list[Row]]:
        """Spend per UTC day over the last `days` days (today included), grouped by `by` ("key_hash" or "model").

        Returns the days' starts (oldest first) and rows of (day index into them, `group`: the `by` value, usd of
        the priced requests, requests `n`, `unpriced` requests). The day is a CASE over the days' bounds, the same
        on SQLite and PostgreSQL.
        """
        starts = self._days(days)
        rows = await self._by_day(starts, [by], past)
        return starts, [
            {"day": row["day"], "group": row[by], "usd": row["usd"], "n": row["n"], "unpriced": row["unpriced"]}
            for row in rows
        ]

    async def keys(self, days: int, past: DayCache | None = None) -> list[Row]:
        """The keys that made requests in the last `days` UTC days: spend, requests (`unpriced`: those with no price)
        and models, most spend first."""
        found: dict[str, Row] = {}
        for row in await self._by_day(self._days(days), ["key_hash", "model"], past):
            key = found.setdefault(
                row["key_hash"], {"key_hash": row["key_hash"], "usd": 0.0, "requests": 0, "unpriced": 0, "models": []}
            )
            key["usd"] += row["usd"]
            key["requests"] += int(row["n"])
            key["unpriced"] += row["unpriced"]
            if row["model"] not in key["models"]:
                key["models"].append(row["model"])
        return sorted(found.values(), key=lambda key: (-key["usd"], key["key_hash"]))

    async def today(self, key_hashes: list[str]) -> dict[str, float]:
        """Each key's spend since the start of this UTC day (of its priced requests: what a budget counts)."""
        if not key_hashes:
            return {}
        query = (
            select(Request.key_hash, func.sum(Request.usd).label("usd"))
            .where(Request.at >= day_start(self._reading.now()), Request.key_hash.in_(key_hashes))
            .group_by(Request.key_hash)
        )
        (rows,) = await self._reading.read(query)
        return {row["key_hash"]: float(row["usd"] or 0.0) for row in rows}
