"""GPU sharing: a job may ask for a share of one GPU.

- ``jobs``: ``gpu_milli`` (1-999 milli-GPU of one GPU; NULL: whole GPUs, elastic) and
  ``gpu_memory_mib`` (the GPU memory it needs; NULL: not declared);
- ``job_attempts``: ``gpu_milli`` (the share the attempt holds on its GPU; NULL: whole
  GPUs), so the manager counts a GPU's free share from the attempts alone.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("gpu_milli", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("gpu_memory_mib", sa.Integer(), nullable=True))
    op.add_column("job_attempts", sa.Column("gpu_milli", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("job_attempts", "gpu_milli")
    op.drop_column("jobs", "gpu_memory_mib")
    op.drop_column("jobs", "gpu_milli")
