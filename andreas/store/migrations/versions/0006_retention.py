"""Retention on the nodes and in the store.

- ``job_attempts.log_tail`` / ``log_saved_s``: the end of a container's log, kept when
  the manager removes the exited container (``[executor] keep_exited_s``), so
  ``andreas logs`` still answers;
- ``ix_job_energy_t``: the retention deletes ``job_energy`` rows by time.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.mysql import MEDIUMTEXT

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_attempts", sa.Column("log_tail",
                                            sa.Text().with_variant(MEDIUMTEXT, "mysql"),
                                            nullable=True))
    op.add_column("job_attempts", sa.Column("log_saved_s", sa.Double(), nullable=True))
    op.create_index("ix_job_energy_t", "job_energy", ["t"])


def downgrade() -> None:
    op.drop_index("ix_job_energy_t", table_name="job_energy")
    with op.batch_alter_table("job_attempts") as b:
        b.drop_column("log_saved_s")
        b.drop_column("log_tail")
