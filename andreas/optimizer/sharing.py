"""Interference-aware GPU sharing: the OJPP Greedy and Heuristic of the interference-aware
placement paper (Algorithms 1–3) and its constraint-ablated baselines.

Jobs are placed worker by worker on GPUs ("devices"); a job's workers stay on one node
(an andreas job is one container). ``Placement`` (Algorithm 2) first tries to put every
worker on an *active* GPU (one that already has residents), choosing for each the GPU
whose potential slowdown theta_k is lowest and whose constraints hold: the resources
(eqs. 1, 3, through the ledger), the collision bound tau_bar (eq. 5), the interference
bound theta_bar (eq. 7) and the balance theta' of this job's and the residents' jobs'
workers (eq. 8). If some worker finds no active GPU it starts over allowing empty GPUs
("opening a bin"), on the node with the fewest empty GPUs that holds the job (best fit).
A job that fits nowhere waits (the cluster is finite; the paper opens bins forever).

- ``ojpp-greedy``: Best-Fit Decreasing by compute demand (alpha x workers), Algorithm 1;
- ``ojpp-heuristic``: Algorithm 3, the queue re-sorted at every step by gregariousness
  (eq. 20, ascending) after the decreasing-demand sort, so the jobs least likely to
  collide go first and fill active GPUs;
- ``i-greedy`` / ``b-greedy`` / ``c-greedy``: Greedy with only the interference, only the
  balance, or only the collision constraint (the paper's Table 4 baselines).

Whole-GPU jobs never share (their alpha is 1), so on traces without slices these are
best-fit packers. The plan's objective is the number of GPUs in use (eq. 9).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from andreas.interference import Sharing, balance, collision_probability, thetas
from andreas.costs import SECONDS_PER_HOUR
from andreas.model import GPU_MILLI, Demand, Job, Plan, Progress, Snapshot
from andreas.optimizer.packing import Packing
from andreas.resources import demand_of

Pick = tuple[int, tuple[int, ...]]


class _Sharer:
    """A packing with the interference bookkeeping Placement needs."""

    def __init__(self, snapshot: Snapshot, model: Sharing) -> None:
        self.p = Packing(snapshot)
        self.model = model
        self.scale: dict[str, float] = {}   # measured / predicted slowdown, per job (OJPAP)
        self.where: dict[str, list[tuple[int, int]]] = {}
        for (node, slot), residents in self.p.ledger.residents.items():
            for owner, _ in residents:
                self.where.setdefault(owner, []).append((node, slot))

    def worker_thetas(self, owner: str, extra: dict[tuple[int, int], list] | None = None
                      ) -> list[float]:
        """Slowdowns of a placed job's workers; ``extra`` adds tentative residents."""
        out = []
        for node, slot in self.where.get(owner, []):
            residents = list(self.p.ledger.on_gpu(node, slot))
            residents += (extra or {}).get((node, slot), [])
            k = next(k for k, (o, _) in enumerate(residents) if o == owner)
            out.append(self.thetas(residents)[k])
        return out

    def thetas(self, residents: list) -> list[float]:
        """Predicted slowdowns, corrected by what each job has been measured to suffer."""
        return [t * self.scale.get(owner, 1.0)
                for t, (owner, _) in zip(thetas(residents, self.model), residents)]

    def gpu_check(self, job: Job, demand: Demand, node: int, slot: int) -> float | None:
        """Potential theta_k of ``slot`` with one more worker of ``job``, or None if a
        constraint breaks."""
        model = self.model
        residents = [*self.p.ledger.on_gpu(node, slot), (job.id, demand)]
        if len(residents) == 1:
            return 0.0
        if model.use_tau and collision_probability(
                d.peak_probability for _, d in residents) > model.tau_bar + 1e-12:
            return None
        ths = self.thetas(residents)
        if model.use_theta and max(ths) > model.theta_bar + 1e-12:
            return None
        if model.use_balance:
            extra = {(node, slot): [(job.id, demand)]}
            for owner in {o for o, _ in residents[:-1]}:
                if balance(self.worker_thetas(owner, extra)) > model.theta_balance + 1e-12:
                    return None
        return max(ths)

    def placement(self, job: Job, demand: Demand) -> Pick | None:
        """Algorithm 2 on andreas nodes: active GPUs only, else active and empty ones."""
        pick = self._place(job, demand, active_only=True)
        return pick if pick is not None else self._place(job, demand, active_only=False)

    def _place(self, job: Job, demand: Demand, *, active_only: bool) -> Pick | None:
        led = self.p.ledger
        best: tuple[tuple[float, ...], Pick] | None = None
        for i in self.p.candidates(job, demand):
            node = int(i)
            if demand.cpu_milli > led.cpu_free[node] or demand.memory_mib > led.mem_free[node]:
                continue
            ok = np.flatnonzero(led.gpu_ok(demand, node))
            scored = []
            for s in ok:
                active = bool(led.on_gpu(node, int(s)))
                if active_only and not active:
                    continue
                theta = self.gpu_check(job, demand, node, int(s)) if active else 0.0
                if theta is not None:
                    # active GPUs first, then the lowest potential interference
                    scored.append((not active, theta, int(s)))
            if len(scored) < demand.gpus:
                continue
            scored.sort()
            chosen = scored[: demand.gpus]
            slots = tuple(s for _, _, s in chosen)
            worker = [t for _, t, _ in chosen]
            if self.model.use_balance and balance(worker) > self.model.theta_balance + 1e-12:
                continue
            opened = sum(new for new, _, _ in chosen)
            empty = int((led.gpu_free[node] == GPU_MILLI).sum())
            # fewest new GPUs, then lowest interference, then the fullest node (best fit)
            key = (float(opened), max(worker), float(empty), float(node))
            if best is None or key < best[0]:
                best = (key, (node, slots))
        return None if best is None else best[1]

    def place(self, job: Job, demand: Demand, pick: Pick) -> None:
        node, slots = pick
        self.p.place(job, demand, node, slots)
        self.where[job.id] = [(node, s) for s in slots]


    def remove(self, job: Job, demand: Demand) -> tuple[int, tuple[int, ...]]:
        """Take a placed job out of the ledger and the plan (to move it)."""
        places = self.where.pop(job.id)
        node, slots = places[0][0], tuple(s for _, s in places)
        self.p.ledger.release(demand, node, slots, job.id)
        self.p.assignments = [a for a in self.p.assignments if a.job != job.id]
        return node, slots

    def relocate(self, job: Job, demand: Demand, avoid: tuple[int, tuple[int, ...]]
                 ) -> Pick | None:
        """Algorithm 4's target: the GPUs with the most free compute (its resource queue)
        that keep every bound, other than the ones it leaves."""
        led = self.p.ledger
        best: tuple[tuple[float, ...], Pick] | None = None
        for i in self.p.candidates(job, demand):
            node = int(i)
            if demand.cpu_milli > led.cpu_free[node] or demand.memory_mib > led.mem_free[node]:
                continue
            scored = []
            for s in np.flatnonzero(led.gpu_ok(demand, node)):
                if node == avoid[0] and int(s) in avoid[1]:
                    continue
                theta = self.gpu_check(job, demand, node, int(s))
                if theta is not None:
                    scored.append((-int(led.gpu_free[node, s]), theta, int(s)))
            if len(scored) < demand.gpus:
                continue
            scored.sort()
            chosen = scored[: demand.gpus]
            key = (float(chosen[0][0]), max(t for _, t, _ in chosen), float(node))
            if best is None or key < best[0]:
                best = (key, (node, tuple(s for _, _, s in chosen)))
        return None if best is None else best[1]


