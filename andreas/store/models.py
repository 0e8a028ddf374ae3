"""The ORM: SQLAlchemy 2 typed classes mapped onto the Core tables of
:mod:`andreas.store.tables` (the one definition of the schema; see there for units and
the sample tables' aggregates). Changing the schema means changing ``tables`` and adding
an Alembic migration in ``andreas/store/migrations/versions/`` (the tests compare the two).

The node agent never imports this module (it writes through the Core tables): the ORM
costs every GPU node about 10 MB of resident memory.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, relationship

from andreas.sources import EnergySource, PowerSource
from andreas.store import tables as tbl
from andreas.store.tables import MYSQL, NAMING, JobState, NodeState

__all__ = ["MYSQL", "NAMING", "AppModel", "AppProfile", "Base", "Decision", "EnergySource",
           "EpochEvent", "Gpu", "GpuGap", "HostMinute", "HostSample", "Job", "JobAttempt",
           "JobEnergy", "JobState", "Node", "NodeState", "PowerMinute", "PowerSample",
           "PowerSource"]


class Base(DeclarativeBase):
    metadata = tbl.metadata


class Node(Base):
    __table__ = tbl.nodes

    id: Mapped[int]
    name: Mapped[str]
    docker_endpoint: Mapped[str]
    gpu_type: Mapped[str]
    gpu_count: Mapped[int]
    state: Mapped[NodeState]
    last_heartbeat_s: Mapped[float | None]
    state_changed_s: Mapped[float | None]
    profiling: Mapped[bool]
    power_caps: Mapped[dict | None]

    gpus: Mapped[list[Gpu]] = relationship(back_populates="node", order_by="Gpu.index")


class Gpu(Base):
    __table__ = tbl.gpus

    id: Mapped[int]
    node_id: Mapped[int]
    index: Mapped[int] = column_property(tbl.gpus.c.gpu_index)   # NVML index on the node
    uuid: Mapped[str]
    model: Mapped[str]
    memory_mib: Mapped[int]
    power_limit_w: Mapped[float | None]
    has_energy_counter: Mapped[bool]
    healthy: Mapped[bool]
    mig_enabled: Mapped[bool]

    node: Mapped[Node] = relationship(back_populates="gpus")


class PowerSample(Base):
    """One NVML reading of one GPU (``tables.power_samples``)."""

    __table__ = tbl.power_samples

    gpu_id: Mapped[int]
    t: Mapped[float]
    node_id: Mapped[int]
    busy_gpus: Mapped[int]
    power_w: Mapped[float]
    energy_mj: Mapped[int | None]
    utilization: Mapped[float | None]
    memory_used_mib: Mapped[int | None]
    energy_source: Mapped[EnergySource | None]
    power_source: Mapped[PowerSource | None]
    counter_reset: Mapped[bool]
    power_limit_w: Mapped[float | None]


class HostSample(Base):
    """One psutil (and power meter, when there is one) reading of a node."""

    __table__ = tbl.host_samples

    node_id: Mapped[int]
    t: Mapped[float]
    busy_gpus: Mapped[int]
    cpu_utilization: Mapped[float]
    memory_used_mib: Mapped[int]
    host_power_w: Mapped[float | None]
    energy_mj: Mapped[int | None]
    power_source: Mapped[PowerSource | None]
    energy_source: Mapped[EnergySource | None]
    agent_cpu_percent: Mapped[float | None]
    agent_rss_mib: Mapped[float | None]


class GpuGap(Base):
    """A GPU the agent could not read at ``t``: a gap, never a zero sample."""

    __table__ = tbl.gpu_gaps

    gpu_id: Mapped[int]
    t: Mapped[float]
    reason: Mapped[str]


class JobEnergy(Base):
    """Energy attributed to a job over a window ending at ``t`` (``tables.job_energy``)."""

    __table__ = tbl.job_energy

    job_id: Mapped[str]
    attempt: Mapped[int]
    t: Mapped[float]
    node_id: Mapped[int]
    interval_s: Mapped[float]
    gpus: Mapped[int]
    gpu_energy_mj: Mapped[int | None]
    host_energy_mj: Mapped[int | None]


class PowerMinute(Base):
    """1-minute aggregates of power samples (``tables.power_minutes``): always SUM them."""

    __table__ = tbl.power_minutes

    id: Mapped[int]
    gpu_id: Mapped[int]
    minute_s: Mapped[float]
    busy_gpus: Mapped[int]
    node_id: Mapped[int]
    samples: Mapped[int]
    power_sum_w: Mapped[float]
    power_max_w: Mapped[float]
    energy_mj: Mapped[int]
    energy_samples: Mapped[int]
    utilization_sum: Mapped[float]
    utilization_samples: Mapped[int]
    memory_used_max_mib: Mapped[int | None]


class HostMinute(Base):
    """1-minute aggregates of host samples per node, minute and busy count."""

    __table__ = tbl.host_minutes

    id: Mapped[int]
    node_id: Mapped[int]
    minute_s: Mapped[float]
    busy_gpus: Mapped[int]
    samples: Mapped[int]
    cpu_utilization_sum: Mapped[float]
    memory_used_max_mib: Mapped[int]
    host_power_sum_w: Mapped[float]
    host_power_samples: Mapped[int]
    energy_mj: Mapped[int]
    energy_samples: Mapped[int]


class Job(Base):
    """A training job's spec and state. ``state`` changes only via ``jobs.transition``."""

    __table__ = tbl.jobs

    id: Mapped[str]
    image: Mapped[str]
    command: Mapped[list[Any]]
    env: Mapped[dict[str, Any]]
    epochs: Mapped[int]
    epochs_done: Mapped[int]
    submit_s: Mapped[float]
    due_s: Mapped[float]
    weight: Mapped[float]
    application: Mapped[str]
    grace_s: Mapped[float]
    state: Mapped[JobState]
    state_changed_s: Mapped[float | None]
    max_gpus: Mapped[int | None]
    failures: Mapped[int]
    reason: Mapped[str | None]
    predicted_cost: Mapped[float | None]
    gpu_milli: Mapped[int | None]
    gpu_memory_mib: Mapped[int | None]
    owner: Mapped[str | None]

    attempts: Mapped[list[JobAttempt]] = relationship(back_populates="job",
                                                      order_by="JobAttempt.attempt")


