"""The accounts of a simulation: energy, money and time charged as the clock advances.

Between two events the engine hands the cluster's occupancy to :meth:`Accounts.charge`:
each node is charged its power with its busy GPUs (``power_w[busy]`` plus its jobs'
power-level changes, after the power-down if any) times PUE and price, the interval's
integral of price x PUE with a tariff (``costs.interval_cost``), or in the cloud its VM
price while it runs a job; each running attempt gets its share. Tardiness is charged at
completion, with the job's record. The totals are the figures of ``SimResult``. Keeping
them here leaves the engine with the clock and the events, and one place that says what
a simulated schedule costs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from andreas.costs import SECONDS_PER_HOUR, energy_cost, interval_cost
from andreas.model import GPU_MILLI, Energy, Job, Trace
from andreas.simulator.jobrun import JobRun
from andreas.simulator.powerdown import PowerDown
from andreas.simulator.results import JobRecord


class Accounts:
    """What the simulated schedule has cost so far, in total and per job."""

    def __init__(self, *, trace: Trace, bill: Energy) -> None:
        """``bill``: what the site pays (the trace's energy, with its tariff if any)."""
        from andreas.formats.snapshot import hardware

        self.cloud, self.bill = trace.cloud, bill
        self.catalog = {c.name: c for c in trace.catalog}
        self.hardware = hardware(trace.nodes, trace.catalog)
        n = len(trace.nodes)
        if not trace.cloud:
            width = max(node.gpus for node in trace.nodes) + 1
            self.power_w = np.zeros((n, width))
            for i, node in enumerate(trace.nodes):
                self.power_w[i, : node.gpus + 1] = node.power_w
        self.level_w = np.zeros(n)            # per node: its jobs' power levels' change of draw
        self.above_idle_j = 0.0               # energy busy nodes draw above power_w[0]
        self.energy_j = 0.0
        self.energy_cost = 0.0
        self.tardiness_cost = 0.0
        self.busy_gpu_s = 0.0
        self.alloc_milli_s = 0.0
        self.lost_work_s = 0.0                # work thrown away at stops, overheads paid
        self.records: list[JobRecord] = []
        self.curve: list[tuple[float, float, float]] = []
        # the scheduling window, from the first submission to the last start: (its end,
        # the milli-GPU-seconds allocated by then, the milli-GPU allocated right after)
        self.last_start: tuple[float, float, float] | None = None

    def charge(self, t0: float, t1: float, *, busy: np.ndarray, alloc_milli: np.ndarray,
               vm: list[str | None], runs: Iterable[JobRun],
               power_down: PowerDown | None) -> None:
        """Charge [t0, t1) with ``busy`` GPUs and ``alloc_milli`` milli-GPU held per node,
        cloud nodes configured as ``vm``; ``power_down``: when idle nodes switch off."""
        dt = t1 - t0
        if dt <= 0:
            return
        self.busy_gpu_s += float(busy.sum()) * dt
        self.alloc_milli_s += float(alloc_milli.sum()) * dt
        # with a tariff, money per joule drawn at constant power over [t0, t1)
        per_j = (interval_cost(1.0, t0, t1, self.bill)
                 if self.bill.tariff is not None and not self.cloud else None)
        if self.cloud:
            for i, name in enumerate(vm):
                if busy[i] > 0 and name is not None:
                    self.energy_cost += self.catalog[name].cost_per_hour * dt / SECONDS_PER_HOUR
            node_cost = None
        else:
            power = self.power_w[np.arange(len(busy)), busy] + self.level_w
            if power_down is not None:
                power = power_down.mean_power(power, busy, t0, dt)
            self.above_idle_j += float(np.where(busy > 0, power - self.power_w[:, 0],
                                                0.0).sum()) * dt
            joules = float(power.sum()) * dt
            self.energy_j += joules
            self.energy_cost += interval_cost(joules, t0, t1, self.bill)
            node_cost = power
        for run in runs:
            held = run.milli()
            share = held / alloc_milli[run.node]
            run.gpu_s += held / GPU_MILLI * dt
            run.run_s += dt
            run.solo_s += dt / run.slow
            if node_cost is None:
                name = vm[run.node]
                assert name is not None, f"cloud node {run.node} runs a job without a VM"
                run.cost += (self.catalog[name].cost_per_hour * dt / SECONDS_PER_HOUR
                             * share)
            else:
                joules = node_cost[run.node] * dt * share
                run.energy_j += joules
                if per_j is not None:
                    run.cost += joules * per_j

    def complete(self, run: JobRun, t: float) -> None:
        """``run`` ended at ``t``: charge its tardiness and keep its record."""
        tardy = max(0.0, t - run.spec.due_s)
        cost = run.spec.weight * tardy
        self.tardiness_cost += cost
        job_cost = (run.cost if self.cloud or self.bill.tariff is not None
                    else energy_cost(run.energy_j, self.bill))
        self.records.append(JobRecord(
            id=run.spec.id, app=run.spec.app, submit_s=run.spec.submit_s, due_s=run.spec.due_s,
            weight=run.spec.weight, epochs=run.spec.epochs, first_start_s=run.first_start_s,
            completion_s=t, tardiness_s=tardy, tardiness_cost=cost,
            energy_kwh=run.energy_j / 3.6e6, energy_cost=job_cost, gpu_seconds=run.gpu_s,
            starts=run.starts, preemptions=run.preemptions, run_s=run.run_s,
            ideal_s=self._ideal_s(run.spec),
            performance=run.solo_s / run.run_s if run.run_s > 0 else 1.0))

    def point(self, t: float) -> None:
        """The cumulative cost curve gets a point at event ``t``."""
        self.curve.append((t, self.energy_cost, self.tardiness_cost))

    def started(self, t: float, alloc_now: float) -> None:
        """An attempt started at ``t``; ``alloc_now``: the milli-GPU held after it."""
        self.last_start = (t, self.alloc_milli_s, alloc_now)

    def _ideal_s(self, job: Job) -> float:
        """Its run time alone on the fastest configuration the cluster offers (for slowdown)."""
        return min((job.epochs * t for gpu_type, times in job.epoch_time_s.items()
                    for g, t in enumerate(times[: self.hardware.get(gpu_type, 0)], start=1)
                    if job.runs_on(gpu_type, g)), default=math.inf)

    def totals(self, t0: float, t_end: float, capacity_milli: int) -> dict[str, Any]:
        """The ``SimResult`` figures these accounts hold, for a run over [t0, t_end] on
        ``capacity_milli`` milli-GPU."""
        records = self.records
        return dict(
            total_cost=self.energy_cost + self.tardiness_cost, energy_cost=self.energy_cost,
            tardiness_cost=self.tardiness_cost, energy_kwh=self.energy_j / 3.6e6,
            energy_above_idle_kwh=self.above_idle_j / 3.6e6,
            late_jobs=sum(r.tardiness_s > 0 for r in records),
            busy_gpu_seconds=self.busy_gpu_s, device_hours=self.busy_gpu_s / 3600.0,
            gpu_utilization=(self.alloc_milli_s / (capacity_milli * (t_end - t0))
                             if not self.cloud and t_end > t0 else math.nan),
            **self._scheduling_window(t0, capacity_milli),
            **_job_means(records), lost_work_s=self.lost_work_s,
            wait_s=sum(r.completion_s - r.submit_s - r.run_s for r in records),
            slow_s=sum(r.run_s - r.ideal_s for r in records),
            jobs=tuple(sorted(records, key=lambda r: r.id)), cost_curve=tuple(self.curve))

    def _scheduling_window(self, t0: float, capacity: int) -> dict[str, float]:
        """GPU allocation over the scheduling window, from the first submission to the last
        start: after it no task waits or arrives, so no decision can change what is held
        (the drain, whose running tasks only end). A window of no length (every task
        started at the first submission) is read as its right limit: the allocation right
        after that start."""
        if self.cloud or self.last_start is None or capacity <= 0:
            return {"scheduling_window_s": 0.0, "gpu_utilization_scheduling": math.nan}
        t_last, held_s, held_now = self.last_start
        span = t_last - t0
        value = held_s / (capacity * span) if span > 0 else held_now / capacity
        return {"scheduling_window_s": span, "gpu_utilization_scheduling": value}


def _job_means(records: list[JobRecord]) -> dict[str, float]:
    """Per-job means of the packing papers: completion time (submit to end), slowdown
    (that time over the job's run time alone on its fastest configuration) and the
    performance retained while running (1.0 = no interference)."""
    if not records:
        return {"mean_jct_s": math.nan, "mean_slowdown": math.nan,
                "performance_retained": math.nan}
    jct = [r.completion_s - r.submit_s for r in records]
    return {"mean_jct_s": float(np.mean(jct)),
            "mean_slowdown": float(np.mean([j / r.ideal_s if r.ideal_s > 0 else 1.0
                                            for j, r in zip(jct, records)])),
            "performance_retained": float(np.mean([r.performance for r in records]))}
