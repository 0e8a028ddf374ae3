"""The hard constraints every plan must satisfy, checked in one place."""

from __future__ import annotations

from collections import Counter, defaultdict

from andreas.errors import InfeasiblePlan
from andreas.levels import option_at
from andreas.model import Assignment, Plan, Snapshot


def check_plan(snapshot: Snapshot, plan: Plan) -> None:
    """Raise InfeasiblePlan unless every job is placed once or postponed and every node holds
    what it is given (GPUs or GPU slices, CPU, memory: ``andreas.resources``)."""
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
        if not jobs[a.job].runs_on(gpu_type, a.gpus):
            raise InfeasiblePlan(f"job {a.job}: has no epoch time for {a.gpus} x {gpu_type}")
        if a.power_limit_w is not None and (
                snapshot.cloud or option_at(jobs[a.job], nodes[a.node], a.power_limit_w) is None):
            raise InfeasiblePlan(f"job {a.job}: power limit {a.power_limit_w:g} W is not a "
                                 f"level it may run at on {a.node}")
        if snapshot.cloud:
            busy[a.node] += a.gpus
            if busy[a.node] > capacity:
                raise InfeasiblePlan(f"node {a.node}: {busy[a.node]} GPUs assigned, "
                                     f"has {capacity}")
    for name in plan.node_configs:
        if name not in nodes or plan.node_configs[name] not in catalog:
            raise InfeasiblePlan(f"node {name}: bad configuration {plan.node_configs[name]!r}")
    if not snapshot.cloud:
        _check_resources(snapshot, plan)


def _check_resources(snapshot: Snapshot, plan: Plan) -> None:
    """Place every assignment in a fresh ledger: pinned GPUs first (the plan's ``gpu_ids``,
    or where a continuing job runs now), then the rest on whatever fits."""
    from andreas.resources import Ledger, demand_of

    ledger = Ledger(snapshot.nodes)
    jobs = {j.id: j for j in snapshot.jobs}
    pinned: list[tuple[Assignment, tuple[int, ...]]] = []
    loose: list[Assignment] = []
    for a in plan.assignments:
        run = jobs[a.job].running
        slots = a.gpu_ids or (run.gpu_ids if run is not None and run.node == a.node
                              and run.gpus == a.gpus else ())
        if slots:
            pinned.append((a, slots))
        else:
            loose.append(a)
    whole: dict[str, int] = defaultdict(int)
    for a, slots in pinned:
        i = ledger.index[a.node]
        demand = demand_of(jobs[a.job], a.gpus)
        if len(slots) != a.gpus or not ledger.fits_on(demand, i, slots):
            why = ledger.shortfall(demand, i)
            raise InfeasiblePlan(f"node {a.node}: job {a.job} does not fit on GPUs "
                                 f"{list(slots)}" + (f" ({why})" if why else ""))
        ledger.place(demand, i, slots, a.job)
        whole[a.node] += a.gpus
    for a in loose:
        i = ledger.index[a.node]
        demand = demand_of(jobs[a.job], a.gpus)
        whole[a.node] += a.gpus
        fit = ledger.fit(demand, i)
        if fit is None:
            why = ledger.shortfall(demand, i)
            if why is not None and why.resource == "whole free GPUs":
                raise InfeasiblePlan(f"node {a.node}: {whole[a.node]} GPUs assigned, has "
                                     f"{int(ledger.gpus[i])}")
            raise InfeasiblePlan(f"node {a.node}: job {a.job} does not fit ({why})")
        ledger.place(demand, i, fit, a.job)
