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

import math
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, kw_only=True)
class Reservation:
    """The node kept for the oldest waiting task and when it can start there (seconds
    from the snapshot)."""

    job: str
    node: int
    start_s: float


def reservation(p: Packing, *, blocked: Sequence[Job] | None = None) -> Reservation | None:
    """EASY backfilling's reservation: for the oldest waiting task that fits no node now
    but fits one once tasks there finish, the node of a GPU type it accepts where it can
    start soonest, releasing the running tasks there in the order they finish (their
    expected remaining time on their GPUs; ties: the lowest index). None when every
    waiting task fits somewhere now or none can ever fit (a task too large for every node
    blocks nobody). ``blocked``: the waiting tasks that fit no node now, in queue order,
    when the caller knows them already (ga's genome does)."""
    jobs = {j.id: j for j in p.snapshot.jobs}
    running: dict[int, list[tuple[float, str, Demand, tuple[int, ...]]]] = {}
    for a in p.assignments:
        job = jobs[a.job]
        if job.running is None:
            continue
        n = p.ledger.index[a.node]
        left = job.remaining_s(p.types[n], a.gpus)
        running.setdefault(n, []).append((math.inf if left is None else left, job.id,
                                          demand_of(job, a.gpus), a.gpu_ids))
    for head in p.waiting if blocked is None else blocked:
        demand = demand_of(head)
        nodes = [int(n) for n in p.candidates(head, demand)]
        if blocked is None and any(p.ledger.fit(demand, n) is not None for n in nodes):
            continue
        best: Reservation | None = None
        for n in nodes:
            here = sorted(running.get(n, []), key=lambda r: r[:2])
            one = Ledger((p.snapshot.nodes[n],))     # this node alone, as it is now
            for _, owner, held, slots in here:
                one.place(held, 0, slots, owner)
            for left, owner, held, slots in here:
                if left == math.inf or (best is not None and left >= best.start_s):
                    break
                one.release(held, 0, slots, owner)
                if one.fit(demand, 0) is not None:
                    best = Reservation(job=head.id, node=n, start_s=left)
                    break
        if best is not None:
            return best
    return None


