"""First-principle baselines the papers compare against: FIFO, EDF and Priority Scheduling.

They follow the papers' description of these methods:

- "first-principle methods never change the configuration assigned to a job once it
  has been started": every running job continues on exactly its node and GPU count;
- they "work under the assumption that only one job can be deployed on each node":
  a node hosting a running job is busy, and each newly started job gets one whole free
  node;
- the GPU count (and, in cloud mode, the VM type) is the "best configuration" over the
  free nodes: the cheapest ``t_jng * c_ng`` that meets the due date, else the fastest.

The policies differ only in the order waiting jobs are visited. A job that no free
node can run waits and the next job in order is still considered: there is no
head-of-line blocking, so a big job at the front never idles nodes a later job could use.
The methods are deterministic; ``rng`` is accepted only for the common policy signature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from andreas.costs import c_ng_per_hour, evaluate
from andreas.errors import InputError
from andreas.model import Assignment, CatalogEntry, Job, Node, Plan, Snapshot

if TYPE_CHECKING:
    import numpy as np

# (node index, node name, gpus, entry name or None, t_jng, c_ng per hour)
_Candidate = tuple[int, str, int, str | None, float, float]


def decide_fifo(snapshot: Snapshot, rng: np.random.Generator | None = None) -> Plan:
    """First In First Out: waiting jobs by submission time."""
    return _decide(snapshot, "fifo", lambda j: (j.submit_s, j.id))


def decide_edf(snapshot: Snapshot, rng: np.random.Generator | None = None) -> Plan:
    """Earliest Deadline First: waiting jobs by due date."""
    return _decide(snapshot, "edf", lambda j: (j.due_s, j.submit_s, j.id))


def decide_priority(snapshot: Snapshot, rng: np.random.Generator | None = None) -> Plan:
    """Priority Scheduling: waiting jobs by tardiness weight, highest first."""
    return _decide(snapshot, "priority", lambda j: (-j.weight, j.submit_s, j.id))


def _decide(snapshot: Snapshot, name: str, order: Callable[[Job], tuple]) -> Plan:
    assignments: list[Assignment] = []
    node_configs: dict[str, str] = {}
    running_on: dict[str, list[Job]] = {}
    for job in snapshot.jobs:
        if job.running is not None:
            assignments.append(Assignment(job=job.id, node=job.running.node,
                                          gpus=job.running.gpus))
            running_on.setdefault(job.running.node, []).append(job)
    if snapshot.cloud:
        nodes = {n.name: n for n in snapshot.nodes}
        for node_name, jobs in running_on.items():
            node_configs[node_name] = _running_entry(snapshot, nodes.get(node_name),
                                                     node_name, jobs)

    free = [(i, n) for i, n in enumerate(snapshot.nodes) if n.name not in running_on]
    postponed: list[str] = []
    started = 0
    for job in sorted((j for j in snapshot.jobs if j.running is None), key=order):
        best = _best_config(snapshot, job, free)
        if best is None:
            postponed.append(job.id)
            continue
        index, node_name, gpus, entry, _, _ = best
        assignments.append(Assignment(job=job.id, node=node_name, gpus=gpus))
        if entry is not None:
            node_configs[node_name] = entry
        free = [(i, n) for i, n in free if i != index]
        started += 1

    plan = Plan(policy=name, assignments=tuple(assignments), postponed=tuple(postponed),
                objective=0.0, objective_name="f_obj", node_configs=node_configs,
                stats={"jobs": len(snapshot.jobs), "started": started})
    return dataclasses.replace(plan, objective=evaluate(snapshot, plan).f_obj)


def _best_config(snapshot: Snapshot, job: Job,
                 free: list[tuple[int, Node]]) -> _Candidate | None:
    """ANDREAS' best configuration restricted to free nodes.

    Cheapest ``t * c`` among configurations meeting the due date, else the fastest;
    ties go to fewer GPUs, then to the earlier node (and catalog entry).
    """
    candidates = list(_candidates(snapshot, job, free))
    on_time = [c for c in candidates if snapshot.now_s + c[4] < job.due_s]
    if on_time:
        return min(on_time, key=lambda c: (c[4] * c[5], c[2], c[0]))
    if candidates:
        return min(candidates, key=lambda c: (c[4], c[2], c[0]))
    return None


def _candidates(snapshot: Snapshot, job: Job, free: list[tuple[int, Node]]):
    if snapshot.cloud:
        # Unconfigured cloud nodes are interchangeable: the first free one stands for all.
        if not free:
            return
        index, node = free[0]
        for entry in snapshot.catalog:
            for g in range(1, entry.gpus + 1):
                t = job.time_s(entry.gpu_type, g, snapshot.params, continuing=False)
                if t is not None:
                    yield index, node.name, g, entry.name, t, entry.cost_per_hour
        return
    for index, node in free:
        for g in range(1, node.gpus + 1):
            t = (job.time_s(node.gpu_type, g, snapshot.params, continuing=False)
                 if node.gpu_type else None)
            if t is not None:
                yield index, node.name, g, None, t, c_ng_per_hour(node.power_w[g], snapshot.energy)


def _running_entry(snapshot: Snapshot, node: Node | None, node_name: str,
                   jobs: list[Job]) -> str:
    """The catalog entry a cloud node with running jobs keeps (jobs are never resized).

    The snapshot's own record of the node's VM wins; without one, the cheapest entry
    on which every running job has an epoch time for its GPU count and that holds
    all of the node's running GPUs.
    """
    if node is not None and node.config:
        return node.config
    need = sum(j.running.gpus for j in jobs if j.running is not None)

    def fits(entry: CatalogEntry) -> bool:
        return entry.gpus >= need and all(
            j.remaining_s(entry.gpu_type, j.running.gpus) is not None
            for j in jobs if j.running is not None)

    entries = [e for e in snapshot.catalog if fits(e)]
    if not entries:
        raise InputError(f"node {node_name}: no catalog entry can host its running jobs "
                         f"{', '.join(j.id for j in jobs)}")
    return min(entries, key=lambda e: e.cost_per_hour).name
