"""Energy and penalty arithmetic: c_ng, tardiness and the two proxy objectives.

Pure functions. ``evaluate(snapshot, plan)`` is the reference definition of
``f_obj`` (ANDREAS eq. 1 / P1a) and ``f_bar`` (path-relinking paper eq. 1) that
every policy's own fast bookkeeping is tested against.

Definitions (see ARCHITECTURE.md, "The optimizer, precisely"):

- ``t_jng`` = epochs_left * epoch_time_s[type(n)][g-1]; ``M_j`` = the largest t_jng
  over every configuration the job can run on (its slowest).
- A job assigned to (n, g) has tardiness ``tau_j = max(0, now + t_jng - d_j)``.
- A postponed job has worst-case tardiness ``tau_hat_j = max(0, now + H + M_j - d_j)``.
- Node term: each node that runs jobs is charged until its first job ends:
  ``min_j t_jng / 3600 * cost_per_hour(n)``, where cost_per_hour is c_ng with g =
  all busy GPUs of the node (on-premise), or the VM price (cloud).
- ``f_obj = sum_assigned w tau + sum_postponed rho w tau_hat + sum_nodes node term
  + mu * idle GPUs of nodes that run jobs`` (minimised; mu = 0 is ANDREAS eq. 1).
- ``pi_j = t_jng / 3600 * c`` with c = c_ng of the job's own g on its node
  (on-premise) or the VM price (cloud, as P1j); ``f_bar = sum_assigned M_j / (pi_j
  + w_j tau_j)`` (maximised; postponed jobs add nothing).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from andreas.model import Energy, Job, Plan, Snapshot

SECONDS_PER_HOUR = 3600.0


def c_ng_per_hour(power_w: float, energy: Energy) -> float:
    """Energy cost per hour of a node drawing ``power_w``: P [kW] * PUE * price [per kWh]."""
    return power_w / 1000.0 * energy.pue * energy.price_per_kwh


def energy_cost(energy_j: float, energy: Energy) -> float:
    """The bill for ``energy_j`` joules of IT energy: kWh * PUE * price."""
    return energy_j / 3.6e6 * energy.pue * energy.price_per_kwh


def tardiness_s(finish_s: float, due_s: float) -> float:
    return max(0.0, finish_s - due_s)


def node_cost_per_hour(snapshot: Snapshot, node_name: str, busy_gpus: int,
                       node_configs: dict[str, str] | None = None) -> float:
    """c_ng of a node with ``busy_gpus`` busy: measured power curve, or its VM price in cloud mode."""
    if snapshot.cloud:
        entry = _catalog(snapshot)[(node_configs or {})[node_name]]
        return entry.cost_per_hour if busy_gpus > 0 else 0.0
    node = _nodes(snapshot)[node_name]
    return c_ng_per_hour(node.power_w[busy_gpus], snapshot.energy)


def max_time_s(snapshot: Snapshot, job: Job) -> float:
    """M_j: the job's remaining time on its slowest feasible configuration."""
    worst = 0.0
    for gpu_type, gpus in _hardware(snapshot):
        for g in range(1, gpus + 1):
            t = job.remaining_s(gpu_type, g)
            if t is not None:
                worst = max(worst, t)
    return worst


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    f_obj: float
    f_bar: float
    tardiness_cost: float
    postponement_cost: float
    node_cost: float
    idle_gpus: int


def evaluate(snapshot: Snapshot, plan: Plan) -> Evaluation:
    """Both proxy objectives of a (feasible) plan, computed directly from their definitions."""
    nodes = _nodes(snapshot)
    catalog = _catalog(snapshot)
    jobs = {j.id: j for j in snapshot.jobs}
    now, params = snapshot.now_s, snapshot.params
    tard = post = fbar = 0.0
    busy: dict[str, int] = defaultdict(int)
    first_end: dict[str, float] = {}
    for a in plan.assignments:
        job = jobs[a.job]
        gpu_type = (catalog[plan.node_configs[a.node]].gpu_type if snapshot.cloud
                    else nodes[a.node].gpu_type)
        t = job.remaining_s(gpu_type, a.gpus)
        if t is None:
            raise ValueError(f"job {a.job}: cannot run on {a.gpus} {gpu_type} GPUs")
        tau_cost = job.weight * tardiness_s(now + t, job.due_s)
        tard += tau_cost
        if snapshot.cloud:
            c_job = catalog[plan.node_configs[a.node]].cost_per_hour
        else:
            c_job = c_ng_per_hour(nodes[a.node].power_w[a.gpus], snapshot.energy)
        pi = t / SECONDS_PER_HOUR * c_job
        fbar += max_time_s(snapshot, job) / (pi + tau_cost)
        busy[a.node] += a.gpus
        first_end[a.node] = min(first_end.get(a.node, t), t)
    for job_id in plan.postponed:
        job = jobs[job_id]
        worst = now + params.period_s + max_time_s(snapshot, job)
        post += params.rho * job.weight * tardiness_s(worst, job.due_s)
    node_cost = 0.0
    idle = 0
    for name, g in busy.items():
        hourly = node_cost_per_hour(snapshot, name, g, dict(plan.node_configs))
        node_cost += first_end[name] / SECONDS_PER_HOUR * hourly
        capacity = (catalog[plan.node_configs[name]].gpus if snapshot.cloud
                    else nodes[name].gpus)
        idle += capacity - g
    f_obj = tard + post + node_cost + params.mu * idle
    return Evaluation(f_obj=f_obj, f_bar=fbar, tardiness_cost=tard, postponement_cost=post,
                      node_cost=node_cost, idle_gpus=idle)


def _nodes(snapshot: Snapshot):
    return {n.name: n for n in snapshot.nodes}


def _catalog(snapshot: Snapshot):
    return {c.name: c for c in snapshot.catalog}


def _hardware(snapshot: Snapshot) -> set[tuple[str, int]]:
    """The distinct (GPU type, GPU count) a job could be placed on."""
    if snapshot.cloud:
        return {(c.gpu_type, c.gpus) for c in snapshot.catalog}
    return {(n.gpu_type, n.gpus) for n in snapshot.nodes}
