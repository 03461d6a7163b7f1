"""Resets: every manual reset of a run or a key, so a rebuild of the state from the records does not
bring back a breaker the operator released.

- `resets`: one row per reset (admin API, CLI, dashboard): what was reset (`scope`: run, key,
  key_model), whose (`target`: the run id, the key hash, or key hash|model), when (`at`);
- read by time at start (only the resets within the rebuild's windows): an index on `at`.

Revision ID: restarts_0003
Revises: ui_0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "restarts_0003"
down_revision: str | None = "ui_0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "resets",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("tenant", sa.String(), nullable=True),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_index("ix_resets_at", "resets", ["at"])


def downgrade() -> None:
    op.drop_index("ix_resets_at", "resets")
    op.drop_table("resets")
