"""The hard constraints every plan must satisfy, checked in one place."""

from __future__ import annotations

from collections import Counter, defaultdict

from andreas.errors import InfeasiblePlan
from andreas.model import Plan, Snapshot


def check_plan(snapshot: Snapshot, plan: Plan) -> None:
    """Raise InfeasiblePlan unless every job is placed once or postponed and no node is overfull."""
    ids = [j.id for j in snapshot.jobs]
    seen = Counter([a.job for a in plan.assignments] + list(plan.postponed))
    for job_id in ids:
        if seen[job_id] != 1:
            raise InfeasiblePlan(f"job {job_id}: appears {seen[job_id]} times in the plan")
    extra = set(seen) - set(ids)
    if extra:
        raise InfeasiblePlan(f"plan names unknown jobs: {sorted(extra)}")
    jobs = {j.id: j for j in snapshot.jobs}
    nodes = {n.name: n for n in snapshot.nodes}
    catalog = {c.name: c for c in snapshot.catalog}
    busy: dict[str, int] = defaultdict(int)
    for a in plan.assignments:
        if a.node not in nodes:
            raise InfeasiblePlan(f"job {a.job}: unknown node {a.node!r}")
        if a.gpus < 1:
            raise InfeasiblePlan(f"job {a.job}: gpus must be >= 1, got {a.gpus}")
        if snapshot.cloud:
            entry = catalog.get(plan.node_configs.get(a.node, ""))
            if entry is None:
                raise InfeasiblePlan(f"node {a.node}: runs jobs but has no catalog entry")
            gpu_type, capacity = entry.gpu_type, entry.gpus
        else:
            node = nodes[a.node]
            if node.gpu_type is None:
                raise InfeasiblePlan(f"node {a.node}: has no GPU type (on premise, every node "
                                     "has one)")
            gpu_type, capacity = node.gpu_type, node.gpus
        if jobs[a.job].remaining_s(gpu_type, a.gpus) is None:
            raise InfeasiblePlan(f"job {a.job}: has no epoch time for {a.gpus} x {gpu_type}")
        busy[a.node] += a.gpus
        if busy[a.node] > capacity:
            raise InfeasiblePlan(f"node {a.node}: {busy[a.node]} GPUs assigned, has {capacity}")
    for name in plan.node_configs:
        if name not in nodes or plan.node_configs[name] not in catalog:
            raise InfeasiblePlan(f"node {name}: bad configuration {plan.node_configs[name]!r}")
