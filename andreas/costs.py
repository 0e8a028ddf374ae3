"""Energy and penalty arithmetic: c_ng, tardiness and the two proxy objectives.

Pure functions. ``evaluate(snapshot, plan)`` is the reference definition of
``f_obj`` (ANDREAS eq. 1 / P1a) and ``f_bar`` (path-relinking paper eq. 1) that
every policy's own fast bookkeeping is tested against.

Definitions (see ARCHITECTURE.md, "The optimizer, precisely"):

- ``t_jng`` = epochs_left * epoch_time_s[type(n)][g-1] where the job runs now (same node
  class and GPU count); anywhere else it restarts from its last checkpoint, so with
  ``params.progress == "epoch"`` the partial epoch is redone, plus
  ``params.restart_overhead_s`` (``Job.time_s``). ``M_j`` = the largest t_jng over every
  configuration the job can run on (its slowest).
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


def node_classes(snapshot: Snapshot) -> dict[str, tuple]:
    """Node name -> class. Nodes of one class are interchangeable: same GPU type, count and
    power curve (cloud: the catalog entry the node runs now, its ``config``)."""
    if snapshot.cloud:
        return {n.name: ("vm", n.config) for n in snapshot.nodes}
    return {n.name: (n.gpu_type, n.gpus, tuple(n.power_w)) for n in snapshot.nodes}


def job_time_s(snapshot: Snapshot, job: Job, cls: tuple, gpu_type: str, gpus: int,
               classes: dict[str, tuple]) -> float | None:
    """t_jng on ``gpus`` GPUs of a node of class ``cls``: a running job continues (keeping its
    partial epoch) only on its own class and GPU count; anywhere else it restarts."""
    continuing = (job.running is not None and job.running.gpus == gpus
                  and classes[job.running.node] == cls)
    return job.time_s(gpu_type, gpus, snapshot.params, continuing=continuing)


def max_time_s(snapshot: Snapshot, job: Job, classes: dict[str, tuple] | None = None) -> float:
    """M_j: the job's remaining time on its slowest feasible configuration."""
    classes = classes if classes is not None else node_classes(snapshot)
    worst = 0.0
    for cls, gpu_type, gpus in _kinds(snapshot, classes):
        for g in range(1, gpus + 1):
            t = job_time_s(snapshot, job, cls, gpu_type, g, classes)
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
    classes = node_classes(snapshot)
    tard = post = fbar = 0.0
    busy: dict[str, int] = defaultdict(int)
    first_end: dict[str, float] = {}
    for a in plan.assignments:
        job = jobs[a.job]
        gpu_type = (catalog[plan.node_configs[a.node]].gpu_type if snapshot.cloud
                    else nodes[a.node].gpu_type)
        cls = ("vm", plan.node_configs[a.node]) if snapshot.cloud else classes[a.node]
        t = job_time_s(snapshot, job, cls, gpu_type, a.gpus, classes)
        if t is None:
            raise ValueError(f"job {a.job}: cannot run on {a.gpus} {gpu_type} GPUs")
        tau_cost = job.weight * tardiness_s(now + t, job.due_s)
        tard += tau_cost
        if snapshot.cloud:
            c_job = catalog[plan.node_configs[a.node]].cost_per_hour
        else:
            c_job = c_ng_per_hour(nodes[a.node].power_w[a.gpus], snapshot.energy)
        pi = t / SECONDS_PER_HOUR * c_job
        fbar += max_time_s(snapshot, job, classes) / (pi + tau_cost)
        busy[a.node] += a.gpus
        first_end[a.node] = min(first_end.get(a.node, t), t)
    for job_id in plan.postponed:
        job = jobs[job_id]
        worst = now + params.period_s + max_time_s(snapshot, job, classes)
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


def _kinds(snapshot: Snapshot, classes: dict[str, tuple]) -> list[tuple[tuple, str, int]]:
    """(class, GPU type, GPU count) of every kind of node a job could be placed on."""
    if snapshot.cloud:
        return [(("vm", c.name), c.gpu_type, c.gpus) for c in snapshot.catalog]
    seen: dict[tuple, tuple[str, int]] = {}
    for n in snapshot.nodes:
        seen.setdefault(classes[n.name], (n.gpu_type, n.gpus))
    return [(cls, t, g) for cls, (t, g) in seen.items()]
