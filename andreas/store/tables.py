"""The schema as SQLAlchemy Core tables, identical on SQLite and MariaDB: the one
definition of every table. The ORM classes of :mod:`andreas.store.models` are mapped onto
these tables (``__table__``), so both always describe the same schema.

Why Core tables under the ORM: the node agent writes samples through these tables only
and never imports ``sqlalchemy.orm`` (about 10 MB of resident memory on every GPU node;
``tests/agents/test_agent_imports.py`` holds the line).

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

Column conventions (what the ORM's annotated declarative used to infer): a column is NOT
NULL unless ``null=True``; floats are DOUBLE unless declared ``Float``; plain strings are
VARCHAR(255).
"""

from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import (JSON, BigInteger, Boolean, Column, Double, Enum, Float, ForeignKey,
                        Index, Integer, MetaData, SmallInteger, String, Table, Text,
                        UniqueConstraint, false, true)
from sqlalchemy.dialects.mysql import MEDIUMTEXT
from sqlalchemy.types import TypeEngine

from andreas.limits import REASON_CHARS
from andreas.sources import EnergySource, PowerSource

# Deterministic constraint names on every backend, so later migrations can name them.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
         "mysql_collate": "utf8mb4_unicode_ci"}

metadata = MetaData(naming_convention=NAMING)


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


def _col(name: str, type_: TypeEngine[Any] | type[TypeEngine[Any]], *args: Any,
         null: bool = False, **kw: Any) -> Column[Any]:
    return Column(name, type_, *args, nullable=null, **kw)


def _pk(name: str = "id", type_: Any = Integer, *args: Any, **kw: Any) -> Column[Any]:
    return Column(name, type_, *args, primary_key=True, **kw)


def _big_id() -> Column[Any]:
    return _pk("id", BigInteger().with_variant(Integer, "sqlite"))


def _bool(name: str, default: bool, server: bool) -> Column[Any]:
    """A NOT NULL boolean with a Python default and, where ``server``, the same in DDL."""
    if server:
        return _col(name, Boolean, default=default,
                    server_default=true() if default else false())
    return _col(name, Boolean, default=default)


nodes = Table(
    "nodes", metadata,
    _pk(),
    _col("name", String(128), unique=True),
    _col("docker_endpoint", String(512)),
    _col("gpu_type", String(64)),
    _col("gpu_count", Integer),
    _col("state", _enum(NodeState, "node_state"), default=NodeState.DOWN),
    _col("last_heartbeat_s", Double(), null=True),
    # When the manager or an operator last moved it (the agent's own moves leave it): the
    # power-down's idle clock, and how long a node has been off.
    _col("state_changed_s", Double(), null=True),
    # Reserved for the Job Profiler: the manager schedules no production job here.
    _bool("profiling", False, server=True),
    # What the agent found its GPUs accept as power limits (agents/powerlimits.py, JSON
    # {"settable": true, "min_w", "max_w", "default_w"} or {"settable": false, "why"});
    # NULL: never reported (planned at the default limit).
    _col("power_caps", JSON, null=True),
    **MYSQL)

gpus = Table(
    "gpus", metadata,
    _pk(),
    _col("node_id", Integer, ForeignKey("nodes.id")),
    _col("gpu_index", Integer),                               # NVML index on the node
    _col("uuid", String(64), unique=True),
    _col("model", String(64)),
    _col("memory_mib", Integer),
    _col("power_limit_w", Double(), null=True),
    _bool("has_energy_counter", False, server=False),
    # What the agent saw when it (re-)registered the GPU; while a GPU is lost, the agent
    # writes ``gpu_gaps`` rows every interval (it may not update this table).
    _bool("healthy", True, server=True),
    # MIG gives no per-instance power: such a GPU is sampled whole, never per instance.
    _bool("mig_enabled", False, server=True),
    UniqueConstraint("node_id", "gpu_index"),
    **MYSQL)

