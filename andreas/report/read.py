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
- the agents' gaps (``agent_gaps``: time an agent was not sampling, charged from the
  GPUs' energy counters or not) that meet the window;
- raw samples (``power_samples``, ``host_samples``: energy since the previous sample, so a
  sample at t belongs to (t_prev, t]) for the *short* validation slots only (under
  :data:`RAW_SLOT_MAX_S`), where minute aggregates are too coarse: a 5-second slot would
  otherwise see the mean of its whole minute. One query per table and run of adjacent
  short slots, on the primary keys ((gpu_id, t), (node_id, t)) with an IN list, so only
  those seconds are read. After the retention job deleted them, the minutes are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from andreas.report.window import Window
from andreas.store.decisions import DecisionInfo, decisions_between
from andreas.store.engine import Store
from andreas.store.read import AttemptView, JobView, load_jobs, load_nodes
from andreas.store.window import (AgentGapInfo, EnergyWindow, NodeMinute, agent_gaps,
                                  energy_windows, jobs_in_window, node_minutes, raw_energy)

RAW_SLOT_MAX_S = 600.0


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    id: int
    name: str
    gpu_type: str
    gpu_count: int


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
    gaps: tuple[AgentGapInfo, ...] = ()


def read_window(store: Store, window: Window, *, decisions: bool = True) -> ReportData:
    """All rows the report of ``window`` needs (see the module docstring)."""
    since, until = window.since_s, window.until_s
    with store.session() as s:
        nodes = tuple(NodeInfo(id=n.id, name=n.name, gpu_type=n.gpu_type, gpu_count=n.gpu_count)
                      for n in load_nodes(s).values())
        minutes = node_minutes(s, since, until)
        energy = energy_windows(s, since, until)
        jobs = load_jobs(s, ids=jobs_in_window(s, since, until, {e.job_id for e in energy}))
        found = decisions_between(s, since, until) if decisions else ()
        intervals = short_slot_runs([d.t_s for d in found], min(until, window.now_s))
        raw = raw_energy(s, intervals) if intervals else {}
        gaps = agent_gaps(s, since, until)
    return ReportData(window=window, nodes=nodes, minutes=minutes, energy=energy,
                      jobs=tuple(sorted((_job(j) for j in jobs.values()),
                                        key=lambda j: (j.submit_s, j.id))),
                      attempts=tuple(_attempt(a) for j in sorted(jobs) for a in jobs[j].attempts),
                      decisions=found, raw=raw, raw_intervals=tuple(intervals), gaps=gaps)


def _job(j: JobView) -> JobInfo:
    return JobInfo(id=j.id, state=j.state.value, application=j.application, submit_s=j.submit_s,
                   due_s=j.due_s, weight=j.weight, state_changed_s=j.state_changed_s,
                   predicted_cost=j.predicted_cost)


def _attempt(a: AttemptView) -> AttemptInfo:
    return AttemptInfo(job_id=a.job_id, attempt=a.attempt, node_id=a.node_id,
                       gpus=len(a.gpu_ids), start_s=a.start_s, end_s=a.end_s)


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