def _compute(demand: Demand) -> float:
    return demand.gpus * (demand.gpu_milli if demand.shared else GPU_MILLI)


def _run(snapshot: Snapshot, model: Sharing, name: str, *, heuristic: bool,
         sharer: _Sharer | None = None, stats: dict[str, float] | None = None) -> Plan:
    sh = sharer or _Sharer(snapshot, model)
    queue = sorted(sh.p.waiting, key=lambda j: -_compute(demand_of(j)))   # decreasing demand
    demands = {j.id: demand_of(j) for j in queue}
    postponed = []
    while queue:
        if heuristic:
            # eq. 20 over the rest of the queue; stable, so the demand order breaks ties
            queue.sort(key=_gregariousness_key(queue, demands))
        job = queue.pop(0)
        pick = sh.placement(job, demands[job.id])
        if pick is None:
            postponed.append(job.id)
        else:
            sh.place(job, demands[job.id], pick)
    plan = sh.p.plan(name, postponed)
    devices = int(sh.p.ledger.busy_gpus().sum())
    return replace(plan, objective=float(devices), objective_name="devices",
                   stats={"devices": devices, **(stats or {})})


def _gregariousness_key(queue: list[Job], demands: dict[str, Demand]):
    """tau(i, V) = p_i * max_{q != i} p_q (eq. 20 with pairwise collision p_i p_q), for
    the whole queue in O(n) from the two largest peak probabilities."""
    ps = sorted((demands[j.id].peak_probability for j in queue), reverse=True)
    top = ps[0] if ps else 0.0
    second = ps[1] if len(ps) > 1 else 0.0

    def key(job: Job) -> float:
        p = demands[job.id].peak_probability
        return p * (second if p == top else top)

    return key