# One NVML reading of one GPU. ``energy_mj``: energy since this GPU's previous sample
# (from the energy counter when the GPU has one; NULL when unknown).
power_samples = Table(
    "power_samples", metadata,
    _pk("gpu_id", Integer, ForeignKey("gpus.id")),
    _pk("t", Double()),
    _col("node_id", Integer),  # the GPU's node (checked on insert; no index, no FK: ingest speed)
    _col("busy_gpus", SmallInteger),                          # node's GPUs busy with jobs
    _col("power_w", Float),
    _col("energy_mj", BigInteger, null=True),
    _col("utilization", Float, null=True),                    # percent
    _col("memory_used_mib", Integer, null=True),
    # counter | integrated; NULL for rows written before the agent recorded it
    _col("energy_source", _enum(EnergySource, "energy_source"), null=True),
    # instant | average; NULL: power derived from the interval's energy (no power reading)
    _col("power_source", _enum(PowerSource, "power_source"), null=True),
    # the energy counter went down in this interval (driver reload / GPU reset)
    _bool("counter_reset", False, server=True),
    # the GPU's power limit in force (W) as the agent applied it; NULL: not known
    _col("power_limit_w", Float, null=True),
    **MYSQL)

# One psutil (and power meter, when there is one) reading of a node.
host_samples = Table(
    "host_samples", metadata,
    _pk("node_id", Integer, ForeignKey("nodes.id")),
    _pk("t", Double()),
    _col("busy_gpus", SmallInteger),
    _col("cpu_utilization", Float),                           # percent
    _col("memory_used_mib", Integer),
    _col("host_power_w", Float, null=True),
    _col("energy_mj", BigInteger, null=True),                 # since the node's previous sample
    _col("power_source", _enum(PowerSource, "power_source"), null=True),  # rapl | model
    _col("energy_source", _enum(EnergySource, "energy_source"), null=True),
    _col("agent_cpu_percent", Float, null=True),              # the agent's own use, of one
    _col("agent_rss_mib", Float, null=True),                  # core / resident
    **MYSQL)

# A GPU the agent could not read at ``t`` (lost from the bus, unknown NVML error): a gap,
# never a zero sample. One row per sampling interval while it lasts.
gpu_gaps = Table(
    "gpu_gaps", metadata,
    _pk("gpu_id", Integer, ForeignKey("gpus.id")),
    _pk("t", Double()),
    _col("reason", String(REASON_CHARS)),
    **MYSQL)

# Energy attributed to a job over a window ending at ``t``: its GPUs' energy plus its share
# of the host's (by its share of the node's busy GPUs). ``interval_s``: the seconds
# covered. NULL: no reading for that part (never 0 for "unknown"). Idle GPUs' energy is
# not here: it stays with the node (``power_samples``).
job_energy = Table(
    "job_energy", metadata,
    _pk("job_id", String(64), ForeignKey("jobs.id")),
    _pk("attempt", Integer, autoincrement=False),
    _pk("t", Double()),
    _col("node_id", Integer, ForeignKey("nodes.id")),
    _col("interval_s", Double()),
    _col("gpus", SmallInteger),
    _col("gpu_energy_mj", BigInteger, null=True),
    _col("host_energy_mj", BigInteger, null=True),
    Index("ix_job_energy_t", "t"),                            # retention deletes by time
    **MYSQL)

# 1-minute aggregates of power samples per GPU, minute and busy count: sums and counts,
# never means, so totals over any set of rows are exact. A minute may have several
# (partial) rows until the retention job compacts them: always aggregate with SUM.
power_minutes = Table(
    "power_minutes", metadata,
    _big_id(),
    _col("gpu_id", Integer, ForeignKey("gpus.id")),
    _col("minute_s", Double()),                               # start of the minute
    _col("busy_gpus", SmallInteger),
    _col("node_id", Integer, ForeignKey("nodes.id")),
    _col("samples", Integer),
    _col("power_sum_w", Double()),
    _col("power_max_w", Float),
    _col("energy_mj", BigInteger),                            # sum over samples that had one
    _col("energy_samples", Integer),
    _col("utilization_sum", Double()),
    _col("utilization_samples", Integer),
    _col("memory_used_max_mib", Integer, null=True),
    Index("ix_power_minutes_gpu", "gpu_id", "minute_s", "busy_gpus"),
    Index("ix_power_minutes_node_busy", "node_id", "busy_gpus", "minute_s", "gpu_id",
          "samples", "power_sum_w"),
    **MYSQL)