class JobAttempt(Base):
    """One container run of a job: where, on which GPUs, how it ended."""

    __table__ = tbl.job_attempts

    id: Mapped[int]
    job_id: Mapped[str]
    attempt: Mapped[int]
    node_id: Mapped[int | None]
    gpu_ids: Mapped[list[Any]]
    container_id: Mapped[str | None]
    start_s: Mapped[float | None]
    end_s: Mapped[float | None]
    exit_code: Mapped[int | None]
    reason: Mapped[str | None]
    decision_id: Mapped[int | None]
    gpu_milli: Mapped[int | None]
    stop_decision_id: Mapped[int | None]
    stop_requested_s: Mapped[float | None]
    profiling: Mapped[bool]
    log_tail: Mapped[str | None]
    log_saved_s: Mapped[float | None]
    power_limit_w: Mapped[float | None]

    job: Mapped[Job] = relationship(back_populates="attempts")


class EpochEvent(Base):
    """One finished epoch, as the agent saw it in the container log."""

    __table__ = tbl.epoch_events

    id: Mapped[int]
    job_id: Mapped[str]
    attempt: Mapped[int]
    epoch: Mapped[int]
    start_s: Mapped[float]
    end_s: Mapped[float]
    node_id: Mapped[int]
    gpu_type: Mapped[str]
    gpus: Mapped[int]


class Decision(Base):
    """One rescheduling point: why, which policy, its objective, time spent and the plan."""

    __table__ = tbl.decisions

    id: Mapped[int]
    t: Mapped[float]
    trigger: Mapped[str]
    policy: Mapped[str]
    objective: Mapped[float | None]
    objective_name: Mapped[str]
    seconds: Mapped[float]
    plan: Mapped[dict[str, Any]]


class AppProfile(Base):
    """Epoch time of an application on g GPUs of a type."""

    __table__ = tbl.app_profiles

    application: Mapped[str]
    gpu_type: Mapped[str]
    gpus: Mapped[int]
    epoch_time_s: Mapped[float]
    source: Mapped[str]
    samples: Mapped[int]
    updated_s: Mapped[float]


class AppLevel(Base):
    """One power level of an application on a GPU type (the Job Profiler's)."""

    __table__ = tbl.app_levels

    application: Mapped[str]
    gpu_type: Mapped[str]
    limit_w: Mapped[float]
    time_factor: Mapped[float]
    gpu_power_w: Mapped[float]
    source: Mapped[str]
    updated_s: Mapped[float]


class AppModel(Base):
    """The Job Profiler's runtime model of an application on a GPU type (Amdahl's law)."""

    __table__ = tbl.app_models

    application: Mapped[str]
    gpu_type: Mapped[str]
    model: Mapped[str]
    t1_s: Mapped[float]
    serial_fraction: Mapped[float]
    mape: Mapped[float | None]
    samples: Mapped[int]
    gpu_counts: Mapped[list[Any]]
    source: Mapped[str]
    updated_s: Mapped[float]
