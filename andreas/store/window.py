"""What one report window reads of the measurements: node minutes (the 1-minute
aggregates summed per node), the ``job_energy`` windows, the jobs alive in the window, and
the raw samples of short slots (see :mod:`andreas.report.read` for why each)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import distinct, func, or_, select

from andreas.store.chunks import chunks
from andreas.store.jobs import TERMINAL
from andreas.store.models import (Gpu, HostMinute, HostSample, Job, JobAttempt, JobEnergy,
                                  PowerMinute, PowerSample)
from andreas.store.nodes import Db
from andreas.store.tables import agent_gaps as AgentGaps

MINUTE_S = 60.0
CHUNK = 500                  # GPU and node ids per IN-clause (several per raw-sample run)


@dataclass(frozen=True, kw_only=True)
class NodeMinute:
    """One node's samples in one minute [minute_s, minute_s + 60)."""

    node_id: int
    minute_s: float
    gpu_energy_mj: int
    host_energy_mj: int
    gpu_power_w: float | None          # Σ over the node's GPUs of their mean power
    host_power_w: float | None
    samples: int                       # GPU + host samples
    samples_without_energy: int        # samples whose energy is unknown (not in the sums)


@dataclass(frozen=True, kw_only=True)
class EnergyWindow:
    """A ``job_energy`` row: energy attributed to a job over [end_s - interval, end_s)."""

    job_id: str
    node_id: int
    start_s: float
    end_s: float
    gpu_energy_mj: int
    host_energy_mj: int


@dataclass(frozen=True, kw_only=True)
class AgentGapInfo:
    """An ``agent_gaps`` row: the node's agent was not sampling in [start_s, end_s]."""

    node_id: int
    start_s: float
    end_s: float
    charged: bool                      # its GPUs' energy came from their counters
    reason: str


def agent_gaps(s: Db, since: float, until: float) -> tuple[AgentGapInfo, ...]:
    """The agents' gaps that meet [since, until), by time."""
    return tuple(
        AgentGapInfo(node_id=n, start_s=float(a), end_s=float(b), charged=bool(c), reason=r)
        for n, a, b, c, r in s.execute(
            select(AgentGaps.c.node_id, AgentGaps.c.start_s, AgentGaps.c.end_s,
                   AgentGaps.c.charged, AgentGaps.c.reason)
            .where(AgentGaps.c.end_s >= since, AgentGaps.c.start_s < until)
            .order_by(AgentGaps.c.start_s, AgentGaps.c.node_id)))


def energy_windows(s: Db, since: float, until: float) -> tuple[EnergyWindow, ...]:
    """The ``job_energy`` rows whose interval meets [since, until), by time and job."""
    return tuple(
        EnergyWindow(job_id=j, node_id=n, start_s=float(t) - float(dt), end_s=float(t),
                     gpu_energy_mj=int(g or 0), host_energy_mj=int(h or 0))
        for j, n, t, dt, g, h in s.execute(
            select(JobEnergy.job_id, JobEnergy.node_id, JobEnergy.t, JobEnergy.interval_s,
                   JobEnergy.gpu_energy_mj, JobEnergy.host_energy_mj)
            .where(JobEnergy.t > since, JobEnergy.t - JobEnergy.interval_s < until)
            .order_by(JobEnergy.t, JobEnergy.job_id)))


def jobs_in_window(s: Db, since: float, until: float, also: Iterable[str] = ()) -> list[str]:
    """Ids of the jobs submitted before ``until`` that were alive in the window (not
    finished, or finished after ``since``), that ran in it, or that are in ``also``."""
    ran = set(s.execute(
        select(JobAttempt.job_id).distinct()
        .where(JobAttempt.start_s < until,
               or_(JobAttempt.end_s.is_(None), JobAttempt.end_s > since))).scalars())
    alive = select(Job.id).where(Job.submit_s < until, or_(
        Job.state.not_in(TERMINAL), func.coalesce(Job.state_changed_s, Job.submit_s) >= since))
    return sorted(set(s.execute(alive).scalars()) | ran | set(also))


