"""The schema: SQLAlchemy 2 typed ORM classes, identical on SQLite and MariaDB.

Units follow ARCHITECTURE.md: times are UTC seconds (double), power in watts, energy in
integer **millijoules** (NVML's own unit; integer sums stay exact through the 1-minute
down-sampling). Changing anything here needs a new Alembic migration in
``andreas/store/migrations/versions/`` (the tests compare the two).

Sample tables are written by the agents at high rate. Every batch of raw samples also
writes, in the same transaction, its 1-minute partial aggregates (``power_minutes``,
``host_minutes``: sums and counts per GPU or node, minute and busy-GPU count). Aggregates
are always read with SUM, so several partial rows of one minute mean the same as one
compacted row; the retention job compacts them and deletes raw samples older than N days.
Queries over hours or days ("mean power of node n with g GPUs busy over the last 24 h")
read the aggregates through a covering index, at most 1 440 rows per GPU and day.
"""

from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import (JSON, BigInteger, Boolean, Double, Enum, Float, ForeignKey, Index,
                        Integer, MetaData, SmallInteger, String, Text, UniqueConstraint, false,
                        true)
from sqlalchemy.dialects.mysql import MEDIUMTEXT
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from andreas.sources import EnergySource, PowerSource

# Deterministic constraint names on every backend, so later migrations can name them.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
MYSQL = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
         "mysql_collate": "utf8mb4_unicode_ci"}


class JobState(enum.Enum):
    """Life of a job; the allowed moves are ``andreas.store.jobs.ALLOWED`` (one place)."""

    QUEUED = "queued"          # submitted, waiting for GPUs
    RUNNING = "running"        # a container runs it
    PREEMPTING = "preempting"  # stop requested (SIGTERM sent), container not yet exited
    PREEMPTED = "preempted"    # stopped resumably (checkpoint), waiting to run again
    PROFILING = "profiling"    # measured on a profiling node before it is planned blind
    COMPLETED = "completed"    # all epochs done (terminal)
    FAILED = "failed"          # gave up after failures (terminal)
    CANCELLED = "cancelled"    # cancelled by a user (terminal)


class NodeState(enum.Enum):
    """What the agent reports (``up``), an operator sets (``draining``, ``down``) or the
    manager's power-down sets (``off``: switched off on purpose, ``waking``: switched on,
    its engine not answering yet); the moves are ``andreas.store.nodes.ALLOWED``."""

    UP = "up"
    DRAINING = "draining"
    DOWN = "down"
    OFF = "off"
    WAKING = "waking"


def _enum(cls: type[enum.Enum], name: str) -> Enum:
    """Stored as its lower-case value in a VARCHAR with a CHECK constraint (both backends)."""
    return Enum(cls, name=name, native_enum=False, create_constraint=True, length=16,
                values_callable=lambda e: [m.value for m in e], validate_strings=True)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {float: Double(), str: String(255), dict[str, Any]: JSON(),
                           list[Any]: JSON()}


class Node(Base):
    __tablename__ = "nodes"
    __table_args__ = (MYSQL,)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    docker_endpoint: Mapped[str] = mapped_column(String(512))
    gpu_type: Mapped[str] = mapped_column(String(64))
    gpu_count: Mapped[int]
    state: Mapped[NodeState] = mapped_column(_enum(NodeState, "node_state"),
                                             default=NodeState.DOWN)
    last_heartbeat_s: Mapped[float | None]
    # When the manager or an operator last moved it (the agent's own moves leave it): the
    # power-down's idle clock, and how long a node has been off.
    state_changed_s: Mapped[float | None]
    # Reserved for the Job Profiler: the manager schedules no production job here.
    profiling: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    gpus: Mapped[list[Gpu]] = relationship(back_populates="node", order_by="Gpu.index")


