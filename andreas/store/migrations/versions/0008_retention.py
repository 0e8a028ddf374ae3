"""Retention on the nodes and in the store.

- ``job_attempts.log_tail`` / ``log_saved_s``: the end of a container's log, kept when
  the manager removes the exited container (``[executor] keep_exited_s``), so
  ``andreas logs`` still answers;
- ``ix_job_energy_t``: the retention deletes ``job_energy`` rows by time.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.mysql import MEDIUMTEXT

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


_ATTEMPTS = ("id, job_id, attempt, node_id, gpu_ids, container_id, start_s, end_s, "
             "exit_code, reason, decision_id, gpu_milli, stop_decision_id, "
             "stop_requested_s, profiling")          # the view of 0006


def _my_attempts(columns: str) -> None:
    """MariaDB: the owner's view of attempts (0006) with these columns (it lists them)."""
    if op.get_bind().dialect.name == "sqlite":
        return
    op.execute("CREATE OR REPLACE SQL SECURITY DEFINER VIEW my_job_attempts AS SELECT "
               + ", ".join("a." + c.strip() for c in columns.split(","))
               + " FROM job_attempts a JOIN jobs j ON j.id = a.job_id "
               "WHERE j.owner = SUBSTRING_INDEX(USER(), '@', 1)")


def upgrade() -> None:
    op.add_column("job_attempts", sa.Column("log_tail",
                                            sa.Text().with_variant(MEDIUMTEXT, "mysql"),
                                            nullable=True))
    op.add_column("job_attempts", sa.Column("log_saved_s", sa.Double(), nullable=True))
    op.create_index("ix_job_energy_t", "job_energy", ["t"])
    _my_attempts(_ATTEMPTS + ", log_tail, log_saved_s")   # owners read their kept logs


def downgrade() -> None:
    _my_attempts(_ATTEMPTS)
    op.drop_index("ix_job_energy_t", table_name="job_energy")
    with op.batch_alter_table("job_attempts") as b:
        b.drop_column("log_saved_s")
        b.drop_column("log_tail")
