"""GPU power limits (issue 30): what the plan chose, what a node can do, what was in force.

- ``job_attempts.power_limit_w``: the limit the manager planned for the attempt's GPUs
  (NULL: the default); the reconciler updates it when a plan changes a running job's
  level, and the node's agent applies it (it reads the column with the fence's);
- ``nodes.power_caps``: what the node's agent found at start (JSON: ``{"settable": true,
  "min_w", "max_w", "default_w"}`` or ``{"settable": false, "why"}``), which the manager
  plans with; the agent may update this column of its node row;
- ``power_samples.power_limit_w``: the limit in force when the sample was taken;
- ``app_levels``: the Job Profiler's power levels of an application on a GPU type (per
  limit: epoch time factor and GPU power, measured or fitted).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_attempts", sa.Column("power_limit_w", sa.Double(), nullable=True))
    op.add_column("nodes", sa.Column("power_caps", sa.JSON(), nullable=True))
    op.add_column("power_samples", sa.Column("power_limit_w", sa.Float(), nullable=True))
    op.create_table(
        "app_levels",
        sa.Column("application", sa.String(128), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("limit_w", sa.Double(), nullable=False),
        sa.Column("time_factor", sa.Double(), nullable=False),
        sa.Column("gpu_power_w", sa.Double(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("updated_s", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("application", "gpu_type", "limit_w",
                                name=op.f("pk_app_levels")),
        mysql_engine="InnoDB", mysql_charset="utf8mb4", mysql_collate="utf8mb4_unicode_ci")


def downgrade() -> None:
    op.drop_table("app_levels")
    op.drop_column("power_samples", "power_limit_w")
    op.drop_column("nodes", "power_caps")
    op.drop_column("job_attempts", "power_limit_w")
