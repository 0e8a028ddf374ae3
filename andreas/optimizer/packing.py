"""Packing policies for rigid multi-resource tasks: First-Fit, Round-Robin, Tetris, Best-Fit.

They are the baselines of the GPU-sharing and genetic-scheduling papers: none preempts,
running tasks keep their GPUs, and waiting tasks are placed in submission order on a
node where their whole demand fits (``andreas.resources``); a task that fits nowhere
waits and the next one is tried (no head-of-line blocking, as in the papers' simulators).
Elastic ANDREAS jobs (no ``Demand``) are packed as one whole GPU.

The plan's objective is the cluster's GPU allocation after placement (allocated
milli-GPU over capacity), the quantity the genetic-scheduling paper maximises.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import numpy as np

from andreas.model import GPU_MILLI, Assignment, Demand, Job, Plan, Snapshot
from andreas.resources import Ledger, demand_of, held_milli

Chooser = Callable[["Packing", Job, Demand], "tuple[int, tuple[int, ...]] | None"]


class Packing:
    """A ledger with the running tasks in place, the waiting ones in queue order, and the
    assignments made so far."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.ledger = Ledger(snapshot.nodes)
        self.types = [n.gpu_type or "" for n in snapshot.nodes]
        self.assignments: list[Assignment] = []
        self.waiting: list[Job] = []
        for job in sorted(snapshot.jobs, key=lambda j: (j.submit_s, j.id)):
            run = job.running
            if run is None:
                self.waiting.append(job)
                continue
            i = self.ledger.index[run.node]
            demand = demand_of(job, run.gpus)
            slots = run.gpu_ids or self.ledger.fit(demand, i)
            assert slots is not None, f"running job {job.id} does not fit {run.node}"
            self.ledger.place(demand, i, slots, job.id)
            self.assignments.append(Assignment(job=job.id, node=run.node, gpus=run.gpus,
                                               gpu_ids=tuple(slots)))

    def candidates(self, job: Job, demand: Demand) -> np.ndarray:
        """Indexes of the nodes whose GPU type the job accepts (free or not)."""
        return np.array([i for i, t in enumerate(self.types)
                         if job.runs_on(t, demand.gpus)], dtype=np.int64)

    def place(self, job: Job, demand: Demand, node: int, slots: tuple[int, ...]) -> None:
        self.ledger.place(demand, node, slots, job.id)
        self.assignments.append(Assignment(job=job.id, node=self.snapshot.nodes[node].name,
                                           gpus=demand.gpus, gpu_ids=slots))

    def run(self, choose: Chooser, policy: str) -> Plan:
        """Place each waiting job where ``choose`` says, in queue order."""
        postponed = []
        for job in self.waiting:
            demand = demand_of(job)
            pick = choose(self, job, demand)
            if pick is None:
                postponed.append(job.id)
            else:
                self.place(job, demand, *pick)
        return self.plan(policy, postponed)

    def plan(self, policy: str, postponed: Sequence[str],
             stats: dict[str, float] | None = None) -> Plan:
        capacity = self.ledger.capacity_milli()
        return Plan(policy=policy, assignments=tuple(self.assignments),
                    postponed=tuple(postponed),
                    objective=self.ledger.allocated_milli() / capacity if capacity else 0.0,
                    objective_name="gpu_allocation", stats=stats or {})


