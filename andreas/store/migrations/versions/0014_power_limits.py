"""GPU power limits (issue 30): what the plan chose, what a node can do, what was in force.

- ``job_attempts.power_limit_w``: the limit the manager planned for the attempt's GPUs
  (NULL: the default); the reconciler updates it when a plan changes a running job's
  level, and the node's agent applies it (it reads the column with the fence's);
- ``nodes.power_caps``: what the node's agent found at start (JSON: ``{"settable": true,
  "min_w", "max_w", "default_w"}`` or ``{"settable": false, "why"}``), which the manager
  plans with; the agent may update this column of its node row;
- ``power_samples.power_limit_w``: the limit in force when the sample was taken.

Revision ID: 0014
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_attempts", sa.Column("power_limit_w", sa.Double(), nullable=True))
    op.add_column("nodes", sa.Column("power_caps", sa.JSON(), nullable=True))
    op.add_column("power_samples", sa.Column("power_limit_w", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("power_samples", "power_limit_w")
    op.drop_column("nodes", "power_caps")
    op.drop_column("job_attempts", "power_limit_w")
