"""``andreas_submit`` takes the GPUs-per-job bound of ``andreas/limits.py`` (1 024, as
snapshots and the CLI; the procedure took 4 096): the procedures, views and triggers of
``store/procedures.py`` are created again from the code. No table changes.

Downgrade leaves them as they are: 0013's procedure came from the same code, and the
tighter bound is the CLI's anyway.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import context, op

from andreas.store import procedures

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def _execute(sql: str) -> None:
    if context.is_offline_mode():
        op.get_context().impl.static_output(sql)
    else:
        op.get_bind().exec_driver_sql(sql.replace("%", "%%"))    # the driver's paramstyle


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        procedures.recreate(_execute, procedures.objects(),
                            offline=context.is_offline_mode())


def downgrade() -> None:
    pass
