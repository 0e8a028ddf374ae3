"""The report's one read of the store: every row a window needs, as plain frozen rows.

Reading once (in one transaction) and computing afterwards keeps the figures of one
report consistent with each other and the computation testable without a database.

What is read for [since, until):

- every node (a node without samples still shows, with no energy);
- node minutes: ``power_minutes`` and ``host_minutes`` summed per (node, minute) for the
  minutes that meet the window; GPU power = Σ power / samples × GPUs seen (exact when a
  node's GPUs are sampled at the same instants, as the agent does);
- ``job_energy`` windows that meet the window (GPU + host mJ; NULL parts add nothing);
- jobs submitted before ``until`` that were alive in the window (not finished, or finished
  after ``since``) or have energy or attempts in it, with *all* their attempts (the end of
  a job is its last attempt's end);
- decisions with ``t`` in the window, with their plan documents (validation);
- raw samples (``power_samples``, ``host_samples``: energy since the previous sample, so a
  sample at t belongs to (t_prev, t]) for the *short* validation slots only (under
  :data:`RAW_SLOT_MAX_S`), where minute aggregates are too coarse: a 5-second slot would
  otherwise see the mean of its whole minute. One query per table and run of adjacent
  short slots, on the primary keys ((gpu_id, t), (node_id, t)) with an IN list, so only
  those seconds are read. After the retention job deleted them, the minutes are used.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import distinct, func, or_, select

from andreas.report.window import Window
from andreas.store.engine import Store
from andreas.store.jobs import TERMINAL
from andreas.store.models import (Decision, Gpu, HostMinute, HostSample, Job, JobAttempt,
                                  JobEnergy, Node, PowerMinute, PowerSample)

MINUTE_S = 60.0
RAW_SLOT_MAX_S = 600.0
_CHUNK = 500


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    id: int
    name: str
    gpu_type: str
    gpu_count: int


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
class AttemptInfo:
    job_id: str
    attempt: int
    node_id: int | None
    gpus: int
    start_s: float | None
    end_s: float | None


@dataclass(frozen=True, kw_only=True)
class JobInfo:
    id: str
    state: str
    application: str
    submit_s: float
    due_s: float
    weight: float                      # penalty per second past the due date
    state_changed_s: float | None
    predicted_cost: float | None       # jobs.predicted_cost, at submission


@dataclass(frozen=True, kw_only=True)
class DecisionInfo:
    id: int
    t_s: float
    trigger: str
    policy: str
    plan: Mapping[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class ReportData:
    window: Window
    nodes: tuple[NodeInfo, ...]
    minutes: tuple[NodeMinute, ...]
    energy: tuple[EnergyWindow, ...]
    jobs: tuple[JobInfo, ...]
    attempts: tuple[AttemptInfo, ...]
    decisions: tuple[DecisionInfo, ...]
    # node id -> (sample times, GPU + host mJ) in the short slots' seconds; see module doc
    raw: Mapping[int, tuple[tuple[float, ...], tuple[int, ...]]] = field(default_factory=dict)
    raw_intervals: tuple[tuple[float, float], ...] = ()


def read_window(store: Store, window: Window, *, decisions: bool = True) -> ReportData:
    """All rows the report of ``window`` needs (see the module docstring)."""
    since, until = window.since_s, window.until_s
    with store.session() as s:
        nodes = tuple(NodeInfo(id=i, name=n, gpu_type=t, gpu_count=c) for i, n, t, c in s.execute(
            select(Node.id, Node.name, Node.gpu_type, Node.gpu_count).order_by(Node.name)))
        minutes = _minutes(s, since, until)
        energy = tuple(
            EnergyWindow(job_id=j, node_id=n, start_s=float(t) - float(dt), end_s=float(t),
                         gpu_energy_mj=int(g or 0), host_energy_mj=int(h or 0))
            for j, n, t, dt, g, h in s.execute(
                select(JobEnergy.job_id, JobEnergy.node_id, JobEnergy.t, JobEnergy.interval_s,
                       JobEnergy.gpu_energy_mj, JobEnergy.host_energy_mj)
                .where(JobEnergy.t > since, JobEnergy.t - JobEnergy.interval_s < until)
                .order_by(JobEnergy.t, JobEnergy.job_id)))
        in_window = set(s.execute(
            select(JobAttempt.job_id).distinct()
            .where(JobAttempt.start_s < until,
                   or_(JobAttempt.end_s.is_(None), JobAttempt.end_s > since))).scalars())
        in_window |= {e.job_id for e in energy}
        alive = select(Job.id).where(Job.submit_s < until, or_(
            Job.state.not_in(TERMINAL), func.coalesce(Job.state_changed_s, Job.submit_s) >= since))
        ids = sorted(set(s.execute(alive).scalars()) | in_window)
        jobs: list[JobInfo] = []
        attempts: list[AttemptInfo] = []
        for chunk in _chunks(ids):
            jobs.extend(JobInfo(id=r.id, state=r.state.value, application=r.application,
                                submit_s=r.submit_s, due_s=r.due_s, weight=r.weight,
                                state_changed_s=r.state_changed_s,
                                predicted_cost=r.predicted_cost)
                        for r in s.execute(select(
                            Job.id, Job.state, Job.application, Job.submit_s, Job.due_s,
                            Job.weight, Job.state_changed_s, Job.predicted_cost)
                            .where(Job.id.in_(chunk))))
            attempts.extend(AttemptInfo(job_id=r.job_id, attempt=r.attempt, node_id=r.node_id,
                                        gpus=len(r.gpu_ids or ()), start_s=r.start_s,
                                        end_s=r.end_s)
                            for r in s.execute(select(
                                JobAttempt.job_id, JobAttempt.attempt, JobAttempt.node_id,
                                JobAttempt.gpu_ids, JobAttempt.start_s, JobAttempt.end_s)
                                .where(JobAttempt.job_id.in_(chunk))))
        found = ()
        if decisions:
            found = tuple(DecisionInfo(id=i, t_s=float(t), trigger=tr, policy=p,
                                       plan=plan if isinstance(plan, Mapping) else None)
                          for i, t, tr, p, plan in s.execute(
                              select(Decision.id, Decision.t, Decision.trigger, Decision.policy,
                                     Decision.plan)
                              .where(Decision.t >= since, Decision.t < until)
                              .order_by(Decision.t, Decision.id)))
        intervals = short_slot_runs([d.t_s for d in found], min(until, window.now_s))
        raw = _raw_energy(s, intervals) if intervals else {}
    return ReportData(window=window, nodes=nodes, minutes=minutes, energy=energy,
                      jobs=tuple(sorted(jobs, key=lambda j: (j.submit_s, j.id))),
                      attempts=tuple(sorted(attempts, key=lambda a: (a.job_id, a.attempt))),
                      decisions=found, raw=raw, raw_intervals=tuple(intervals))


def short_slot_runs(starts: list[float], end_s: float) -> list[tuple[float, float]]:
    """Runs of adjacent slots shorter than RAW_SLOT_MAX_S, merged: [(start, end), ...]."""
    edges = [*starts, end_s] if starts else []
    runs: list[tuple[float, float]] = []
    for a, b in zip(edges, edges[1:]):
        if 0 < b - a < RAW_SLOT_MAX_S:
            if runs and runs[-1][1] == a:
                runs[-1] = (runs[-1][0], b)
            else:
                runs.append((a, b))
    return runs


def _raw_energy(s, intervals: list[tuple[float, float]]
                ) -> dict[int, tuple[tuple[float, ...], tuple[int, ...]]]:
    gpus = dict(s.execute(select(Gpu.id, Gpu.node_id)).all())
    nodes = sorted(set(gpus.values()))
    per: dict[int, list[tuple[float, int]]] = {}
    for a, b in intervals:
        for chunk in _chunks(sorted(gpus)):
            for gpu_id, t, mj in s.execute(
                    select(PowerSample.gpu_id, PowerSample.t, PowerSample.energy_mj)
                    .where(PowerSample.gpu_id.in_(chunk), PowerSample.t > a, PowerSample.t <= b,
                           PowerSample.energy_mj.is_not(None))):
                per.setdefault(gpus[gpu_id], []).append((float(t), int(mj)))
        for chunk in _chunks(nodes):
            for node_id, t, mj in s.execute(
                    select(HostSample.node_id, HostSample.t, HostSample.energy_mj)
                    .where(HostSample.node_id.in_(chunk), HostSample.t > a, HostSample.t <= b,
                           HostSample.energy_mj.is_not(None))):
                per.setdefault(node_id, []).append((float(t), int(mj)))
    out = {}
    for node_id, rows in per.items():
        rows.sort()
        out[node_id] = (tuple(t for t, _ in rows), tuple(mj for _, mj in rows))
    return out


def _minutes(s, since: float, until: float) -> tuple[NodeMinute, ...]:
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


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]