def raw_energy(s: Db, intervals: Sequence[tuple[float, float]]
               ) -> dict[int, tuple[tuple[float, ...], tuple[int, ...]]]:
    """Node id -> (sample times, GPU + host mJ) of the raw samples in the intervals, by
    time (a sample at t covers (t_prev, t]; samples without energy are left out)."""
    gpus = dict(s.execute(select(Gpu.id, Gpu.node_id)).all())
    nodes = sorted(set(gpus.values()))
    per: dict[int, list[tuple[float, int]]] = {}
    for a, b in intervals:
        for chunk in chunks(sorted(gpus), CHUNK):
            for gpu_id, t, mj in s.execute(
                    select(PowerSample.gpu_id, PowerSample.t, PowerSample.energy_mj)
                    .where(PowerSample.gpu_id.in_(chunk), PowerSample.t > a, PowerSample.t <= b,
                           PowerSample.energy_mj.is_not(None))):
                # cast: the query excludes NULL energy
                per.setdefault(gpus[gpu_id], []).append((float(t), int(cast(int, mj))))
        for chunk in chunks(nodes, CHUNK):
            for node_id, t, mj in s.execute(
                    select(HostSample.node_id, HostSample.t, HostSample.energy_mj)
                    .where(HostSample.node_id.in_(chunk), HostSample.t > a, HostSample.t <= b,
                           HostSample.energy_mj.is_not(None))):
                # cast: the query excludes NULL energy
                per.setdefault(node_id, []).append((float(t), int(cast(int, mj))))
    out = {}
    for node_id, rows in per.items():
        rows.sort()
        out[node_id] = (tuple(t for t, _ in rows), tuple(mj for _, mj in rows))
    return out


def node_minutes(s: Db, since: float, until: float) -> tuple[NodeMinute, ...]:
    """Per (node, minute) sums of the GPU and host minute aggregates that meet
    [since, until), by node and minute."""
    M, H = PowerMinute, HostMinute
    gpu = s.execute(
        select(M.node_id, M.minute_s, func.sum(M.energy_mj), func.sum(M.samples),
               func.sum(M.energy_samples), func.sum(M.power_sum_w), func.count(distinct(M.gpu_id)))
        .where(M.minute_s > since - MINUTE_S, M.minute_s < until)
        .group_by(M.node_id, M.minute_s))
    host = s.execute(
        select(H.node_id, H.minute_s, func.sum(H.energy_mj), func.sum(H.samples),
               func.sum(H.energy_samples), func.sum(H.host_power_sum_w),
               func.sum(H.host_power_samples))
        .where(H.minute_s > since - MINUTE_S, H.minute_s < until)
        .group_by(H.node_id, H.minute_s))
    acc: dict[tuple[int, float], dict[str, Any]] = {}
    for n, m, e, count, e_count, p_sum, gpus in gpu:
        count = int(count or 0)
        acc[(int(n), float(m))] = {
            "gpu_energy_mj": int(e or 0), "samples": count,
            "samples_without_energy": count - int(e_count or 0),
            "gpu_power_w": float(p_sum) / count * int(gpus) if count else None}
    for n, m, e, count, e_count, p_sum, p_count in host:
        a = acc.setdefault((int(n), float(m)), {"gpu_energy_mj": 0, "samples": 0,
                                                "samples_without_energy": 0,
                                                "gpu_power_w": None})
        count = int(count or 0)
        a["host_energy_mj"] = int(e or 0)
        a["samples"] += count
        a["samples_without_energy"] += count - int(e_count or 0)
        a["host_power_w"] = float(p_sum) / int(p_count) if p_count else None
    return tuple(NodeMinute(node_id=n, minute_s=m, gpu_energy_mj=a["gpu_energy_mj"],
                            host_energy_mj=a.get("host_energy_mj", 0),
                            gpu_power_w=a["gpu_power_w"], host_power_w=a.get("host_power_w"),
                            samples=a["samples"],
                            samples_without_energy=a["samples_without_energy"])
                 for (n, m), a in sorted(acc.items()))