class Gpu(Base):
    __tablename__ = "gpus"
    __table_args__ = (UniqueConstraint("node_id", "gpu_index"), MYSQL)

    id: Mapped[int] = mapped_column(primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    index: Mapped[int] = mapped_column("gpu_index")           # NVML index on the node
    uuid: Mapped[str] = mapped_column(String(64), unique=True)
    model: Mapped[str] = mapped_column(String(64))
    memory_mib: Mapped[int]
    power_limit_w: Mapped[float | None]
    has_energy_counter: Mapped[bool] = mapped_column(Boolean, default=False)
    # What the agent saw when it (re-)registered the GPU; while a GPU is lost, the agent
    # writes ``gpu_gaps`` rows every interval (it may not update this table).
    healthy: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # MIG gives no per-instance power: such a GPU is sampled whole, never per instance.
    mig_enabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    node: Mapped[Node] = relationship(back_populates="gpus")


class PowerSample(Base):
    """One NVML reading of one GPU. ``energy_mj``: energy since this GPU's previous sample
    (from the energy counter when the GPU has one; NULL when unknown)."""

    __tablename__ = "power_samples"
    __table_args__ = (MYSQL,)

    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id"), primary_key=True)
    t: Mapped[float] = mapped_column(primary_key=True)
    node_id: Mapped[int]      # the GPU's node (checked on insert; no index, no FK: ingest speed)
    busy_gpus: Mapped[int] = mapped_column(SmallInteger)      # node's GPUs busy with jobs
    power_w: Mapped[float] = mapped_column(Float)
    energy_mj: Mapped[int | None] = mapped_column(BigInteger)
    utilization: Mapped[float | None] = mapped_column(Float)  # percent
    memory_used_mib: Mapped[int | None]
    # counter | integrated; NULL for rows written before the agent recorded it
    energy_source: Mapped[EnergySource | None] = mapped_column(
        _enum(EnergySource, "energy_source"))
    # instant | average; NULL: power derived from the interval's energy (no power reading)
    power_source: Mapped[PowerSource | None] = mapped_column(_enum(PowerSource, "power_source"))
    # the energy counter went down in this interval (driver reload / GPU reset)
    counter_reset: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class HostSample(Base):
    """One psutil (and power meter, when there is one) reading of a node."""

    __tablename__ = "host_samples"
    __table_args__ = (MYSQL,)

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), primary_key=True)
    t: Mapped[float] = mapped_column(primary_key=True)
    busy_gpus: Mapped[int] = mapped_column(SmallInteger)
    cpu_utilization: Mapped[float] = mapped_column(Float)    # percent
    memory_used_mib: Mapped[int]
    host_power_w: Mapped[float | None] = mapped_column(Float)
    energy_mj: Mapped[int | None] = mapped_column(BigInteger)  # since the node's previous sample
    power_source: Mapped[PowerSource | None] = mapped_column(   # rapl | model (estimated)
        _enum(PowerSource, "power_source"))
    energy_source: Mapped[EnergySource | None] = mapped_column(
        _enum(EnergySource, "energy_source"))
    agent_cpu_percent: Mapped[float | None] = mapped_column(Float)  # the agent's own use,
    agent_rss_mib: Mapped[float | None] = mapped_column(Float)      # of one core / resident


class GpuGap(Base):
    """A GPU the agent could not read at ``t`` (lost from the bus, unknown NVML error):
    a gap, never a zero sample. One row per sampling interval while it lasts."""

    __tablename__ = "gpu_gaps"
    __table_args__ = (MYSQL,)

    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id"), primary_key=True)
    t: Mapped[float] = mapped_column(primary_key=True)
    reason: Mapped[str] = mapped_column(String(255))


