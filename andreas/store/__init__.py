"""The store: one schema on SQLite (embedded default) and MariaDB, with Alembic migrations.

Typical use::

    from andreas.store import open_store, transition, JobState
    store = open_store()                      # the configured URL; refuses an old schema
    with store.session() as s:                # one transaction, committed on success
        transition(s, "j42", JobState.RUNNING, expected=JobState.QUEUED)

Every SQL statement of the project is in this package (ARCHITECTURE.md, "Rooms"): tables
(``models``), engines and ``open_store`` (``engine``), migrations (``migrate``, ``schema``),
state machines with their only writers (``jobs``, ``nodes``), the manager's writes
(``attempts``, ``decisions``, ``lock``), one read model (``read``, ``chunks``), topic reads
(``epochs``, ``profiles``, ``readings``, ``window``), people's writes (``submissions``,
``lookup``), the agent's side (``registry``, ``faults``, ``samples``), ``retention`` and
``accounts`` (MariaDB privileges).

The names below are imported on first use (PEP 562): ``import andreas.store.samples``
runs this file first, and the node agent, which writes through the Core tables
(``tables``), must not load the ORM (``models``, ``jobs``, ``retention``) that it never
uses (its resident memory stays small).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from andreas.store.engine import Store, make_engine, parse_url
    from andreas.store.opener import open_store
    from andreas.store.errors import (InvalidTransition, SchemaError, StoreError,
                                      StoreUnavailable, TransitionConflict)
    from andreas.store.jobs import ALLOWED, TERMINAL, transition
    from andreas.store.models import (AppModel, AppProfile, Base, Decision, EnergySource,
                                      EpochEvent, Gpu, GpuGap, HostMinute, HostSample, Job,
                                      JobAttempt, JobEnergy, JobState, Node, NodeState,
                                      PowerMinute, PowerSample, PowerSource)
    from andreas.store.retention import RetentionResult, downsample, rebuild_minutes
    from andreas.store.samples import (GapRow, HostRow, JobEnergyRow, NodePower, PowerRow,
                                       gpu_energy_mj, insert_epoch_events,
                                       insert_gpu_gaps, insert_host_samples, insert_job_energy,
                                       insert_power_samples, mean_node_power, mean_power_table)

__all__ = [
    "ALLOWED", "TERMINAL", "AppModel", "AppProfile", "Base", "Decision", "EnergySource",
    "EpochEvent",
    "GapRow", "Gpu", "GpuGap", "HostMinute", "HostRow", "HostSample", "InvalidTransition", "Job",
    "JobAttempt", "JobEnergy", "JobEnergyRow", "JobState", "Node", "NodePower", "NodeState",
    "PowerMinute", "PowerRow", "PowerSample", "PowerSource", "RetentionResult", "SchemaError",
    "Store", "StoreError", "StoreUnavailable", "TransitionConflict", "downsample",
    "gpu_energy_mj", "insert_epoch_events", "insert_gpu_gaps",
    "insert_host_samples", "insert_job_energy", "insert_power_samples", "make_engine",
    "mean_node_power", "mean_power_table", "open_store", "parse_url", "rebuild_minutes",
    "transition",
]

_WHERE = {
    "engine": ("Store", "make_engine", "parse_url"),
    "opener": ("open_store",),
    "errors": ("InvalidTransition", "SchemaError", "StoreError", "StoreUnavailable",
               "TransitionConflict"),
    "jobs": ("ALLOWED", "TERMINAL", "transition"),
    "models": ("AppModel", "AppProfile", "Base", "Decision", "EnergySource", "EpochEvent", "Gpu",
               "GpuGap", "HostMinute", "HostSample", "Job", "JobAttempt", "JobEnergy",
               "JobState", "Node", "NodeState", "PowerMinute", "PowerSample", "PowerSource"),
    "retention": ("RetentionResult", "downsample", "rebuild_minutes"),
    "samples": ("GapRow", "HostRow", "JobEnergyRow", "NodePower", "PowerRow", "gpu_energy_mj",
                "insert_epoch_events", "insert_gpu_gaps", "insert_host_samples",
                "insert_job_energy", "insert_power_samples", "mean_node_power",
                "mean_power_table"),
}
_MODULE = {name: module for module, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE))

