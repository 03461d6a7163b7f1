"""The first schema: runs, run_agents, requests, trips, bodies.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("key_hash", sa.String(), nullable=False),
        sa.Column("first_seen", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.Column("agents", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("usd", sa.Float(), nullable=False),
        sa.Column("trips", sa.Integer(), nullable=False),
        sa.Column("warnings", sa.Integer(), nullable=False),
        sa.Column("usd_avoided", sa.Float(), nullable=False),
        sa.Column("exit_reason", sa.String(), nullable=True),
        sa.Column("exit_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_runs_last_seen", "runs", ["last_seen"])
    op.create_table(
        "run_agents",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("agent", sa.String(), primary_key=True),
        sa.Column("first_seen", sa.Float(), nullable=False),
    )
    op.create_table(
        "requests",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("request_index", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("key_hash", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("provider", sa.String(), nullable=False),
        sa.Column("api", sa.String(), nullable=False),
        sa.Column("streamed", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("reasoning_tokens", sa.Integer(), nullable=False),
        sa.Column("usage_estimated", sa.Boolean(), nullable=False),
        sa.Column("usd", sa.Float(), nullable=False),
        sa.Column("upstream_ms", sa.Float(), nullable=True),
        sa.Column("overhead_ms", sa.Float(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=False),
        sa.Column("handoff_to", sa.String(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("blocked_by", sa.String(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("verdicts", sa.JSON(), nullable=False),
    )
    op.create_index("ix_requests_run", "requests", ["run_id", "request_index"])
    op.create_table(
        "trips",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("key_hash", sa.String(), nullable=False),
        sa.Column("detector", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("request_index", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("usd_so_far", sa.Float(), nullable=False),
        sa.Column("tokens_so_far", sa.BigInteger(), nullable=False),
        sa.Column("usd_avoided", sa.Float(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
    )
    op.create_index("ix_trips_run", "trips", ["run_id", "at"])
    op.create_index("ix_trips_detector", "trips", ["detector"])
    op.create_index("ix_trips_at", "trips", ["at"])
    op.create_table(
        "bodies",
        sa.Column("request_id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("request", sa.LargeBinary(), nullable=False),
        sa.Column("response", sa.LargeBinary(), nullable=False),
    )
    op.create_index("ix_bodies_run_id", "bodies", ["run_id"])


def downgrade() -> None:
    for table in ("bodies", "trips", "requests", "run_agents", "runs"):
        op.drop_table(table)
