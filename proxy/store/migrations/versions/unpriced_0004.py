"""Unpriced requests: a request to a model no price table knows keeps a NULL cost, and each run counts them.

- `requests.usd` may be NULL: the model has no price, so its cost is unknown (never $0, never another
  model's price);
- `runs.unpriced`: how many of the run's requests are unpriced (added up as the other totals), so a run's
  spend reads "$x + unpriced" without reading its requests.

Records written before this revision stored an unpriced request's cost as 0.0. A request that used tokens
and cost exactly 0.0 can only be unpriced or priced at zero (a free model in an upstream's own table); it is
taken as unpriced, the same as the views said of it: its cost becomes NULL and its run counts it.

Revision ID: unpriced_0004
Revises: restarts_0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "unpriced_0004"
down_revision: str | None = "restarts_0003"
branch_labels: str | None = None
depends_on: str | None = None

# A request that used tokens and was priced at 0.0: recorded before unpriced requests kept NULL.
_UNPRICED = "usd = 0 AND (input_tokens > 0 OR output_tokens > 0)"


def upgrade() -> None:
    with op.batch_alter_table("requests") as requests:
        requests.alter_column("usd", existing_type=sa.Float(), nullable=True)
    op.add_column("runs", sa.Column("unpriced", sa.Integer(), nullable=False, server_default="0"))
    op.execute(f"UPDATE requests SET usd = NULL WHERE {_UNPRICED}")
    op.execute(
        "UPDATE runs SET unpriced = (SELECT count(*) FROM requests"
        " WHERE requests.run_id = runs.run_id AND requests.usd IS NULL)"
        " WHERE run_id IN (SELECT run_id FROM requests WHERE usd IS NULL)"
    )


def downgrade() -> None:
    op.execute("UPDATE requests SET usd = 0 WHERE usd IS NULL")
    op.drop_column("runs", "unpriced")
    with op.batch_alter_table("requests") as requests:
        requests.alter_column("usd", existing_type=sa.Float(), nullable=False)