class JobEnergy(Base):
    """Energy attributed to a job over a window ending at ``t``: its GPUs' energy plus its
    share of the host's (by its share of the node's busy GPUs). ``interval_s``: the seconds
    covered. NULL: no reading for that part (never 0 for "unknown"). Idle GPUs' energy is
    not here: it stays with the node (``power_samples``)."""

    __tablename__ = "job_energy"
    __table_args__ = (Index("ix_job_energy_t", "t"), MYSQL)   # retention deletes by time

    job_id: Mapped[str] = mapped_column(String(64), ForeignKey("jobs.id"), primary_key=True)
    attempt: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    t: Mapped[float] = mapped_column(primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    interval_s: Mapped[float]
    gpus: Mapped[int] = mapped_column(SmallInteger)
    gpu_energy_mj: Mapped[int | None] = mapped_column(BigInteger)
    host_energy_mj: Mapped[int | None] = mapped_column(BigInteger)


class PowerMinute(Base):
    """1-minute aggregates of power samples per GPU, minute and busy count: sums and counts,
    never means, so totals over any set of rows are exact. A minute may have several
    (partial) rows until the retention job compacts them: always aggregate with SUM."""

    __tablename__ = "power_minutes"
    __table_args__ = (
        Index("ix_power_minutes_gpu", "gpu_id", "minute_s", "busy_gpus"),
        Index("ix_power_minutes_node_busy", "node_id", "busy_gpus", "minute_s", "gpu_id",
              "samples", "power_sum_w"),
        MYSQL)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                     primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id"))
    minute_s: Mapped[float]                                    # start of the minute
    busy_gpus: Mapped[int] = mapped_column(SmallInteger)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    samples: Mapped[int]
    power_sum_w: Mapped[float]
    power_max_w: Mapped[float] = mapped_column(Float)
    energy_mj: Mapped[int] = mapped_column(BigInteger)         # sum over samples that had one
    energy_samples: Mapped[int]
    utilization_sum: Mapped[float]
    utilization_samples: Mapped[int]
    memory_used_max_mib: Mapped[int | None]


class HostMinute(Base):
    """1-minute aggregates of host samples per node, minute and busy count (as PowerMinute)."""

    __tablename__ = "host_minutes"
    __table_args__ = (
        Index("ix_host_minutes_node_busy", "node_id", "busy_gpus", "minute_s",
              "host_power_samples", "host_power_sum_w"),
        MYSQL)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                     primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    minute_s: Mapped[float]
    busy_gpus: Mapped[int] = mapped_column(SmallInteger)
    samples: Mapped[int]
    cpu_utilization_sum: Mapped[float]
    memory_used_max_mib: Mapped[int]
    host_power_sum_w: Mapped[float]
    host_power_samples: Mapped[int]
    energy_mj: Mapped[int] = mapped_column(BigInteger)
    energy_samples: Mapped[int]


class Job(Base):
    """A training job's spec and state. ``state`` changes only via ``jobs.transition``."""

    __tablename__ = "jobs"
    # Ids are unique ignoring case in the database (migration 0009): on SQLite this index
    # is created on ``id COLLATE NOCASE`` (reflection does not show the collation), on
    # MariaDB the table's _ci collation folds case.
    __table_args__ = (Index("ix_jobs_state", "state", "due_s"),
                      Index("ix_jobs_owner", "owner", "state"),
                      Index("ux_jobs_id_nocase", "id", unique=True), MYSQL)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    image: Mapped[str] = mapped_column(String(512))
    command: Mapped[list[Any]] = mapped_column(JSON, default=list)
    env: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    epochs: Mapped[int]
    epochs_done: Mapped[int] = mapped_column(default=0)
    submit_s: Mapped[float]
    due_s: Mapped[float]
    weight: Mapped[float] = mapped_column(default=1.0)
    application: Mapped[str] = mapped_column(String(128))    # key of app_profiles
    grace_s: Mapped[float] = mapped_column(default=120.0)    # SIGTERM -> kill
    state: Mapped[JobState] = mapped_column(_enum(JobState, "job_state"),
                                            default=JobState.QUEUED)
    state_changed_s: Mapped[float | None]
    max_gpus: Mapped[int | None]                             # the user's cap on g
    failures: Mapped[int] = mapped_column(default=0, server_default="0")  # non-zero exits
    reason: Mapped[str | None] = mapped_column(String(255))  # why failed / cancelled
    predicted_cost: Mapped[float | None]                     # at submission (reports)
    # A share of one GPU (1-999 milli-GPU; None: whole GPUs, elastic) and the GPU memory
    # the job needs (MiB; None: not declared). See the GPU-sharing section of ARCHITECTURE.
    gpu_milli: Mapped[int | None]
    gpu_memory_mib: Mapped[int | None]
    # Who submitted it: the database account on MariaDB (set by a trigger, so nobody
    # submits in another's name), the OS user on SQLite; None: before owners were
    # recorded (an operator's job). See "Ownership and trust" in ARCHITECTURE.md.
    owner: Mapped[str | None] = mapped_column(String(128))

    attempts: Mapped[list[JobAttempt]] = relationship(back_populates="job",
                                                      order_by="JobAttempt.attempt")


class JobAttempt(Base):
    """One container run of a job: where, on which GPUs, how it ended."""

    __tablename__ = "job_attempts"
    __table_args__ = (UniqueConstraint("job_id", "attempt"), MYSQL)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    attempt: Mapped[int]                                      # 1, 2, ... per job
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"))
    gpu_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)  # GPU indexes on the node
    container_id: Mapped[str | None] = mapped_column(String(128))
    start_s: Mapped[float | None]
    end_s: Mapped[float | None]
    exit_code: Mapped[int | None]
    reason: Mapped[str | None] = mapped_column(String(255))
    decision_id: Mapped[int | None]                           # the decision that started it
    gpu_milli: Mapped[int | None]                             # its share of gpu_ids[0]; None: whole
    stop_decision_id: Mapped[int | None]                      # ... and the one that stopped it
    stop_requested_s: Mapped[float | None]                    # grace period runs from here
    # A run of the Job Manager's automatic profiling (a few epochs at one g on a profiling
    # node); its first epoch is warm-up and stays out of the production refits.
    profiling: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The end of the container's log, kept when the container is removed (retention,
    # ``[executor] keep_exited_s``), so ``andreas logs`` still answers; and when.
    log_tail: Mapped[str | None] = mapped_column(Text().with_variant(MEDIUMTEXT, "mysql"))
    log_saved_s: Mapped[float | None]

    job: Mapped[Job] = relationship(back_populates="attempts")


