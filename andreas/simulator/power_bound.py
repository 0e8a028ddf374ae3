"""A lower bound on a trace's energy: every job at its least-energy configuration and
power level, capacity ignored (the yardstick of power limits, docs/power-limits.md).

Per job, the least energy its whole run can add to the draw of the node it runs on:
over every node class, GPU count g and level the job may use (``andreas/levels.py``), the
run time from scratch (epochs x epoch time x the level's time factor) times the least
rise of the node's power when g GPUs become busy at that level, ``min_b (P(b + g) -
P(b)) + g x delta_w``. The simulator's energy *above idle* (what busy nodes draw above
``power_w[0]``) is at least the sum over jobs of that (a restart only adds work; a node's
draw is its curve plus its jobs' level changes), so ``above_idle_kwh`` bounds it.

The total adds the nodes' idle draw over the shortest possible makespan: from the first
submission to the latest (submission + fastest run). It bounds the simulator's
``energy_kwh`` while idle nodes draw ``power_w[0]`` (the default); with
``--power-off-idle`` only ``above_idle_kwh`` is a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from andreas import levels
from andreas.model import Job, Node, Trace

J_PER_KWH = 3.6e6


@dataclass(frozen=True, kw_only=True)
class EnergyBound:
    above_idle_kwh: float
    total_kwh: float
    power_levels: str            # "on" when some node offers a level below its default


def _least_rise_w(node: Node, g: int) -> float:
    power = node.power_w
    return min(power[b + g] - power[b] for b in range(node.gpus - g + 1))


def job_least_j(job: Job, nodes: tuple[Node, ...]) -> float:
    """The least energy (J) the job's whole run adds to its node's draw; inf if it fits
    no node."""
    best = math.inf
    seen: set[tuple] = set()
    for node in nodes:
        key = (node.gpu_type, node.gpus, node.power_w, node.power_limits)
        if key in seen or node.gpu_type is None:
            continue
        seen.add(key)
        times = job.epoch_time_s.get(node.gpu_type)
        if times is None:
            continue
        for g in range(1, min(node.gpus, len(times)) + 1):
            if not job.runs_on(node.gpu_type, g):
                continue
            rise = _least_rise_w(node, g)
            for opt in levels.options(job, node):
                run_s = job.epochs * times[g - 1] * opt.time_factor
                best = min(best, run_s * max(0.0, rise + g * opt.delta_w))
    return best


def energy_bound(trace: Trace) -> EnergyBound:
    """The bound of the module docstring (on premise; a cloud trace pays VM prices)."""
    if trace.cloud:
        raise ValueError("energy bound: a cloud trace pays VM prices, not energy")
    above = sum(job_least_j(j, trace.nodes) for j in trace.jobs)
    first = min(j.submit_s for j in trace.jobs)
    end = max(j.submit_s + _fastest_s(j, trace.nodes) for j in trace.jobs)
    idle_w = sum(n.power_w[0] for n in trace.nodes)
    return EnergyBound(above_idle_kwh=above / J_PER_KWH,
                       total_kwh=(above + idle_w * (end - first)) / J_PER_KWH,
                       power_levels="on" if levels.has_levels(trace) else "off")


def _fastest_s(job: Job, nodes: tuple[Node, ...]) -> float:
    return min((job.epochs * t for n in nodes if n.gpu_type is not None
                and n.gpu_type in job.epoch_time_s
                for g, t in enumerate(job.epoch_time_s[n.gpu_type][: n.gpus], start=1)
                if job.runs_on(n.gpu_type, g)), default=0.0)
