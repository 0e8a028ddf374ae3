"""Delivery entries: the agent's records as plain JSON-ready dicts.

Why a second form of the records: entries cross the spool file (a crash and a restart may
separate writing from reading), so they must be plain data, stable across versions of
the agent, and carry what the store needs that the record does not (how many of the
node's GPUs were busy). They are keyed by GPU UUID, never by a database id, so an agent
that starts while the database is down can spool before it has registered its GPUs.

Kinds (:class:`EntryKind`, written as its value): ``gpu`` (GpuSample), ``gap`` (GpuGap),
``host`` (HostSample), ``epoch`` (EpochRecord), ``job_energy`` (JobEnergy), ``agent_gap``
(AgentGap) and ``heartbeat`` (never spooled: only the latest one matters).
"""

from __future__ import annotations

import enum
from dataclasses import fields
from typing import Any

from agents.records import AgentGap, EpochRecord, GpuGap, GpuSample, HostSample, JobEnergy

Entry = dict[str, Any]


class EntryKind(enum.StrEnum):
    """An entry's ``kind``: which store rows it becomes (its value is the spooled text)."""

    GPU = "gpu"
    GAP = "gap"
    HOST = "host"
    EPOCH = "epoch"
    JOB_ENERGY = "job_energy"
    AGENT_GAP = "agent_gap"
    HEARTBEAT = "heartbeat"


KINDS = {GpuSample: EntryKind.GPU, GpuGap: EntryKind.GAP, HostSample: EntryKind.HOST,
         EpochRecord: EntryKind.EPOCH, JobEnergy: EntryKind.JOB_ENERGY,
         AgentGap: EntryKind.AGENT_GAP}
HEARTBEAT = EntryKind.HEARTBEAT


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def to_entry(record: Any, *, busy_gpus: int | None = None) -> Entry:
    """The entry of a record; ``busy_gpus`` (the node's GPUs busy with jobs at that time)
    goes with GPU and host samples, whose store rows are grouped by it."""
    kind = KINDS.get(type(record))
    if kind is None:
        raise TypeError(f"no delivery entry for {type(record).__name__}")
    entry: Entry = {"kind": kind.value}
    for f in fields(record):
        entry[f.name] = _plain(getattr(record, f.name))
    if kind in (EntryKind.GPU, EntryKind.HOST):
        entry["busy_gpus"] = int(busy_gpus or 0)
    return entry


def heartbeat(t: float) -> Entry:
    return {"kind": HEARTBEAT.value, "t": float(t)}
