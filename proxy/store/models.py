"""The record store's tables (SQLAlchemy 2 typed declarative).

Times are epoch seconds (double precision) as the proxy records them: the
same value on SQLite and PostgreSQL, no time-zone conversions in between.

Three tables carry what the issue asks for, two support them:
- `runs`: one row per run, upserted with increments (ON CONFLICT), so any
  number of replicas can add to the same run without a read-modify-write race.
- `requests`, `trips`: one row per record. The primary key is an id the writer
  generates (replica prefix + counter), not (run_id, index): two replicas with
  in-memory state may both number a request 1 of the same run, and a failed
  batch that is retried must not insert twice (ON CONFLICT DO NOTHING on the id).
- `run_agents`: the agents seen in a run, one row each; a run's `agents` count
  grows only for rows that were really inserted.
- `bodies`: recorded traffic (opt-in `store.record_bodies`), for `replay`.

No foreign keys: rows of one batch are written in whatever order keeps lock
order stable, and a request may be recorded before its run row exists.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


# The amounts of a run that add up over its records: each batch's upsert adds them (`batch.ADDED_UP`, with
# the agents' count), and the readers read them as the run's totals (`runs`).
RUN_TOTALS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "usd",
    "unpriced",
    "trips",
    "warnings",
    "usd_avoided",
)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_key_last_seen", "key_hash", "last_seen"),
        Index("ix_runs_exit_last_seen", "exit_reason", "last_seen"),
    )

    run_id: Mapped[str] = mapped_column(String, primary_key=True)
    key_hash: Mapped[str] = mapped_column(String)
    first_seen: Mapped[float] = mapped_column(Float)
    last_seen: Mapped[float] = mapped_column(Float, index=True)
    agents: Mapped[int] = mapped_column(Integer, default=0)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    usd: Mapped[float] = mapped_column(Float, default=0.0)  # of its priced requests
    unpriced: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # requests with no price
    trips: Mapped[int] = mapped_column(Integer, default=0)  # blocking verdicts
    warnings: Mapped[int] = mapped_column(Integer, default=0)
    usd_avoided: Mapped[float] = mapped_column(Float, default=0.0)
    # completed / tripped:<detector> / error; NULL while the last request left tool calls open
    # (the reader shows such a run as running, or idle once runs.idle_seconds have passed).
    exit_reason: Mapped[str | None] = mapped_column(String)
    exit_at: Mapped[float | None] = mapped_column(Float)  # when the record that set exit_reason happened


class RunAgent(Base):
    __tablename__ = "run_agents"

    run_id: Mapped[str] = mapped_column(String, primary_key=True)
    agent: Mapped[str] = mapped_column(String, primary_key=True)
    first_seen: Mapped[float] = mapped_column(Float)


class Request(Base):
    __tablename__ = "requests"
    __table_args__ = (
        Index("ix_requests_run", "run_id", "request_index"),
        Index("ix_requests_at_spend", "at", "key_hash", "model", "usd"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    run_id: Mapped[str] = mapped_column(String)
    request_index: Mapped[int] = mapped_column(Integer)
    at: Mapped[float] = mapped_column(Float)
    key_hash: Mapped[str] = mapped_column(String)
    agent: Mapped[str] = mapped_column(String)
    model: Mapped[str] = mapped_column(String)
    provider: Mapped[str] = mapped_column(String)
    api: Mapped[str] = mapped_column(String)
    streamed: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[int | None] = mapped_column(Integer)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cached_tokens: Mapped[int] = mapped_column(Integer)
    reasoning_tokens: Mapped[int] = mapped_column(Integer)
    usage_estimated: Mapped[bool] = mapped_column(Boolean)
    usd: Mapped[float | None] = mapped_column(Float)  # NULL: the model has no price (unpriced)
    upstream_ms: Mapped[float | None] = mapped_column(Float)
    overhead_ms: Mapped[float] = mapped_column(Float)
    tool_calls: Mapped[list[str]] = mapped_column(JSON)
    handoff_to: Mapped[str | None] = mapped_column(String)
    finish_reason: Mapped[str | None] = mapped_column(String)
    blocked_by: Mapped[str | None] = mapped_column(String)
    error: Mapped[str | None] = mapped_column(String)
    verdicts: Mapped[list[dict[str, str]]] = mapped_column(JSON)


class Trip(Base):
    __tablename__ = "trips"
    __table_args__ = (
        Index("ix_trips_run", "run_id", "at"),
        Index("ix_trips_detector", "detector"),
        Index("ix_trips_detector_run", "detector", "run_id"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    run_id: Mapped[str] = mapped_column(String)
    key_hash: Mapped[str] = mapped_column(String)
    detector: Mapped[str] = mapped_column(String)
    action: Mapped[str] = mapped_column(String)
    reason: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String)
    request_index: Mapped[int] = mapped_column(Integer)
    at: Mapped[float] = mapped_column(Float, index=True)
    usd_so_far: Mapped[float] = mapped_column(Float)
    tokens_so_far: Mapped[int] = mapped_column(BigInteger)
    usd_avoided: Mapped[float] = mapped_column(Float)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)


class Reset(Base):
    """A manual reset of a run's or a key's breaker (see `resets`): a rebuild skips what came before it."""

    __tablename__ = "resets"

    id: Mapped[str] = mapped_column(String, primary_key=True)
    scope: Mapped[str] = mapped_column(String)  # run, key, key_model
    target: Mapped[str] = mapped_column(String)  # the run id, the key hash, or key hash|model
    tenant: Mapped[str | None] = mapped_column(String)
    at: Mapped[float] = mapped_column(Float, index=True)


class Body(Base):
    __tablename__ = "bodies"

    request_id: Mapped[str] = mapped_column(String, primary_key=True)
    run_id: Mapped[str] = mapped_column(String, index=True)
    at: Mapped[float] = mapped_column(Float)
    path: Mapped[str] = mapped_column(Text)
    query: Mapped[str] = mapped_column(Text)
    status: Mapped[int | None] = mapped_column(Integer)
    request: Mapped[bytes] = mapped_column(LargeBinary)
    response: Mapped[bytes] = mapped_column(LargeBinary)
