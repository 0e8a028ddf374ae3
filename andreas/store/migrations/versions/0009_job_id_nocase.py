"""Job ids unique ignoring case in the database itself, on SQLite as on MariaDB.

The submit path checks for an id that differs only in case before it inserts, but two
racing submissions of ``RACE2`` and ``race2`` could both pass that read on SQLite, whose
primary key compares case-sensitively. A unique index on ``id COLLATE NOCASE`` (ids are
ASCII, ``[A-Za-z0-9][A-Za-z0-9_.-]*``, so NOCASE's ASCII folding is exact) makes the
second insert fail. On MariaDB the jobs table's collation (``utf8mb4_unicode_ci``) already
makes the primary key case-insensitive; the same index is created there (redundant, but
the models describe one schema for both backends).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

INDEX = "ux_jobs_id_nocase"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.create_index(INDEX, "jobs", ["id"], unique=True)
        return
    clash = bind.execute(sa.text(
        "SELECT lower(id) FROM jobs GROUP BY lower(id) HAVING COUNT(*) > 1 LIMIT 5")).scalars()
    names = list(clash)
    if names:
        raise RuntimeError(f"jobs whose ids differ only in case exist ({', '.join(names)}); "
                           "rename or delete one of each before `andreas db upgrade`")
    op.execute(f"CREATE UNIQUE INDEX {INDEX} ON jobs (id COLLATE NOCASE)")


def downgrade() -> None:
    op.drop_index(INDEX, table_name="jobs")
