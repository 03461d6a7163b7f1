"""Trips and warnings as their readers see them: the newest (of one run), pages of them, sums per detector.

A trip's cost avoided is counted as every view counts it (`costs`): a warning
avoids nothing, also when an older version stored an estimate for it. Pages
read trips newest first through the index on `trips.at`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, distinct, func, select
from sqlalchemy.sql import ColumnElement

from runguard.proxy.store import costs
from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.models import Trip
from runguard.proxy.store.reading import PER_PAGE, Page, Reading, Row

TRIP_COLUMNS = (
    "run_id",
    "detector",
    "action",
    "reason",
    "scope",
    "request_index",
    "at",
    "usd_so_far",
    "tokens_so_far",
    "usd_avoided",
    "evidence",
)
COUNTED_AVOIDED = case((Trip.action == costs.BLOCK, Trip.usd_avoided), else_=0.0)


def trip_columns() -> list[ColumnElement[Any]]:
    """The trip columns every trip listing reads, `usd_avoided` as counted."""
    return [COUNTED_AVOIDED.label(name) if name == "usd_avoided" else getattr(Trip, name) for name in TRIP_COLUMNS]


class TripReader:
    """The trips of the record store (see the module docstring)."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading

    async def recent(self, limit: int = 50, run_id: str | None = None) -> list[Row]:
        """Trips and warnings, newest first; of one run when `run_id` is given."""
        query = select(*trip_columns()).order_by(Trip.at.desc()).limit(limit)
        if run_id is not None:
            query = query.where(Trip.run_id == stored_run_id(run_id))
        (rows,) = await self._reading.read(query)
        return rows

    async def page(self, detector: str | None = None, page: int = 1, per_page: int = PER_PAGE) -> Page:
        """One page of trips and warnings, newest first (optionally of one detector)."""
        query = select(*trip_columns(), Trip.key_hash).order_by(Trip.at.desc()).offset((page - 1) * per_page)
        if detector:
            query = query.where(Trip.detector == detector)
        (rows,) = await self._reading.read(query.limit(per_page + 1))
        return Page(rows[:per_page], page, len(rows) > per_page)

    async def by_detector(self, since: float | None = None) -> list[Row]:
        """Per detector: blocking trips, warnings, runs affected, estimated USD avoided, last trip."""
        blocked = func.sum(case((Trip.action == costs.BLOCK, 1), else_=0))
        query = (
            select(
                Trip.detector,
                blocked.label("trips"),
                func.sum(case((Trip.action == costs.BLOCK, 0), else_=1)).label("warnings"),
                func.count(distinct(Trip.run_id)).label("runs"),
                func.sum(COUNTED_AVOIDED).label("usd_avoided"),
                func.max(Trip.at).label("last_at"),
            )
            .group_by(Trip.detector)
            .order_by(blocked.desc(), Trip.detector)
        )
        if since is not None:
            query = query.where(Trip.at >= since)
        (rows,) = await self._reading.read(query)
        for row in rows:
            row["trips"], row["warnings"] = int(row["trips"] or 0), int(row["warnings"] or 0)
            row["usd_avoided"] = float(row["usd_avoided"] or 0.0)
        return rows
