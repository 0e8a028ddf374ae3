"""Automatic profiling: a job state ``profiling`` and profiling attempts.

- ``jobs.state``: the value ``profiling`` (the job runs a few epochs per GPU count on a
  profiling node before the optimizer plans it); the CHECK constraint is recreated;
- ``job_attempts.profiling``: the attempt is such a run (its first epoch is warm-up).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from andreas.store.migrations.sqlite import rebuild

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_OLD = ("queued", "running", "preempting", "preempted", "completed", "failed", "cancelled")
_NEW = ("queued", "running", "preempting", "preempted", "profiling", "completed", "failed",
        "cancelled")


def _check(values: tuple[str, ...]) -> str:
    return "state IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _states(values: tuple[str, ...]) -> None:
    """The CHECK constraint of jobs.state allowing ``values`` (SQLite: the table is
    rebuilt, :func:`andreas.store.migrations.sqlite.rebuild`; MariaDB: the named
    constraint is dropped and added again)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        rebuild(bind, "jobs", _check(_OLD if values == _NEW else _NEW), _check(values))
        return
    op.drop_constraint(op.f("ck_jobs_job_state"), "jobs", type_="check")
    op.create_check_constraint(op.f("ck_jobs_job_state"), "jobs", _check(values))


def upgrade() -> None:
    _states(_NEW)
    op.add_column("job_attempts", sa.Column("profiling", sa.Boolean(),
                                            server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("job_attempts") as b:
        b.drop_column("profiling")
    _states(_OLD)
