"""What MariaDB enforces for people and agents, tightened (``store/procedures.py``):

- ``andreas_submit`` checks exactly the CLI's rules (``andreas/jobspec.py``) in linear
  time: no id or image ending in a newline, no NUL in a command or environment value,
  no repeated variable, the CLI's bounds on epochs, weight and grace, bounded sizes;
- owners are compared byte for byte in ``my_jobs``, ``my_job_attempts`` and
  ``andreas_cancel`` (the collation ignores case: ``Alice`` saw ``alice``'s jobs);
- table ``agent_accounts`` (every database account that is a node agent, and its node;
  NULL: the fleet's shared account) and the function and triggers that keep an agent
  to its own node, to attempts that ran there, to energy its hardware can draw and to
  moving its node between ``up`` and ``down``.

Creating functions and triggers on a server with binary logging needs SUPER or
``log_bin_trust_function_creators = 1`` (as 0006).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import context, op

from andreas.store import procedures

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _mariadb() -> bool:
    return op.get_bind().dialect.name != "sqlite"


def _execute(sql: str) -> None:
    if context.is_offline_mode():
        op.get_context().impl.static_output(sql)
    else:
        op.get_bind().exec_driver_sql(sql.replace("%", "%%"))    # the driver's paramstyle


def upgrade() -> None:
    op.create_table(
        "agent_accounts",
        sa.Column("login", sa.String(80), nullable=False),
        sa.Column("node", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("login", name=op.f("pk_agent_accounts")),
        mysql_engine="InnoDB", mysql_charset="utf8mb4", mysql_collate="utf8mb4_unicode_ci")
    if _mariadb():
        procedures.recreate(_execute, procedures.objects(),
                            offline=context.is_offline_mode())


def downgrade() -> None:
    if _mariadb():
        for statement in procedures.drop_statements(procedures.agent_triggers()):
            _execute(statement + (";" if context.is_offline_mode() else ""))
        old = importlib.import_module("andreas.store.migrations.versions.0006_job_owner")
        procedures.recreate(_execute, list(old.OBJECTS), offline=context.is_offline_mode())
        logs = importlib.import_module("andreas.store.migrations.versions.0008_retention")
        logs._my_attempts(logs._ATTEMPTS + ", log_tail, log_saved_s")     # 0008's view
    op.drop_table("agent_accounts")
