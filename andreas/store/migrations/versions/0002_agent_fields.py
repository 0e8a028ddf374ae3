"""Agent fields: how each sample was measured, GPU health and MIG, gaps, job energy.

- ``power_samples``: ``energy_source`` (counter | integrated), ``power_source`` (instant |
  average), ``counter_reset`` (the energy counter went down in the interval);
- ``host_samples``: ``power_source`` / ``energy_source`` (rapl | model: measured or
  estimated) and the agent's own CPU and memory use;
- ``gpus``: ``healthy`` and ``mig_enabled``;
- ``gpu_gaps``: intervals in which a GPU could not be read (a gap, not zeros);
- ``job_energy``: energy attributed to each job (its GPUs plus its share of the host).

Existing rows get NULL sources (unknown), ``counter_reset`` false, GPUs healthy and
without MIG.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

MYSQL = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
         "mysql_collate": "utf8mb4_unicode_ci"}
ENERGY_SOURCES = ("counter", "integrated", "rapl", "model")
POWER_SOURCES = ("instant", "average", "rapl", "model")


def _enum(name: str, values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=16)


def _add_enum_column(table: str, column: str, values: tuple[str, ...]) -> None:
    """A nullable VARCHAR(16) with its CHECK constraint, named as the models name it.

    SQLite cannot ALTER TABLE ADD CONSTRAINT (Alembic would drop the CHECK with a warning),
    but it accepts the CHECK inline in ADD COLUMN: no table copy, offline SQL still works.
    """
    if op.get_context().dialect.name == "sqlite":
        allowed = ", ".join(f"'{v}'" for v in values)
        op.execute(f"ALTER TABLE {table} ADD COLUMN {column} VARCHAR(16) "
                   f"CONSTRAINT ck_{table}_{column} CHECK ({column} IN ({allowed}))")
    else:
        op.add_column(table, sa.Column(column, _enum(column, values), nullable=True))


def upgrade() -> None:
    op.add_column("gpus", sa.Column("healthy", sa.Boolean(), server_default=sa.true(),
                                    nullable=False))
    op.add_column("gpus", sa.Column("mig_enabled", sa.Boolean(), server_default=sa.false(),
                                    nullable=False))
    _add_enum_column("power_samples", "energy_source", ENERGY_SOURCES)
    _add_enum_column("power_samples", "power_source", POWER_SOURCES)
    op.add_column("power_samples", sa.Column("counter_reset", sa.Boolean(),
                                             server_default=sa.false(), nullable=False))
    _add_enum_column("host_samples", "power_source", POWER_SOURCES)
    _add_enum_column("host_samples", "energy_source", ENERGY_SOURCES)
    op.add_column("host_samples", sa.Column("agent_cpu_percent", sa.Float()))
    op.add_column("host_samples", sa.Column("agent_rss_mib", sa.Float()))
    op.create_table(
        "gpu_gaps",
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("reason", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(["gpu_id"], ["gpus.id"], name=op.f("fk_gpu_gaps_gpu_id_gpus")),
        sa.PrimaryKeyConstraint("gpu_id", "t", name=op.f("pk_gpu_gaps")),
        **MYSQL)
    op.create_table(
        "job_energy",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("interval_s", sa.Double(), nullable=False),
        sa.Column("gpus", sa.SmallInteger(), nullable=False),
        sa.Column("gpu_energy_mj", sa.BigInteger(), nullable=True),
        sa.Column("host_energy_mj", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_energy_job_id_jobs")),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_job_energy_node_id_nodes")),
        sa.PrimaryKeyConstraint("job_id", "attempt", "t", name=op.f("pk_job_energy")),
        **MYSQL)


def downgrade() -> None:
    # Alembic's own CLI could call this; `andreas db downgrade` refuses (forward-only).
    op.drop_table("job_energy")
    op.drop_table("gpu_gaps")
    with op.batch_alter_table("host_samples") as b:
        for column in ("agent_rss_mib", "agent_cpu_percent", "energy_source", "power_source"):
            b.drop_column(column)
    with op.batch_alter_table("power_samples") as b:
        for column in ("counter_reset", "power_source", "energy_source"):
            b.drop_column(column)
    with op.batch_alter_table("gpus") as b:
        b.drop_column("mig_enabled")
        b.drop_column("healthy")
