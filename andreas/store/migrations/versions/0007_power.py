"""Powering idle nodes down: node states ``off`` and ``waking``, ``nodes.state_changed_s``.

- ``nodes.state``: the values ``off`` (switched off by the manager on purpose, from the
  plan) and ``waking`` (switched on, its engine not answering yet); the CHECK constraint
  is recreated;
- ``nodes.state_changed_s``: when the manager or an operator last moved the node (the
  power-down's idle clock survives a manager restart).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from andreas.store.migrations.sqlite import rebuild

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_OLD = ("up", "draining", "down")
_NEW = ("up", "draining", "down", "off", "waking")


def _state(values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(*values, name="node_state", native_enum=False, create_constraint=True,
                   length=16)


def _check(values: tuple[str, ...]) -> str:
    return "state IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _states(values: tuple[str, ...]) -> None:
    """The CHECK constraint of nodes.state allowing ``values``. MariaDB: the named
    constraint is dropped and added again. SQLite: the table is rebuilt from its own DDL
    with the new check, under deferred foreign keys (gpus, samples and attempts reference
    it; Alembic's copy-and-rename would leave the implicit DELETE of the drop counted as
    violations at commit, and a rename would point the references at the copy)."""
    old = _OLD if values == _NEW else _NEW
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint(op.f("ck_nodes_node_state"), "nodes", type_="check")
        op.create_check_constraint(op.f("ck_nodes_node_state"), "nodes", _check(values))
        return
    rebuild(bind, "nodes", _check(old), _check(values))


def upgrade() -> None:
    _states(_NEW)
    op.add_column("nodes", sa.Column("state_changed_s", sa.Double(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":     # native since SQLite 3.35, no rebuild
        op.get_bind().exec_driver_sql("ALTER TABLE nodes DROP COLUMN state_changed_s")
    else:
        op.drop_column("nodes", "state_changed_s")
    op.execute("UPDATE nodes SET state = 'down' WHERE state IN ('off', 'waking')")
    _states(_OLD)