# 1-minute aggregates of host samples per node, minute and busy count (as power_minutes).
host_minutes = Table(
    "host_minutes", metadata,
    _big_id(),
    _col("node_id", Integer, ForeignKey("nodes.id")),
    _col("minute_s", Double()),
    _col("busy_gpus", SmallInteger),
    _col("samples", Integer),
    _col("cpu_utilization_sum", Double()),
    _col("memory_used_max_mib", Integer),
    _col("host_power_sum_w", Double()),
    _col("host_power_samples", Integer),
    _col("energy_mj", BigInteger),
    _col("energy_samples", Integer),
    Index("ix_host_minutes_node_busy", "node_id", "busy_gpus", "minute_s",
          "host_power_samples", "host_power_sum_w"),
    **MYSQL)

# A training job's spec and state. ``state`` changes only via ``jobs.transition``.
# Ids are unique ignoring case in the database (migration 0009): on SQLite this index is
# created on ``id COLLATE NOCASE`` (reflection does not show the collation), on MariaDB
# the table's _ci collation folds case.
jobs = Table(
    "jobs", metadata,
    _pk("id", String(64)),
    _col("image", String(512)),
    _col("command", JSON, default=list),
    _col("env", JSON, default=dict),
    _col("epochs", Integer),
    _col("epochs_done", Integer, default=0),
    _col("submit_s", Double()),
    _col("due_s", Double()),
    _col("weight", Double(), default=1.0),
    _col("application", String(128)),                         # key of app_profiles
    _col("grace_s", Double(), default=120.0),                 # SIGTERM -> kill
    _col("state", _enum(JobState, "job_state"), default=JobState.QUEUED),
    _col("state_changed_s", Double(), null=True),
    _col("max_gpus", Integer, null=True),                     # the user's cap on g
    _col("failures", Integer, default=0, server_default="0"),  # non-zero exits
    _col("reason", String(REASON_CHARS), null=True),                   # why failed / cancelled
    _col("predicted_cost", Double(), null=True),              # at submission (reports)
    # A share of one GPU (1-999 milli-GPU; None: whole GPUs, elastic) and the GPU memory
    # the job needs (MiB; None: not declared). See docs/design/sharing.md.
    _col("gpu_milli", Integer, null=True),
    _col("gpu_memory_mib", Integer, null=True),
    # Who submitted it: the database account on MariaDB (set by a trigger, so nobody
    # submits in another's name), the OS user on SQLite; None: before owners were
    # recorded (an operator's job). See docs/design/trust.md.
    _col("owner", String(128), null=True),
    Index("ix_jobs_state", "state", "due_s"),
    Index("ix_jobs_owner", "owner", "state"),
    Index("ux_jobs_id_nocase", "id", unique=True),
    **MYSQL)

# One container run of a job: where, on which GPUs, how it ended.
job_attempts = Table(
    "job_attempts", metadata,
    _pk(),
    _col("job_id", String(64), ForeignKey("jobs.id")),
    _col("attempt", Integer),                                 # 1, 2, ... per job
    _col("node_id", Integer, ForeignKey("nodes.id"), null=True),
    _col("gpu_ids", JSON, default=list),                      # GPU indexes on the node
    _col("container_id", String(128), null=True),
    _col("start_s", Double(), null=True),
    _col("end_s", Double(), null=True),
    _col("exit_code", Integer, null=True),
    _col("reason", String(REASON_CHARS), null=True),
    _col("decision_id", Integer, null=True),                  # the decision that started it
    _col("gpu_milli", Integer, null=True),                    # its share of gpu_ids[0]; None: whole
    _col("stop_decision_id", Integer, null=True),             # ... and the one that stopped it
    _col("stop_requested_s", Double(), null=True),            # grace period runs from here
    # A run of the Job Manager's automatic profiling (a few epochs at one g on a profiling
    # node); its first epoch is warm-up and stays out of the production refits.
    _bool("profiling", False, server=True),
    # The end of the container's log, kept when the container is removed (retention,
    # ``[executor] keep_exited_s``), so ``andreas logs`` still answers; and when.
    _col("log_tail", Text().with_variant(MEDIUMTEXT, "mysql"), null=True),
    _col("log_saved_s", Double(), null=True),
    # the GPUs' power limit the plan chose (W; NULL: the default); the agent applies it
    _col("power_limit_w", Double(), null=True),
    UniqueConstraint("job_id", "attempt"),
    **MYSQL)

