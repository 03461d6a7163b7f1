"""Recorded traffic (`store.record_bodies`) as `replay --from-db` and `export` read it: in arrival order, of one
run and/or since a time, streamed (bodies can be large)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import func, select
from sqlalchemy.sql import ColumnElement

from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.models import Body, Request
from runguard.proxy.store.reading import Reading, Row


def _where(run_id: str | None, since: float | None) -> list[ColumnElement[bool]]:
    where = [] if run_id is None else [Body.run_id == stored_run_id(run_id)]
    return where if since is None else [*where, Body.at >= since]


class RecordedReader:
    """The recorded exchanges of the record store (see the module docstring)."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading

    async def count(self, run_id: str | None = None, since: float | None = None) -> int:
        """How many exchanges `exchanges()` would yield (for a progress bar)."""
        return await self._reading.count(select(func.count()).select_from(Body).where(*_where(run_id, since)))

    def exchanges(self, run_id: str | None = None, since: float | None = None) -> AsyncIterator[Row]:
        """Each recorded exchange with its request's key, index, agent, model, cost and outcome."""
        query = (
            select(
                Body.run_id,
                Body.at,
                Body.path,
                Body.query,
                Body.status,
                Body.request,
                Body.response,
                Request.key_hash,
                Request.request_index,
                Request.agent,
                Request.model,
                Request.usd,
                Request.blocked_by,
                Request.error,
            )
            .join(Request, Request.id == Body.request_id)
            .order_by(Body.at, Request.request_index)
        )
        return self._reading.stream(query.where(*_where(run_id, since)))
