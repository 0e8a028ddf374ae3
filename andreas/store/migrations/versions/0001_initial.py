"""Initial schema: inventory, samples and their 1-minute aggregates, jobs, decisions, profiles.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

MYSQL = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
         "mysql_collate": "utf8mb4_unicode_ci"}


def _state(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=16)


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("docker_endpoint", sa.String(512), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("state", _state("node_state", "up", "draining", "down"), nullable=False),
        sa.Column("last_heartbeat_s", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("name", name=op.f("uq_nodes_name")),
        **MYSQL)
    op.create_table(
        "gpus",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(64), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("power_limit_w", sa.Double(), nullable=True),
        sa.Column("has_energy_counter", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name=op.f("fk_gpus_node_id_nodes")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpus")),
        sa.UniqueConstraint("node_id", "gpu_index", name=op.f("uq_gpus_node_id_gpu_index")),
        sa.UniqueConstraint("uuid", name=op.f("uq_gpus_uuid")),
        **MYSQL)
    op.create_table(
        "power_samples",
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("busy_gpus", sa.SmallInteger(), nullable=False),
        sa.Column("power_w", sa.Float(), nullable=False),
        sa.Column("energy_mj", sa.BigInteger(), nullable=True),
        sa.Column("utilization", sa.Float(), nullable=True),
        sa.Column("memory_used_mib", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["gpu_id"], ["gpus.id"],
                                name=op.f("fk_power_samples_gpu_id_gpus")),
        sa.PrimaryKeyConstraint("gpu_id", "t", name=op.f("pk_power_samples")),
        **MYSQL)
    op.create_table(
        "host_samples",
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("busy_gpus", sa.SmallInteger(), nullable=False),
        sa.Column("cpu_utilization", sa.Float(), nullable=False),
        sa.Column("memory_used_mib", sa.Integer(), nullable=False),
        sa.Column("host_power_w", sa.Float(), nullable=True),
        sa.Column("energy_mj", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_host_samples_node_id_nodes")),
        sa.PrimaryKeyConstraint("node_id", "t", name=op.f("pk_host_samples")),
        **MYSQL)
    op.create_table(
        "power_minutes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("gpu_id", sa.Integer(), nullable=False),
        sa.Column("minute_s", sa.Double(), nullable=False),
        sa.Column("busy_gpus", sa.SmallInteger(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("power_sum_w", sa.Double(), nullable=False),
        sa.Column("power_max_w", sa.Float(), nullable=False),
        sa.Column("energy_mj", sa.BigInteger(), nullable=False),
        sa.Column("energy_samples", sa.Integer(), nullable=False),
        sa.Column("utilization_sum", sa.Double(), nullable=False),
        sa.Column("utilization_samples", sa.Integer(), nullable=False),
        sa.Column("memory_used_max_mib", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["gpu_id"], ["gpus.id"],
                                name=op.f("fk_power_minutes_gpu_id_gpus")),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_power_minutes_node_id_nodes")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_power_minutes")),
        **MYSQL)
    op.create_index("ix_power_minutes_gpu", "power_minutes", ["gpu_id", "minute_s", "busy_gpus"])
    op.create_index("ix_power_minutes_node_busy", "power_minutes",
                    ["node_id", "busy_gpus", "minute_s", "gpu_id", "samples", "power_sum_w"])
    op.create_table(
        "host_minutes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("minute_s", sa.Double(), nullable=False),
        sa.Column("busy_gpus", sa.SmallInteger(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("cpu_utilization_sum", sa.Double(), nullable=False),
        sa.Column("memory_used_max_mib", sa.Integer(), nullable=False),
        sa.Column("host_power_sum_w", sa.Double(), nullable=False),
        sa.Column("host_power_samples", sa.Integer(), nullable=False),
        sa.Column("energy_mj", sa.BigInteger(), nullable=False),
        sa.Column("energy_samples", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_host_minutes_node_id_nodes")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_host_minutes")),
        **MYSQL)
    op.create_index("ix_host_minutes_node_busy", "host_minutes",
                    ["node_id", "busy_gpus", "minute_s", "host_power_samples",
                     "host_power_sum_w"])
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("image", sa.String(512), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("epochs", sa.Integer(), nullable=False),
        sa.Column("epochs_done", sa.Integer(), nullable=False),
        sa.Column("submit_s", sa.Double(), nullable=False),
        sa.Column("due_s", sa.Double(), nullable=False),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.Column("application", sa.String(128), nullable=False),
        sa.Column("grace_s", sa.Double(), nullable=False),
        sa.Column("state", _state("job_state", "queued", "running", "preempting", "preempted",
                                  "completed", "failed", "cancelled"), nullable=False),
        sa.Column("state_changed_s", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        **MYSQL)
    op.create_index("ix_jobs_state", "jobs", ["state", "due_s"])
    op.create_table(
        "job_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("gpu_ids", sa.JSON(), nullable=False),
        sa.Column("container_id", sa.String(128), nullable=True),
        sa.Column("start_s", sa.Double(), nullable=True),
        sa.Column("end_s", sa.Double(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(255), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_attempts_job_id_jobs")),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_job_attempts_node_id_nodes")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_attempts")),
        sa.UniqueConstraint("job_id", "attempt", name=op.f("uq_job_attempts_job_id_attempt")),
        **MYSQL)
    op.create_table(
        "epoch_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("start_s", sa.Double(), nullable=False),
        sa.Column("end_s", sa.Double(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_epoch_events_job_id_jobs")),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"],
                                name=op.f("fk_epoch_events_node_id_nodes")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_epoch_events")),
        sa.UniqueConstraint("job_id", "attempt", "epoch",
                            name=op.f("uq_epoch_events_job_id_attempt_epoch")),
        **MYSQL)
    op.create_index("ix_epoch_events_config", "epoch_events", ["gpu_type", "gpus"])
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("objective", sa.Double(), nullable=True),
        sa.Column("objective_name", sa.String(16), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
        **MYSQL)
    op.create_index("ix_decisions_t", "decisions", ["t"])
    op.create_table(
        "app_profiles",
        sa.Column("application", sa.String(128), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("gpus", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch_time_s", sa.Double(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("updated_s", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("application", "gpu_type", "gpus", name=op.f("pk_app_profiles")),
        **MYSQL)


def downgrade() -> None:
    # Alembic's own CLI could call this; `andreas db downgrade` refuses (forward-only).
    for table in ("app_profiles", "decisions", "epoch_events", "job_attempts", "jobs",
                  "host_minutes", "power_minutes", "host_samples", "power_samples", "gpus",
                  "nodes"):
        op.drop_table(table)