# One finished epoch, as the agent saw it in the container log.
epoch_events = Table(
    "epoch_events", metadata,
    _big_id(),
    _col("job_id", String(64), ForeignKey("jobs.id")),
    _col("attempt", Integer),
    _col("epoch", Integer),
    _col("start_s", Double()),
    _col("end_s", Double()),
    _col("node_id", Integer, ForeignKey("nodes.id")),
    _col("gpu_type", String(64)),
    _col("gpus", Integer),
    UniqueConstraint("job_id", "attempt", "epoch"),
    Index("ix_epoch_events_config", "gpu_type", "gpus"),
    **MYSQL)

# One rescheduling point: why, which policy, its objective, time spent and the plan.
decisions = Table(
    "decisions", metadata,
    _pk(),
    _col("t", Double()),
    _col("trigger", String(32)),                              # submit | complete | period | ...
    _col("policy", String(32)),
    _col("objective", Double(), null=True),
    _col("objective_name", String(16)),
    _col("seconds", Double()),
    _col("plan", JSON),
    Index("ix_decisions_t", "t"),
    **MYSQL)

# Epoch time of an application on g GPUs of a type. ``source``: profiles | profiler |
# measured.
app_profiles = Table(
    "app_profiles", metadata,
    _pk("application", String(128)),
    _pk("gpu_type", String(64)),
    _pk("gpus", Integer, autoincrement=False),
    _col("epoch_time_s", Double()),
    _col("source", String(32)),
    _col("samples", Integer, default=0),
    _col("updated_s", Double()),
    **MYSQL)

# The Job Profiler's power levels of an application on a GPU type (andreas/levels.py):
# per limit the epoch time over the default limit's and the GPU's mean draw, measured at
# one GPU (``source`` "profiler") or fitted where not measured ("fit", andreas.powerfit).
app_levels = Table(
    "app_levels", metadata,
    _pk("application", String(128)),
    _pk("gpu_type", String(64)),
    _pk("limit_w", Double()),
    _col("time_factor", Double()),
    _col("gpu_power_w", Double()),
    _col("source", String(32)),
    _col("updated_s", Double()),
    **MYSQL)

# The Job Profiler's runtime model of an application on a GPU type (Amdahl's law):
# ``epoch_time(g) = t1_s * (serial_fraction + (1 - serial_fraction) / g)``; ``mape``: the
# fit's mean absolute percentage error on the measured points (None: one point);
# ``gpu_counts``: the g values measured.
app_models = Table(
    "app_models", metadata,
    _pk("application", String(128)),
    _pk("gpu_type", String(64)),
    _col("model", String(16)),
    _col("t1_s", Double()),
    _col("serial_fraction", Double()),
    _col("mape", Double(), null=True),
    _col("samples", Integer),
    _col("gpu_counts", JSON),
    _col("source", String(32)),
    _col("updated_s", Double()),
    **MYSQL)

# Who may act as the Job Manager (one row, id 1; ``andreas/store/lease.py``): the holder
# (host, process), until when (``expires_s``, the database server's clock) and the
# fencing token. A manager takes the lease by raising ``token`` and every manager write
# runs in a transaction that first checks ``token`` is still its own, so a manager that
# lost the lease cannot write. Only the manager's account may write it (accounts.py).
manager_lease = Table(
    "manager_lease", metadata,
    _pk("id", Integer, autoincrement=False),
    _col("holder", String(REASON_CHARS)),
    _col("token", BigInteger),
    _col("expires_s", Double()),
    _col("renewed_s", Double()),
    **MYSQL)

# Time a node's agent did not sample (it was not running), recorded by the agent when it
# starts again (``[start_s, end_s]``). ``charged``: the GPUs' energy over the gap came
# from their cumulative energy counters and is in the samples (and the job's share in
# ``job_energy``); False: that energy is not in the store. Reports name these gaps.
agent_gaps = Table(
    "agent_gaps", metadata,
    _pk("node_id", Integer, ForeignKey("nodes.id")),
    _pk("start_s", Double()),
    _col("end_s", Double()),
    _bool("charged", False, server=True),
    _col("reason", String(REASON_CHARS)),
    **MYSQL)

# MariaDB accounts that are node agents, and the node each may write for (NULL: the
# fleet's shared agent account, any node); read by the triggers of
# ``store/procedures.py`` (migration 0013). Unused on SQLite, which has no accounts.
agent_accounts = Table(
    "agent_accounts", metadata,
    _pk("login", String(80)),
    _col("node", String(128), null=True),
    **MYSQL)
