"""The manager's lease (one manager at a time, fencing tokens) and the agents' gaps.

- ``manager_lease``: one row (id 1) naming the manager that may act, until when, and the
  fencing token every manager write checks (``andreas/store/lease.py``); it replaces the
  database's named lock (``GET_LOCK``), which any account could take;
- ``agent_gaps``: time a node's agent did not sample, recorded when it starts again, and
  whether the GPUs' energy over it was charged from their energy counters.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

MYSQL = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
         "mysql_collate": "utf8mb4_unicode_ci"}


def upgrade() -> None:
    lease = op.create_table(
        "manager_lease",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires_s", sa.Double(), nullable=False),
        sa.Column("renewed_s", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_manager_lease")),
        **MYSQL)
    op.bulk_insert(lease, [{"id": 1, "holder": "", "token": 0, "expires_s": 0.0,
                            "renewed_s": 0.0}])
    op.create_table(
        "agent_gaps",
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("start_s", sa.Double(), nullable=False),
        sa.Column("end_s", sa.Double(), nullable=False),
        sa.Column("charged", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("reason", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_agent_gaps_node_id_nodes")),
        sa.PrimaryKeyConstraint("node_id", "start_s", name=op.f("pk_agent_gaps")),
        **MYSQL)


def downgrade() -> None:
    op.drop_table("agent_gaps")
    op.drop_table("manager_lease")