def _first(p: Packing, job: Job, demand: Demand,
           order: Sequence[int] | np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    for i in order:
        slots = p.ledger.fit(demand, int(i))
        if slots is not None:
            return int(i), slots
    return None


def decide_first_fit(snapshot: Snapshot, rng: np.random.Generator) -> Plan:
    """Each waiting task on the lowest-numbered node where it fits."""
    return Packing(snapshot).run(lambda p, job, d: _first(p, job, d, p.candidates(job, d)),
                                 "first-fit")


def decide_round_robin(snapshot: Snapshot, rng: np.random.Generator, *,
                       state: MutableMapping[str, Any] | None = None) -> Plan:
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


def decide_best_fit(snapshot: Snapshot, rng: np.random.Generator) -> Plan:
    """Exclusive best fit (the GPU-sharing paper's baseline): a task never shares a GPU (a
    fraction takes a whole one to itself) and goes to the node with the fewest free GPUs
    that still holds it (the lowest-numbered on a tie)."""
    p = Packing(snapshot)
    led = p.ledger
    accepts = _accepts(p)
    postponed = []
    for job in p.waiting:
        demand = demand_of(job)
        whole = Demand(gpus=demand.gpus, cpu_milli=demand.cpu_milli,
                       memory_mib=demand.memory_mib, gpu_memory_mib=demand.gpu_memory_mib)
        fits = accepts(job, demand) & _fits_nodes(led, _Demands([whole]))[0]
        if not fits.any():
            postponed.append(job.id)
            continue
        free = (led.gpu_free == GPU_MILLI).sum(axis=1)
        node = int(np.argmin(np.where(fits, free, np.iinfo(np.int64).max)))
        slots = led.fit(whole, node)
        assert slots is not None
        # the ledger holds the whole GPU (nobody else may join it); the plan names the job's
        # own slice on it, which is what the engine charges
        led.place(whole, node, slots, job.id)
        p.assignments.append(Assignment(job=job.id, node=snapshot.nodes[node].name,
                                        gpus=demand.gpus, gpu_ids=slots))
    return p.plan("best-fit", postponed)


def decide_tetris(snapshot: Snapshot, rng: np.random.Generator) -> Plan:
    """Tetris (Grandl et al., SIGCOMM 2014): repeatedly place the (task, node) pair whose
    demand vector has the largest dot product with the node's free vector, both normalised
    by the node's capacity, over CPU, memory and GPU (dimensions a node does not model
    are left out); ties go to the earliest task, then the lowest-numbered node.

    The (task, node) scores and fits are matrices; a placement changes one node, so each
    step recomputes that node's column only."""
    p = Packing(snapshot)
    led = p.ledger
    left = list(p.waiting)
    if not left:
        return p.plan("tetris", [])
    caps = _capacities(snapshot)
    demands = [demand_of(job) for job in left]
    arrays = _Demands(demands)
    vec = np.array([[d.cpu_milli, d.memory_mib, held_milli(d)] for d in demands], dtype=float)
    # demand over capacity per (task, node, dimension); 0 where a node does not model it
    share = np.divide(vec[:, None, :], caps[None, :, :], out=np.zeros(vec.shape[:1] + caps.shape),
                      where=caps[None, :, :] > 0)
    accepts = _accepts(p)
    ok = np.stack([accepts(job, d) for job, d in zip(left, demands)]) & _fits_nodes(led, arrays)
    scores = (share * _free_share(led, caps)[None, :, :]).sum(axis=2)
    alive = np.ones(len(left), dtype=bool)
    while True:
        masked = np.where(ok & alive[:, None], scores, -np.inf)
        k, node = np.unravel_index(int(np.argmax(masked)), masked.shape)
        if not np.isfinite(masked[k, node]):
            break
        d = demands[k]
        slots = led.fit(d, int(node))
        assert slots is not None
        p.place(left[k], d, int(node), slots)
        alive[k] = False
        ok[:, node] &= _fits_nodes(led, arrays, int(node))[:, 0]
        scores[:, node] = (share[:, node, :]
                           * _free_share(led, caps, int(node))[None, 0, :]).sum(axis=1)
    return p.plan("tetris", [job.id for job, a in zip(left, alive) if a])


class _Demands:
    """Demands as arrays (one row each) for the fit of many tasks on many nodes at once."""

    def __init__(self, demands: Sequence[Demand]) -> None:
        self.gpus = np.array([d.gpus for d in demands], dtype=np.int64)
        self.need = np.array([d.gpu_milli if d.shared else GPU_MILLI for d in demands],
                             dtype=np.int64)
        self.cpu = np.array([d.cpu_milli for d in demands], dtype=float)
        self.mem = np.array([d.memory_mib for d in demands], dtype=float)
        self.gmem = np.array([d.gpu_memory_mib for d in demands], dtype=float)
        self.peak = np.array([d.gpu_memory_peak_mib for d in demands], dtype=float)


def _fits_nodes(led: Ledger, d: _Demands, node: int | None = None) -> np.ndarray:
    """(tasks, nodes): ``Ledger.fit(demand, node) is not None``, for every node or one."""
    nodes = slice(None) if node is None else slice(node, node + 1)
    free = led.gpu_free[nodes][None, :, :]
    gmem = led.gpu_mem_free[nodes][None, :, :]
    peak = np.maximum(led.gpu_peak[nodes][None, :, :], d.peak[:, None, None])
    gpu_ok = ((free >= d.need[:, None, None])
              & (gmem >= d.gmem[:, None, None] + peak)).sum(axis=2)
    return ((d.cpu[:, None] <= led.cpu_free[None, nodes])
            & (d.mem[:, None] <= led.mem_free[None, nodes]) & (gpu_ok >= d.gpus[:, None]))


def _accepts(p: Packing) -> Callable[[Job, Demand], np.ndarray]:
    """Per node: does the job accept its GPU type (``Packing.candidates`` as a mask)?"""
    def mask(job: Job, demand: Demand) -> np.ndarray:
        out = np.zeros(len(p.types), dtype=bool)
        out[p.candidates(job, demand)] = True
        return out
    return mask


def _free_share(led: Ledger, caps: np.ndarray, node: int | None = None) -> np.ndarray:
    """Free CPU, memory and GPU of each node (or one) over its capacity."""
    nodes = slice(None) if node is None else slice(node, node + 1)
    free = np.stack([_finite(led.cpu_free[nodes]), _finite(led.mem_free[nodes]),
                     np.clip(led.gpu_free[nodes], 0, None).sum(axis=1).astype(float)], axis=1)
    return np.divide(free, caps[nodes], out=np.zeros_like(free), where=caps[nodes] > 0)


def _capacities(snapshot: Snapshot) -> np.ndarray:
    return np.array([[n.cpu_milli, n.memory_mib, n.gpus * GPU_MILLI] for n in snapshot.nodes],
                    dtype=float)


def _finite(values: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(values), values, 0.0)
