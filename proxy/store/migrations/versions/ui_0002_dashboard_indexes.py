"""Indexes the dashboard's paged queries use (at 100,000 runs each page stays a range read).

- runs by key and by outcome, newest first: the runs list filtered by key or status;
- trips by detector with their run: the runs list filtered by detector, read from the index alone;
- requests by time with key, model and cost: spend per day by key and by model, read from the index alone.

Revision ID: ui_0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "ui_0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_runs_key_last_seen", "runs", ["key_hash", "last_seen"])
    op.create_index("ix_runs_exit_last_seen", "runs", ["exit_reason", "last_seen"])
    op.create_index("ix_trips_detector_run", "trips", ["detector", "run_id"])
    op.create_index("ix_requests_at_spend", "requests", ["at", "key_hash", "model", "usd"])


def downgrade() -> None:
    op.drop_index("ix_requests_at_spend", "requests")
    op.drop_index("ix_trips_detector_run", "trips")
    op.drop_index("ix_runs_exit_last_seen", "runs")
    op.drop_index("ix_runs_key_last_seen", "runs")
