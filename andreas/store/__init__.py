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
"""

from andreas.store.engine import Store, make_engine, open_store, parse_url
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
