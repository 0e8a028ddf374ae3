"""A MariaDB database created as README shows (``CHARACTER SET utf8mb4``, no collation)
works, and people's own accounts can list the nodes.

- The database's default collation becomes the tables' own (``utf8mb4_unicode_ci``), and
  every stored procedure is created again from its own text, so its parameters and
  variables take that collation. Before, a database whose default was the server's
  (``utf8mb4_general_ci`` for ``CHARACTER SET utf8mb4``) gave procedures comparing
  ``utf8mb4_general_ci`` parameters with ``utf8mb4_unicode_ci`` columns: "Illegal mix of
  collations" in every person's ``andreas cancel``.
- View ``node_jobs`` (SQL SECURITY DEFINER): the node, job and GPUs of every open attempt
  of a running or stopping job, what ``andreas nodes`` shows as busy GPUs and jobs; job
  ids and placements are no secret (plans show them too), specs and logs stay in
  ``my_jobs``. The submitter role gets SELECT on it and on the latest power readings
  (``andreas db create-users --apply`` again after this upgrade).

SQLite has no accounts, no procedures and no collations to mix: nothing changes there.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import re

from alembic import context, op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLLATION = "utf8mb4_unicode_ci"
NODE_JOBS = """
CREATE SQL SECURITY DEFINER VIEW node_jobs AS
SELECT a.node_id AS node_id, a.job_id AS job_id, a.gpu_ids AS gpu_ids
FROM job_attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.end_s IS NULL AND a.node_id IS NOT NULL
  AND j.state IN ('running', 'preempting', 'preempted')
"""
_DEFINER = re.compile(r"\bDEFINER\s*=\s*(`[^`]*`|'[^']*'|\S+)@(`[^`]*`|'[^']*'|\S+)\s*", re.I)


def _mariadb() -> bool:
    return op.get_bind().dialect.name != "sqlite"


def upgrade() -> None:
    if not _mariadb():
        return
    if context.is_offline_mode():
        op.execute(f"ALTER DATABASE CHARACTER SET utf8mb4 COLLATE {COLLATION}")
        op.execute(NODE_JOBS.strip())
        return
    bind = op.get_bind()
    bind.exec_driver_sql(f"ALTER DATABASE CHARACTER SET utf8mb4 COLLATE {COLLATION}")
    names = [r[0] for r in bind.exec_driver_sql(
        "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "
        "DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' ORDER BY ROUTINE_NAME")]
    mode = bind.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
    for name in names:
        row = bind.exec_driver_sql(f"SHOW CREATE PROCEDURE `{name}`").one()
        sql_mode, text = row[1], row[2]
        created = _DEFINER.sub("", text, count=1).replace("CREATE PROCEDURE",
                                                          "CREATE OR REPLACE PROCEDURE", 1)
        bind.exec_driver_sql("SET SESSION sql_mode = %s", (sql_mode,))
        bind.exec_driver_sql(created.replace("%", "%%"))    # the driver's paramstyle
    bind.exec_driver_sql("SET SESSION sql_mode = %s", (mode,))
    bind.exec_driver_sql(NODE_JOBS.strip())


def downgrade() -> None:
    if _mariadb():
        op.execute("DROP VIEW IF EXISTS node_jobs")