class EpochEvent(Base):
    """One finished epoch, as the agent saw it in the container log."""

    __tablename__ = "epoch_events"
    __table_args__ = (UniqueConstraint("job_id", "attempt", "epoch"),
                      Index("ix_epoch_events_config", "gpu_type", "gpus"), MYSQL)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                     primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    attempt: Mapped[int]
    epoch: Mapped[int]
    start_s: Mapped[float]
    end_s: Mapped[float]
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    gpu_type: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[int]


class Decision(Base):
    """One rescheduling point: why, which policy, its objective, time spent and the plan."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_t", "t"), MYSQL)

    id: Mapped[int] = mapped_column(primary_key=True)
    t: Mapped[float]
    trigger: Mapped[str] = mapped_column(String(32))           # submit | complete | period | ...
    policy: Mapped[str] = mapped_column(String(32))
    objective: Mapped[float | None]
    objective_name: Mapped[str] = mapped_column(String(16))
    seconds: Mapped[float]
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)


class AppProfile(Base):
    """Epoch time of an application on g GPUs of a type.

    ``source``: profiles | profiler | measured."""

    __tablename__ = "app_profiles"
    __table_args__ = (MYSQL,)

    application: Mapped[str] = mapped_column(String(128), primary_key=True)
    gpu_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpus: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    epoch_time_s: Mapped[float]
    source: Mapped[str] = mapped_column(String(32))
    samples: Mapped[int] = mapped_column(default=0)
    updated_s: Mapped[float]


class AppModel(Base):
    """The Job Profiler's runtime model of an application on a GPU type (Amdahl's law):
    ``epoch_time(g) = t1_s * (serial_fraction + (1 - serial_fraction) / g)``; ``mape``:
    the fit's mean absolute percentage error on the measured points (None: one point);
    ``gpu_counts``: the g values measured."""

    __tablename__ = "app_models"
    __table_args__ = (MYSQL,)

    application: Mapped[str] = mapped_column(String(128), primary_key=True)
    gpu_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(16))
    t1_s: Mapped[float]
    serial_fraction: Mapped[float]
    mape: Mapped[float | None]
    samples: Mapped[int]
    gpu_counts: Mapped[list[Any]] = mapped_column(JSON)
    source: Mapped[str] = mapped_column(String(32))
    updated_s: Mapped[float]