def _first(p: Packing, job: Job, demand: Demand,
           order: Sequence[int] | np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    for i in order:
        slots = p.ledger.fit(demand, int(i))
        if slots is not None:
            return int(i), slots
    return None


def decide_first_fit(snapshot: Snapshot, rng: np.random.Generator, **options: Any) -> Plan:
    """Each waiting task on the lowest-numbered node where it fits."""
    return Packing(snapshot).run(lambda p, job, d: _first(p, job, d, p.candidates(job, d)),
                                 "first-fit")


def decide_round_robin(snapshot: Snapshot, rng: np.random.Generator, *,
                       state: MutableMapping[str, Any] | None = None, **options: Any) -> Plan:
    """Nodes in turn, regardless of load: each task goes to the next node after the one the
    previous task went to (the turn carries over between decisions through ``state``),
    skipping nodes it does not fit."""
    state = {} if state is None else state
    n = len(snapshot.nodes)

    def choose(p: Packing, job: Job, demand: Demand) -> tuple[int, tuple[int, ...]] | None:
        start = int(state.get("next", 0)) % n
        order = [(start + k) % n for k in range(n)]
        accepted = set(p.candidates(job, demand).tolist())
        pick = _first(p, job, demand, [i for i in order if i in accepted])
        if pick is not None:
            state["next"] = (pick[0] + 1) % n
        return pick

    return Packing(snapshot).run(choose, "round-robin")


def decide_best_fit(snapshot: Snapshot, rng: np.random.Generator, **options: Any) -> Plan:
    """Exclusive best fit (the GPU-sharing paper's baseline): a task never shares a GPU (a
    fraction takes a whole one to itself) and goes to the node with the fewest free GPUs
    that still holds it."""
    p = Packing(snapshot)
    postponed = []
    for job in p.waiting:
        demand = demand_of(job)
        whole = Demand(gpus=demand.gpus, cpu_milli=demand.cpu_milli,
                       memory_mib=demand.memory_mib, gpu_memory_mib=demand.gpu_memory_mib)
        pick: tuple[int, int, tuple[int, ...]] | None = None
        for i in p.candidates(job, demand):
            slots = p.ledger.fit(whole, int(i))
            if slots is None:
                continue
            free = int((p.ledger.gpu_free[i] == GPU_MILLI).sum())
            if pick is None or free < pick[0]:
                pick = (free, int(i), slots)
        if pick is None:
            postponed.append(job.id)
            continue
        # the ledger holds the whole GPU (nobody else may join it); the plan names the job's
        # own slice on it, which is what the engine charges
        _, node, slots = pick
        p.ledger.place(whole, node, slots, job.id)
        p.assignments.append(Assignment(job=job.id, node=snapshot.nodes[node].name,
                                        gpus=demand.gpus, gpu_ids=slots))
    return p.plan("best-fit", postponed)


def decide_tetris(snapshot: Snapshot, rng: np.random.Generator, **options: Any) -> Plan:
    """Tetris (Grandl et al., SIGCOMM 2014): repeatedly place the (task, node) pair whose
    demand vector has the largest dot product with the node's free vector, both normalised
    by the node's capacity, over CPU, memory and GPU (dimensions a node does not model
    are left out)."""
    p = Packing(snapshot)
    led = p.ledger
    caps = _capacities(snapshot)
    left = list(p.waiting)
    demands = {job.id: demand_of(job) for job in left}
    accepted = {job.id: p.candidates(job, demands[job.id]) for job in left}
    while left:
        free = np.stack([_finite(led.cpu_free), _finite(led.mem_free),
                         np.clip(led.gpu_free, 0, None).sum(axis=1).astype(float)], axis=1)
        free_n = np.divide(free, caps, out=np.zeros_like(free), where=caps > 0)
        top: tuple[float, int, int, tuple[int, ...]] | None = None
        for k, job in enumerate(left):
            d = demands[job.id]
            vec = np.array([d.cpu_milli, d.memory_mib,
                            held_milli(d)], dtype=float)
            nodes = accepted[job.id]
            if len(nodes) == 0:
                continue
            scores = (np.divide(vec, caps[nodes], out=np.zeros((len(nodes), 3)),
                                where=caps[nodes] > 0) * free_n[nodes]).sum(axis=1)
            for j in np.argsort(-scores, kind="stable"):
                if top is not None and scores[j] <= top[0]:
                    break
                slots = led.fit(d, int(nodes[j]))
                if slots is not None:
                    top = (float(scores[j]), k, int(nodes[j]), slots)
                    break
        if top is None:
            break
        _, k, node, slots = top
        job = left.pop(k)
        p.place(job, demands[job.id], node, slots)
    return p.plan("tetris", [job.id for job in left])


def _capacities(snapshot: Snapshot) -> np.ndarray:
    return np.array([[n.cpu_milli, n.memory_mib, n.gpus * GPU_MILLI] for n in snapshot.nodes],
                    dtype=float)


def _finite(values: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(values), values, 0.0)
