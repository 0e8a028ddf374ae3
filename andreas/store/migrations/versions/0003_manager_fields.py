"""Manager and profiler fields.

- ``jobs``: ``max_gpus`` (the user's cap on g), ``failures`` (non-zero exits so far; the
  retry limit counts them), ``reason`` (why a job failed or was cancelled),
  ``predicted_cost`` (energy + tardiness cost predicted at submission, for the reports);
- ``job_attempts``: ``decision_id`` (the rescheduling that started the attempt),
  ``stop_decision_id`` and ``stop_requested_s`` (the one that asked it to stop, and when:
  the grace period runs from there);
- ``nodes``: ``profiling`` (reserved for the Job Profiler: no production jobs);
- ``app_models``: the profiler's runtime model per application and GPU type
  (Amdahl: ``epoch_time(g) = t1_s * (serial_fraction + (1 - serial_fraction) / g)``) with
  the fit's error.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

MYSQL = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
         "mysql_collate": "utf8mb4_unicode_ci"}


def upgrade() -> None:
    op.add_column("jobs", sa.Column("max_gpus", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("failures", sa.Integer(), server_default="0",
                                    nullable=False))
    op.add_column("jobs", sa.Column("reason", sa.String(255), nullable=True))
    op.add_column("jobs", sa.Column("predicted_cost", sa.Double(), nullable=True))
    op.add_column("job_attempts", sa.Column("decision_id", sa.Integer(), nullable=True))
    op.add_column("job_attempts", sa.Column("stop_decision_id", sa.Integer(), nullable=True))
    op.add_column("job_attempts", sa.Column("stop_requested_s", sa.Double(), nullable=True))
    op.add_column("nodes", sa.Column("profiling", sa.Boolean(), server_default=sa.false(),
                                     nullable=False))
    op.create_table(
        "app_models",
        sa.Column("application", sa.String(128), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("model", sa.String(16), nullable=False),
        sa.Column("t1_s", sa.Double(), nullable=False),
        sa.Column("serial_fraction", sa.Double(), nullable=False),
        sa.Column("mape", sa.Double(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("gpu_counts", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("updated_s", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("application", "gpu_type", name=op.f("pk_app_models")),
        **MYSQL)


def downgrade() -> None:
    # Alembic's own CLI could call this; `andreas db downgrade` refuses (forward-only).
    op.drop_table("app_models")
    with op.batch_alter_table("nodes") as b:
        b.drop_column("profiling")
    with op.batch_alter_table("job_attempts") as b:
        for column in ("stop_requested_s", "stop_decision_id", "decision_id"):
            b.drop_column(column)
    with op.batch_alter_table("jobs") as b:
        for column in ("predicted_cost", "reason", "failures", "max_gpus"):
            b.drop_column(column)
