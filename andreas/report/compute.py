"""The report's figures from the rows of :func:`andreas.report.read.read_window`: pure.

Rows per job, per node and per period (UTC day / ISO week), and the totals. The
definitions are in the package docstring (:mod:`andreas.report`); in short, for a window:

- node energy = Σ of the node's minute aggregates (GPU + host mJ), pro-rated at the edges;
- job energy  = Σ of the job's ``job_energy`` windows, pro-rated at the edges;
- unattributed = node energy − jobs' energy (idle and unattributed; may be slightly
  negative where attribution windows and minutes disagree at the edges: shown as is);
- energy cost = kWh × PUE × price, or with a tariff each minute's (each window's) kWh ×
  price(t) · PUE(t) over its time (:meth:`andreas.accounting.Prices.bill`);
- tardiness = weight × seconds late within the window;
- a job's actual cost = its energy cost + its tardiness; its predicted cost is
  ``jobs.predicted_cost`` (the plan's prediction when it was first placed);
  ``deviation_pct`` = (predicted − actual) / predicted, only when the window holds the
  job's whole life (submitted and finished inside it), as the paper's Table III defines it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from andreas.accounting import MJ_PER_KWH, Prices, late_s, spread
from andreas.report.read import AttemptInfo, EnergyWindow, JobInfo, NodeMinute, ReportData
from andreas.report.window import Window, overlap_s, periods

T = TypeVar("T")
K = TypeVar("K")

MINUTE_S = 60.0
_TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True, kw_only=True)
class JobRow:
    job: str
    state: str
    application: str
    nodes: str                          # where it ran in the window, comma-separated
    submit_s: float
    due_s: float
    end_s: float | None                 # finished jobs: the end; None while active
    energy_kwh: float
    energy_cost: float
    tardiness_s: float                  # late seconds within the window
    tardiness_cost: float
    gpu_hours: float
    predicted_cost: float | None        # at submission (jobs.predicted_cost)
    actual_cost: float                  # energy cost + tardiness cost
    deviation_pct: float | None         # (predicted - actual) / predicted, whole life only
    co2_kg: float | None


@dataclass(frozen=True, kw_only=True)
class NodeRow:
    node: str
    gpu_type: str
    gpus: int
    energy_kwh: float                   # GPU + host, idle included
    gpu_energy_kwh: float
    host_energy_kwh: float
    jobs_energy_kwh: float
    unattributed_energy_kwh: float
    energy_cost: float
    gpu_hours: float
    busy_share: float                   # gpu_hours / (gpus x window hours)
    mean_power_w: float | None          # energy / minutes with samples
    measured_minutes: int
    samples_without_energy: int
    co2_kg: float | None


@dataclass(frozen=True, kw_only=True)
class PeriodRow:
    period: str
    start_s: float
    end_s: float
    energy_kwh: float
    jobs_energy_kwh: float
    unattributed_energy_kwh: float
    energy_cost: float
    tardiness_cost: float
    total_cost: float
    gpu_hours: float
    jobs: int                           # jobs with energy, GPU time or tardiness in it
    co2_kg: float | None


@dataclass(frozen=True, kw_only=True)
class Totals:
    energy_kwh: float                   # nodes: the integral of the samples
    jobs_energy_kwh: float              # Σ per-job energy
    unattributed_energy_kwh: float      # energy - jobs' energy
    energy_cost: float                  # all nodes' energy x PUE x price
    jobs_energy_cost: float
    tardiness_cost: float
    total_cost: float                   # energy cost + tardiness cost
    gpu_hours: float
    predicted_cost: float               # Σ jobs' predicted cost where known
    jobs: int
    nodes: int
    co2_kg: float | None


@dataclass(frozen=True, kw_only=True)
class GapRow:
    """A node's agent was not sampling: charged from the GPUs' counters, or a hole."""

    node: str
    start_s: float
    end_s: float
    seconds: float
    charged: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class Report:
    window: Window
    prices: Prices
    jobs: tuple[JobRow, ...]
    nodes: tuple[NodeRow, ...]
    totals: Totals
    gaps: tuple[GapRow, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.jobs and not any(n.measured_minutes for n in self.nodes)


def minute_energy_mj(minutes: Iterable[NodeMinute], start_s: float, end_s: float) -> float:
    """GPU + host energy of the minutes in [start, end), pro-rated at the edges."""
    return sum((m.gpu_energy_mj + m.host_energy_mj)
               * overlap_s(m.minute_s, m.minute_s + MINUTE_S, start_s, end_s) / MINUTE_S
               for m in minutes)


def minute_pieces(minutes: Iterable[NodeMinute], start_s: float, end_s: float
                  ) -> Iterator[tuple[float, float, float]]:
    """The minutes' GPU + host energy in [start, end) as billing pieces (kWh, t0, t1) for
    :meth:`Prices.bill`, pro-rated as :func:`minute_energy_mj`."""
    return spread(((m.gpu_energy_mj + m.host_energy_mj, m.minute_s, m.minute_s + MINUTE_S)
                   for m in minutes), start_s, end_s)


def window_pieces(windows: Iterable[EnergyWindow], start_s: float, end_s: float
                  ) -> Iterator[tuple[float, float, float]]:
    """Job-energy windows in [start, end) as billing pieces, pro-rated as
    :func:`window_energy_mj`."""
    return spread(((w.gpu_energy_mj + w.host_energy_mj, w.start_s, w.end_s) for w in windows),
                  start_s, end_s)


def window_energy_mj(windows: Iterable[EnergyWindow], start_s: float, end_s: float) -> float:
    """Energy of job-energy windows in [start, end), pro-rated at the edges."""
    total = 0.0
    for w in windows:
        e = w.gpu_energy_mj + w.host_energy_mj
        if w.end_s > w.start_s:
            total += e * overlap_s(w.start_s, w.end_s, start_s, end_s) / (w.end_s - w.start_s)
        elif start_s <= w.end_s < end_s:
            total += e
    return total


def job_end_s(job: JobInfo, attempts: Iterable[AttemptInfo]) -> float | None:
    """A finished job's end (its last attempt's end, else its last state change); None while
    it is active."""
    if job.state not in _TERMINAL:
        return None
    ends = [a.end_s for a in attempts if a.end_s is not None]
    return max(ends) if ends else job.state_changed_s


def tardiness_s(job: JobInfo, end_s: float | None, start_s: float, stop_s: float,
                now_s: float) -> float:
    """Seconds the job was late within [start, stop) (the rule: :func:`accounting.late_s`)."""
    return late_s(due_s=job.due_s, end_s=end_s, now_s=now_s, cancelled=job.state == "cancelled",
                  finished=job.state in _TERMINAL, start_s=start_s, stop_s=stop_s)


def gpu_hours(attempts: Iterable[AttemptInfo], start_s: float, stop_s: float,
              now_s: float) -> float:
    """GPU-hours of the attempts within [start, stop) (a running attempt up to now)."""
    return sum(a.gpus * overlap_s(a.start_s, a.end_s if a.end_s is not None else now_s,
                                  start_s, stop_s)
               for a in attempts if a.start_s is not None) / 3600.0


def group_by(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """``items`` in lists by ``key``, in their order."""
    out: dict[K, list[T]] = defaultdict(list)
    for item in items:
        out[key(item)].append(item)
    return out


def build_report(data: ReportData, prices: Prices) -> Report:
    """Rows per job and per node, and the totals, of the window ``data`` was read for."""
    w = data.window
    names = {n.id: n.name for n in data.nodes}
    energy_by_job = group_by(data.energy, lambda e: e.job_id)
    attempts_by_job = group_by(data.attempts, lambda a: a.job_id)
    jobs = []
    for j in data.jobs:
        attempts = attempts_by_job.get(j.id, [])
        windows = energy_by_job.get(j.id, [])
        end = job_end_s(j, attempts)
        kwh = window_energy_mj(windows, w.since_s, w.until_s) / MJ_PER_KWH
        late = tardiness_s(j, end, w.since_s, w.until_s, w.now_s)
        hours = gpu_hours(attempts, w.since_s, w.until_s, w.now_s)
        if kwh == 0 and late == 0 and hours == 0 and not w.since_s <= j.submit_s < w.until_s:
            continue                    # nothing of this job happened in the window
        ran_on = {names.get(a.node_id, f"#{a.node_id}") for a in attempts
                  if a.node_id is not None and a.start_s is not None
                  and overlap_s(a.start_s, a.end_s if a.end_s is not None else w.now_s,
                                w.since_s, w.until_s) > 0}
        ran_on |= {names.get(e.node_id, f"#{e.node_id}") for e in windows}
        energy_cost = prices.bill(kwh, window_pieces(windows, w.since_s, w.until_s))
        actual = energy_cost + j.weight * late
        whole = w.since_s <= j.submit_s and end is not None and end <= w.until_s
        deviation = (100.0 * (j.predicted_cost - actual) / j.predicted_cost
                     if whole and j.predicted_cost else None)
        jobs.append(JobRow(
            job=j.id, state=j.state, application=j.application, nodes=",".join(sorted(ran_on)),
            submit_s=j.submit_s, due_s=j.due_s, end_s=end, energy_kwh=kwh,
            energy_cost=energy_cost, tardiness_s=late, tardiness_cost=j.weight * late,
            gpu_hours=hours, predicted_cost=j.predicted_cost, actual_cost=actual,
            deviation_pct=deviation, co2_kg=prices.co2_kg(kwh)))
    nodes = node_rows(data, prices)
    gaps = tuple(GapRow(node=names.get(g.node_id, f"#{g.node_id}"), start_s=g.start_s,
                        end_s=g.end_s, seconds=g.end_s - g.start_s, charged=g.charged,
                        reason=g.reason) for g in data.gaps)
    return Report(window=w, prices=prices, jobs=tuple(jobs), nodes=nodes,
                  totals=totals(jobs, nodes, prices), gaps=gaps)


def node_rows(data: ReportData, prices: Prices) -> tuple[NodeRow, ...]:
    w = data.window
    minutes = group_by(data.minutes, lambda m: m.node_id)
    energy = group_by(data.energy, lambda e: e.node_id)
    attempts = group_by(data.attempts, lambda a: a.node_id)
    out = []
    for n in data.nodes:
        mine = [m for m in minutes.get(n.id, ())
                if overlap_s(m.minute_s, m.minute_s + MINUTE_S, w.since_s, w.until_s) > 0]
        gpu_mj = sum(m.gpu_energy_mj * _share(m, w) for m in mine)
        host_mj = sum(m.host_energy_mj * _share(m, w) for m in mine)
        kwh = (gpu_mj + host_mj) / MJ_PER_KWH
        jobs_kwh = window_energy_mj(energy.get(n.id, ()), w.since_s, w.until_s) / MJ_PER_KWH
        hours = gpu_hours(attempts.get(n.id, ()), w.since_s, w.until_s, w.now_s)
        measured_h = sum(_share(m, w) for m in mine) / 60.0
        out.append(NodeRow(
            node=n.name, gpu_type=n.gpu_type, gpus=n.gpu_count, energy_kwh=kwh,
            gpu_energy_kwh=gpu_mj / MJ_PER_KWH, host_energy_kwh=host_mj / MJ_PER_KWH,
            jobs_energy_kwh=jobs_kwh, unattributed_energy_kwh=kwh - jobs_kwh,
            energy_cost=prices.bill(kwh, minute_pieces(mine, w.since_s, w.until_s)),
            gpu_hours=hours,
            busy_share=hours / (n.gpu_count * w.hours) if n.gpu_count else 0.0,
            mean_power_w=kwh * 1000.0 / measured_h if measured_h else None,
            measured_minutes=len(mine),
            samples_without_energy=sum(m.samples_without_energy for m in mine),
            co2_kg=prices.co2_kg(kwh)))
    return tuple(out)


def totals(jobs: Iterable[JobRow], nodes: Iterable[NodeRow], prices: Prices) -> Totals:
    """Totals: energy from the nodes (the samples), job figures summed from the job rows."""
    jobs, nodes = list(jobs), list(nodes)
    kwh = sum(n.energy_kwh for n in nodes)
    jobs_kwh = sum(j.energy_kwh for j in jobs)
    tard = sum(j.tardiness_cost for j in jobs)
    energy_cost = prices.total(kwh, (n.energy_cost for n in nodes))
    return Totals(energy_kwh=kwh, jobs_energy_kwh=jobs_kwh, unattributed_energy_kwh=kwh - jobs_kwh,
                  energy_cost=energy_cost, jobs_energy_cost=sum(j.energy_cost for j in jobs),
                  tardiness_cost=tard, total_cost=energy_cost + tard,
                  gpu_hours=sum(j.gpu_hours for j in jobs),
                  predicted_cost=sum(j.predicted_cost for j in jobs
                                     if j.predicted_cost is not None),
                  jobs=len(jobs), nodes=len(nodes), co2_kg=prices.co2_kg(kwh))


def period_rows(data: ReportData, prices: Prices, kind: str) -> tuple[PeriodRow, ...]:
    """One row per UTC day or ISO week of the window; they add up to the totals."""
    w = data.window
    by_job = group_by(data.attempts, lambda a: a.job_id)
    ends = {j.id: job_end_s(j, by_job.get(j.id, ())) for j in data.jobs}
    out = []
    for p in periods(w, kind):
        kwh = minute_energy_mj(data.minutes, p.start_s, p.end_s) / MJ_PER_KWH
        per_job: defaultdict[str, float] = defaultdict(float)
        for e in data.energy:
            per_job[e.job_id] += window_energy_mj((e,), p.start_s, p.end_s)
        jobs_kwh = sum(per_job.values()) / MJ_PER_KWH
        tard = 0.0
        hours = 0.0
        active = {k for k, v in per_job.items() if v > 0}
        for j in data.jobs:
            late = tardiness_s(j, ends[j.id], p.start_s, p.end_s, w.now_s)
            h = gpu_hours(by_job.get(j.id, ()), p.start_s, p.end_s, w.now_s)
            tard += j.weight * late
            hours += h
            if late > 0 or h > 0:
                active.add(j.id)
        cost = prices.bill(kwh, minute_pieces(data.minutes, p.start_s, p.end_s))
        out.append(PeriodRow(period=p.label, start_s=p.start_s, end_s=p.end_s, energy_kwh=kwh,
                             jobs_energy_kwh=jobs_kwh, unattributed_energy_kwh=kwh - jobs_kwh,
                             energy_cost=cost, tardiness_cost=tard,
                             total_cost=cost + tard, gpu_hours=hours,
                             jobs=len(active), co2_kg=prices.co2_kg(kwh)))
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class PowerSeries:
    node: str
    t_s: tuple[float, ...]
    power_w: tuple[float, ...]


def power_series(data: ReportData, max_points: int = 1500) -> tuple[PowerSeries, ...]:
    """Mean node power (GPUs + host) over time for the plots, in buckets of whole minutes
    so that the measured part of the window (not the whole window: an hour of samples in
    a 7-day window is 60 points, not one) keeps at most ``max_points`` points per node."""
    w = data.window
    measured = [m for m in data.minutes if w.since_s - MINUTE_S < m.minute_s < w.until_s
                and (m.gpu_power_w is not None or m.host_power_w is not None)]
    if not measured:
        return ()
    first = min(m.minute_s for m in measured)
    minutes_in = max(1, int((max(m.minute_s for m in measured) - first) // MINUTE_S) + 1)
    bucket_s = MINUTE_S * max(1, -(-minutes_in // max_points))
    names = {n.id: n.name for n in data.nodes}
    acc: dict[int, dict[float, list[float]]] = defaultdict(dict)
    for m in measured:
        b = first + (m.minute_s - first) // bucket_s * bucket_s
        cell = acc[m.node_id].setdefault(b, [0.0, 0])
        cell[0] += (m.gpu_power_w or 0.0) + (m.host_power_w or 0.0)
        cell[1] += 1
    return tuple(PowerSeries(node=names.get(n, f"#{n}"), t_s=tuple(sorted(cells)),
                             power_w=tuple(cells[b][0] / cells[b][1] for b in sorted(cells)))
                 for n, cells in sorted(acc.items(), key=lambda kv: names.get(kv[0], "")))


def _share(m: NodeMinute, w: Window) -> float:
    return overlap_s(m.minute_s, m.minute_s + MINUTE_S, w.since_s, w.until_s) / MINUTE_S