def sharing_model(sharing: Sharing | None) -> Sharing:
    """The Sharing bounds a caller passes as ``sharing=``, else the paper's setting."""
    return sharing if isinstance(sharing, Sharing) else Sharing()


def decide_ojpp_greedy(snapshot: Snapshot, rng: np.random.Generator, *,
                       sharing: Sharing | None = None) -> Plan:
    return _run(snapshot, sharing_model(sharing), "ojpp-greedy", heuristic=False)


def decide_ojpp_heuristic(snapshot: Snapshot, rng: np.random.Generator, *,
                          sharing: Sharing | None = None) -> Plan:
    return _run(snapshot, sharing_model(sharing), "ojpp-heuristic", heuristic=True)


def decide_i_greedy(snapshot: Snapshot, rng: np.random.Generator, *,
                       sharing: Sharing | None = None) -> Plan:
    model = replace(sharing_model(sharing), use_tau=False, use_balance=False)
    return _run(snapshot, model, "i-greedy", heuristic=False)


def decide_b_greedy(snapshot: Snapshot, rng: np.random.Generator, *,
                       sharing: Sharing | None = None) -> Plan:
    model = replace(sharing_model(sharing), use_tau=False, use_theta=False)
    return _run(snapshot, model, "b-greedy", heuristic=False)


def decide_c_greedy(snapshot: Snapshot, rng: np.random.Generator, *,
                       sharing: Sharing | None = None) -> Plan:
    model = replace(sharing_model(sharing), use_theta=False, use_balance=False)
    return _run(snapshot, model, "c-greedy", heuristic=False)


def decide_ojpap(snapshot: Snapshot, rng: np.random.Generator, *,
                 state: dict[str, Any] | None = None,
                 sharing: Sharing | None = None) -> Plan:
    """OJPAP: the online adjustment (Algorithm 4), then ``ojpp-heuristic`` for the queue.

    Each decision reads the slowdown every running job measures (``Config.slowdown``),
    takes a GPU's theta_k as its residents' largest (eq. 6) and smooths it across
    decisions with the EWMA of eq. 18 (kept in ``state``), so a spike at a job's start
    does not move anything. When some GPU's average breaks theta_bar, the GPUs in the
    upper half by interference that break it give up, one each, their co-resident that
    is cheapest to move (the work since its last checkpoint plus the restart overhead),
    to the GPUs with the most free compute that keep every bound, until the round's
    migration budget c_bar (eq. 19) is spent. The paper rearranges the whole upper half;
    moving a job off a GPU within its bound buys nothing, so andreas stops at the bound.
    Predictions for a job that has been measured are scaled by measured / predicted, the
    role the paper gives its interference predictor (AIP).
    """
    model = sharing_model(sharing)
    state = {} if state is None else state
    sh = _Sharer(snapshot, model)
    jobs = {j.id: j for j in snapshot.jobs}
    ewma: dict[str, float] = state.setdefault("ewma", {})
    learned: dict[str, float] = state.setdefault("scale", {})
    smoothed: dict[tuple[int, int], float] = {}
    for (node, slot), residents in sh.p.ledger.residents.items():
        measured = [(o, run.slowdown) for o, _ in residents
                    if (run := jobs[o].running) is not None]
        if len(residents) > 1:
            for (owner, theta), predicted in zip(measured, thetas(residents, model)):
                if predicted > 1e-9 and theta > 0 and abs(theta / predicted - 1) > 1e-6:
                    learned[owner] = theta / predicted
        key = f"{snapshot.nodes[node].name}/{slot}"
        now = max((t for _, t in measured), default=0.0)
        # a GPU starts from "no interference", so one spike alone rarely triggers a move
        smoothed[(node, slot)] = ewma[key] = (model.ewma_a * ewma.get(key, 0.0)
                                              + (1 - model.ewma_a) * now)
    alive = {f"{snapshot.nodes[n].name}/{s}" for n, s in smoothed}
    for key in [k for k in ewma if k not in alive]:
        del ewma[key]
    for key in [k for k in learned if k not in jobs]:
        del learned[key]
    sh.scale = dict(learned)
    moves, spent = _adjust(sh, jobs, smoothed, model, snapshot)
    return _run(snapshot, model, "ojpap", heuristic=True, sharer=sh,
                stats={"moves": moves, "migration_cost_s": spent,
                       "max_ewma_theta": max(smoothed.values(), default=0.0)})


