"""Powering idle nodes down: node states ``off`` and ``waking``, ``nodes.state_changed_s``.

- ``nodes.state``: the values ``off`` (switched off by the manager on purpose, from the
  plan) and ``waking`` (switched on, its engine not answering yet); the CHECK constraint
  is recreated;
- ``nodes.state_changed_s``: when the manager or an operator last moved the node (the
  power-down's idle clock survives a manager restart).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_OLD = ("up", "draining", "down")
_NEW = ("up", "draining", "down", "off", "waking")


def _state(values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(*values, name="node_state", native_enum=False, create_constraint=True,
                   length=16)


def _states(values: tuple[str, ...]) -> None:
    """The CHECK constraint of nodes.state allowing ``values`` (SQLite: the table is
    recreated; MariaDB: the named constraint is dropped and added again)."""
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("nodes") as b:
            b.alter_column("state", existing_type=_state(_OLD if values == _NEW else _NEW),
                           type_=_state(values), existing_nullable=False)
        return
    op.drop_constraint(op.f("ck_nodes_node_state"), "nodes", type_="check")
    op.create_check_constraint(op.f("ck_nodes_node_state"), "nodes",
                               "state IN (" + ", ".join(f"'{v}'" for v in values) + ")")


def upgrade() -> None:
    _states(_NEW)
    op.add_column("nodes", sa.Column("state_changed_s", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as b:
        b.drop_column("state_changed_s")
    op.execute("UPDATE nodes SET state = 'down' WHERE state IN ('off', 'waking')")
    _states(_OLD)