def _adjust(sh: _Sharer, jobs: dict[str, Job], smoothed: dict[tuple[int, int], float],
            model: Sharing, snapshot: Snapshot) -> tuple[int, float]:
    """Algorithm 4 within the budget; returns (moves, their cost in seconds of work)."""
    if not any(v > model.theta_bar + 1e-12 for v in smoothed.values()):
        return 0, 0.0
    ranked = sorted(smoothed, key=lambda k: -smoothed[k])
    priority = [k for k in ranked[: (len(ranked) + 1) // 2]
                if smoothed[k] > model.theta_bar + 1e-12]
    budget, moves = model.migration_budget_s, 0
    moved: set[str] = set()
    for node, slot in priority:
        residents = [o for o, _ in sh.p.ledger.on_gpu(node, slot) if o not in moved]
        if len(sh.p.ledger.on_gpu(node, slot)) < 2 or not residents:
            continue
        owner = min(residents, key=lambda o: (_move_cost(jobs[o], snapshot), o))
        cost = _move_cost(jobs[owner], snapshot)
        if cost > budget:
            continue
        job = jobs[owner]
        demand = demand_of(job)
        home = sh.remove(job, demand)
        target = sh.relocate(job, demand, home)
        if target is None:
            sh.place(job, demand, home)
            continue
        sh.place(job, demand, target)
        moved.add(owner)
        budget -= cost
        moves += 1
    return moves, model.migration_budget_s - budget


def _move_cost(job: Job, snapshot: Snapshot) -> float:
    """c_i: seconds of work a move throws away (the partial epoch since its checkpoint when
    progress is per epoch) plus the restart overhead."""
    run = job.running
    assert run is not None
    node = next(n for n in snapshot.nodes if n.name == run.node)
    epoch_s = job.epoch_time_s[node.gpu_type or ""][run.gpus - 1]
    partial = job.epochs_done - np.floor(job.epochs_done + 1e-9) \
        if snapshot.params.progress == Progress.EPOCH else 0.0
    return float(partial * epoch_s + snapshot.params.restart_overhead_s)


# --------------------------------------------------------------------------------------
# The energy objective with GPU sharing: greedy / rg on snapshots of rigid tasks.

DEMAND_ITERATIONS = 8      # rg's constructions on rigid tasks (Python, not the numba kernels)


def decide_energy(snapshot: Snapshot, rng: np.random.Generator, *, policy: str,
                  iterations: int, sharing: Sharing | None = None) -> Plan:
    """``greedy`` (one construction) and ``rg`` (the best f_obj of ``iterations``) for rigid
    tasks: jobs by decreasing due-date pressure, each where its marginal cost is least —
    its own lateness, the lateness its slowdown adds to the jobs it would share GPUs with,
    and the energy of the GPU time it adds. Sharing an active GPU adds no device, only
    slowdown; a new GPU adds its power for the job's whole run. Later constructions swap
    neighbours in the queue at random and draw among the three cheapest places with
    probability inversely proportional to cost. Every place keeps the sharing bounds;
    plans are compared on ``costs.evaluate`` with sharing."""
    from andreas.costs import evaluate

    model = sharing or Sharing()
    best: Plan | None = None
    best_value = math.inf
    best_iteration = 0
    for it in range(max(1, iterations)):
        plan = _construct_energy(snapshot, rng, model, policy, randomize=it > 0)
        value = evaluate(snapshot, plan, model).f_obj
        if value < best_value - 1e-9:
            best, best_value, best_iteration = plan, value, it
    assert best is not None
    return replace(best, objective=best_value, objective_name="f_obj",
                   stats={"iterations": max(1, iterations), "best_iteration": best_iteration,
                          "devices": int(best.stats.get("devices", 0))})


def _construct_energy(snapshot: Snapshot, rng: np.random.Generator, model: Sharing,
                      policy: str, *, randomize: bool) -> Plan:
    sh = _Sharer(snapshot, model)
    now = snapshot.now_s
    solo = {j.id: _solo_s(snapshot, j) for j in sh.p.waiting}
    for j in snapshot.jobs:
        if j.running is not None:
            solo[j.id] = _solo_s(snapshot, j)
    queue = sorted(sh.p.waiting, key=lambda j: -(now + solo[j.id] - j.due_s))
    if randomize:
        for k in range(len(queue) - 1):
            if rng.random() < 0.2:
                queue[k], queue[k + 1] = queue[k + 1], queue[k]
    jobs = {j.id: j for j in snapshot.jobs}
    postponed = []
    for job in queue:
        demand = demand_of(job)
        options = _energy_options(sh, job, demand, jobs, solo, snapshot)
        if not options:
            postponed.append(job.id)
            continue
        options.sort(key=lambda o: o[0])
        pick = options[0]
        if randomize and len(options) > 1:
            top = options[:3]
            weights = np.array([1.0 / max(o[0], 1e-9) for o in top])
            pick = top[int(rng.choice(len(top), p=weights / weights.sum()))]
        sh.place(job, demand, pick[1])
    plan = sh.p.plan(policy, postponed)
    devices = int(sh.p.ledger.busy_gpus().sum())
    return replace(plan, stats={"devices": devices})


def _solo_s(snapshot: Snapshot, job: Job) -> float:
    """Remaining time alone on the fastest GPU type the job accepts (rigid: its GPU count)."""
    d = demand_of(job)
    times = [t for gpu_type in job.epoch_time_s
             if (t := job.time_s(gpu_type, d.gpus, snapshot.params,
                                 continuing=job.running is not None)) is not None]
    return min(times) if times else 0.0


def _energy_options(sh: _Sharer, job: Job, demand: Demand, jobs: dict[str, Job],
                    solo: dict[str, float], snapshot: Snapshot
                    ) -> list[tuple[float, Pick]]:
    """(marginal cost, place) for each node: its empty GPUs, and (for slices) the active
    GPUs with the lowest interference that keep every bound."""
    from andreas.costs import c_ng_per_hour

    led = sh.p.ledger
    now = snapshot.now_s
    t_job = solo[job.id]
    out: list[tuple[float, Pick]] = []
    for i in sh.p.candidates(job, demand):
        node = int(i)
        if demand.cpu_milli > led.cpu_free[node] or demand.memory_mib > led.mem_free[node]:
            continue
        spec = snapshot.nodes[node]
        per_gpu_h = (c_ng_per_hour(spec.power_w[-1], snapshot.energy)
                     - c_ng_per_hour(spec.power_w[0], snapshot.energy)) / max(spec.gpus, 1)
        ok = [int(s) for s in np.flatnonzero(led.gpu_ok(demand, node))]
        empty = [s for s in ok if not led.on_gpu(node, s)]
        if len(empty) >= demand.gpus:
            slots = tuple(empty[: demand.gpus])
            cost = (job.weight * max(0.0, now + t_job - job.due_s)
                    + demand.gpus * per_gpu_h * t_job / SECONDS_PER_HOUR)
            out.append((cost, (node, slots)))
        if not demand.shared:
            continue
        shared = []
        for s in ok:
            if not led.on_gpu(node, s):
                continue
            theta = sh.gpu_check(job, demand, node, s)
            if theta is not None:
                shared.append((theta, s))
        if len(shared) < demand.gpus:
            continue
        shared.sort()
        slots = tuple(s for _, s in shared[: demand.gpus])
        out.append((_shared_cost(sh, job, demand, node, slots, jobs, solo, now, per_gpu_h),
                    (node, slots)))
    return out


def _shared_cost(sh: _Sharer, job: Job, demand: Demand, node: int, slots: tuple[int, ...],
                 jobs: dict[str, Job], solo: dict[str, float], now: float,
                 per_gpu_h: float) -> float:
    """The job's lateness with its slowdown, the lateness its presence adds to the
    co-residents, and the GPU time by which it outlasts them."""
    led = sh.p.ledger
    mine = 0.0
    added = 0.0
    gpu_s = 0.0
    for s in slots:
        before = list(led.on_gpu(node, s))
        after = [*before, (job.id, demand)]
        th_before = sh.thetas(before)
        th_after = sh.thetas(after)
        mine = max(mine, th_after[-1])
        busy_before = max(solo.get(o, 0.0) * (1 + t) for (o, _), t in zip(before, th_before))
        busy_after = busy_before
        for (owner, _), t0, t1 in zip(before, th_before, th_after[:-1]):
            other = jobs.get(owner)
            if other is None:
                continue
            end0 = now + solo.get(owner, 0.0) * (1 + t0)
            end1 = now + solo.get(owner, 0.0) * (1 + t1)
            added += other.weight * (max(0.0, end1 - other.due_s) - max(0.0, end0 - other.due_s))
            busy_after = max(busy_after, end1 - now)
        busy_after = max(busy_after, solo[job.id] * (1 + th_after[-1]))
        gpu_s += max(0.0, busy_after - busy_before)
    t_job = solo[job.id] * (1 + mine)
    return (job.weight * max(0.0, now + t_job - job.due_s) + added
            + per_gpu_h * gpu_s / SECONDS_PER_HOUR)
