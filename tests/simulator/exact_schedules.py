"""A reference for tiny traces: the best non-preemptive schedule, found exhaustively.

Every job runs once, uninterrupted, on one configuration (a node and a GPU count on
premise; in the cloud a VM of the catalog on one node, alone there while it runs), from
a start no earlier than its submission. For each order of the jobs and each choice of
configurations, the jobs are placed in that order at the earliest start where their GPUs
are free for their whole run (list scheduling); a depth-first search over orders and
configurations, pruned by a lower bound on what a partial schedule must still cost,
returns the cheapest of these schedules, billed as the simulator bills
(``schedule_bill``). Such a schedule is one the simulator's model can run (no restart,
no lost epoch, so both progress modes bill it alike), so its bill is an upper bound on
the trace's optimum; the optimum may lie below it (a preemption, a delayed start that
shares a node's static draw, or a job that moves can pay less). With a lower bound that
meets it, the optimum is proven.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from andreas.costs import SECONDS_PER_HOUR, energy_cost
from andreas.model import Job, Node, Trace
from andreas.synthetic import random_snapshot


@dataclass(frozen=True, kw_only=True)
class Placement:
    job: str
    node: int
    gpus: int
    start_s: float
    end_s: float
    price_per_hour: float = 0.0      # cloud: the VM's price while the job runs


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    bill: float
    schedule: tuple[Placement, ...]
    complete: bool                   # False: stopped by its clock, the bill is the best found
    leaves: int


def configurations(trace: Trace, job: Job) -> list[tuple[int, int, float, float]]:
    """(node, GPUs, run seconds, VM price per hour; 0 on premise) where ``job`` can run;
    in the cloud every node is alike, so node 0 stands for them all."""
    out = []
    if trace.cloud:
        for entry in trace.catalog:
            for g in range(1, entry.gpus + 1):
                if job.runs_on(entry.gpu_type, g):
                    run = job.epochs_left * job.epoch_time_s[entry.gpu_type][g - 1]
                    out.append((0, g, run, entry.cost_per_hour))
        # per (run time), only the cheapest VM: a dearer one with the same speed never helps
        best: dict[float, tuple[int, int, float, float]] = {}
        for c in out:
            if c[2] not in best or c[3] < best[c[2]][3]:
                best[c[2]] = c
        return sorted(best.values(), key=lambda c: (c[2], c[3]))
    for n, node in enumerate(trace.nodes):
        for g in range(1, node.gpus + 1):
            if node.gpu_type is not None and job.runs_on(node.gpu_type, g):
                out.append((n, g, job.epochs_left * job.epoch_time_s[node.gpu_type][g - 1], 0.0))
    return out


def schedule_bill(trace: Trace, schedule: tuple[Placement, ...] | list[Placement]) -> float:
    """The simulator's bill of a schedule: on premise every node's ``power_w[busy GPUs]``
    from the first submission to the last completion (idle nodes at ``power_w[0]``) x PUE
    x price; in the cloud each VM's price while it runs a job; plus weighted tardiness."""
    by_id = {j.id: j for j in trace.jobs}
    t0 = min(j.submit_s for j in trace.jobs)
    end = max(p.end_s for p in schedule)
    tardiness = sum(by_id[p.job].weight * max(0.0, p.end_s - by_id[p.job].due_s)
                    for p in schedule)
    if trace.cloud:
        return sum(p.price_per_hour * (p.end_s - p.start_s) / SECONDS_PER_HOUR
                   for p in schedule) + tardiness
    joules = 0.0
    for n, node in enumerate(trace.nodes):
        mine = [p for p in schedule if p.node == n]
        cuts = sorted({t0, end, *(p.start_s for p in mine), *(p.end_s for p in mine)})
        for a, b in itertools.pairwise(cuts):
            busy = sum(p.gpus for p in mine if p.start_s <= a and p.end_s >= b)
            joules += node.power_w[busy] * (b - a)
    return energy_cost(joules, trace.energy) + tardiness


def _earliest(timeline: list[tuple[float, float, int]], gpus: int, capacity: int,
              ready_s: float, run_s: float) -> float:
    """The earliest start >= ready_s with ``gpus`` free for ``run_s`` on a node holding
    ``timeline`` (start, end, GPUs) of ``capacity`` GPUs."""
    for start in sorted({ready_s, *(e for _, e, _ in timeline if e > ready_s)}):
        points = {start, *(s for s, _, _ in timeline if start < s < start + run_s)}
        if all(sum(g for s, e, g in timeline if s <= t < e) + gpus <= capacity
               for t in points):
            return start
    raise AssertionError("a node's last end always leaves it free")


def best_non_preemptive(trace: Trace, *, time_limit_s: float = 60.0) -> SearchResult:
    """The cheapest list schedule over every order and every choice of configurations
    (module doc); ``complete`` False if ``time_limit_s`` stopped the search first."""
    jobs = sorted(trace.jobs, key=lambda j: (j.due_s, j.id))   # EDF first: a good incumbent
    configs = {j.id: configurations(trace, j) for j in jobs}
    t0 = min(j.submit_s for j in jobs)
    cloud = trace.cloud
    nodes = len(trace.nodes)
    capacity = [1] * nodes if cloud else [n.gpus for n in trace.nodes]
    idle_per_s = 0.0 if cloud else energy_cost(sum(n.power_w[0] for n in trace.nodes),
                                               trace.energy)
    # the least a GPU-second costs above idle on each node (the bound's envelope)
    per_gpu_s = [0.0] * nodes if cloud else [
        energy_cost(min((n.power_w[g] - n.power_w[0]) / g for g in range(1, n.gpus + 1)),
                    trace.energy) for n in trace.nodes]
    best = [math.inf, ()]
    leaves = [0]
    deadline = time.perf_counter() + time_limit_s
    stopped = [False]
    timelines: list[list[tuple[float, float, int]]] = [[] for _ in range(nodes)]

    def dfs(left: list[Job], placed: list[Placement], spent: float, end: float) -> None:
        if stopped[0] or time.perf_counter() > deadline:
            stopped[0] = True
            return
        if not left:
            leaves[0] += 1
            bill = schedule_bill(trace, placed)
            if bill < best[0]:
                best[0], best[1] = bill, tuple(placed)
            return
        for i, job in enumerate(left):
            rest = left[:i] + left[i + 1:]
            for node, g, run, price in configs[job.id]:
                targets = range(nodes) if cloud else (node,)
                # in the cloud the nodes are alike: the one free first
                start, where = min((_earliest(timelines[k], 1 if cloud else g, capacity[k],
                                              job.submit_s, run), k) for k in targets)
                stop = start + run
                cost = (price * run / SECONDS_PER_HOUR if cloud
                        else per_gpu_s[where] * g * run)
                cost += job.weight * max(0.0, stop - job.due_s)
                new_end = max(end, stop)
                if spent + cost + idle_per_s * (new_end - t0) >= best[0]:
                    continue
                timelines[where].append((start, stop, 1 if cloud else g))
                placed.append(Placement(job=job.id, node=where, gpus=g, start_s=start,
                                        end_s=stop, price_per_hour=price))
                dfs(rest, placed, spent + cost, new_end)
                placed.pop()
                timelines[where].pop()

    dfs(jobs, [], 0.0, t0)
    return SearchResult(bill=best[0], schedule=best[1], complete=not stopped[0],
                        leaves=leaves[0])


@dataclass(frozen=True, kw_only=True)
class SlotOptimum:
    bill: float          # the model's objective: >= the bill of its schedule (see below)
    dual: float          # HiGHS' dual bound of the slot model (not a bound on the trace)
    optimal: bool        # the slot model solved to a proven optimum
    slots: int
    slot_s: float


def slot_optimum(trace: Trace, *, horizon_s: float, slots: int = 48,
                 time_limit_s: float = 60.0) -> SlotOptimum | None:
    """The cheapest schedule that decides only at slot boundaries, as a MILP on HiGHS.

    ``horizon_s`` from the first submission is cut into ``slots`` equal slots (the caller
    takes it from a known schedule's makespan, with room for rounding to slots). In each
    slot a job runs one configuration for the whole slot or not at all (on premise a node
    and a GPU count; in the cloud a node, its VM of the catalog and a GPU count), from its
    first slot that starts at or after its submission; it may stop, resume, move and
    resize at any boundary, as in the papers' mode (exact progress, no restart
    overhead). Capacity per node and slot (in the cloud one VM per node and slot, paid
    for the whole slot); a job's work sums to 1; its completion counts at the end of its
    last slot and the idle draw runs to the last of them. Its schedule run in the papers'
    mode stops each job when its work is done, so it bills at most the model's figure:
    the optimum of the slot model is a feasible bill, an upper bound on the optimum of
    the trace (papers' mode); the optimum of the slot model, not of the trace, is what
    ``optimal`` proves. Node power must be linear in the busy GPUs (the generated
    nodes are) so that each job's share of a node's draw adds up. None if HiGHS found
    no schedule in the time."""
    import highspy

    jobs = list(trace.jobs)
    t0 = min(j.submit_s for j in jobs)
    runs = {j.id: configurations(trace, j) for j in jobs}
    slot = horizon_s / slots
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    col = [0]

    def var(cost: float, upper: float = 1.0, binary: bool = False) -> int:
        h.addCol(cost, 0.0, upper, 0, [], [])
        if binary:
            h.changeColIntegrality(col[0], highspy.HighsVarType.kInteger)
        col[0] += 1
        return col[0] - 1

    def row(lower: float, upper: float, idx: list[int], val: list[float]) -> None:
        h.addRow(lower, upper, len(idx), np.array(idx, dtype=np.int32),
                 np.array(val, dtype=float))

    makespan = var(_idle_per_s(trace), upper=math.inf)
    use: dict[tuple[int, int], tuple[list[int], list[float]]] = {}   # (node or VM col, t)
    vm: dict[tuple[int, str, int], int] = {}
    if trace.cloud:
        for n in range(len(trace.nodes)):
            for t in range(slots):
                cols = [var(e.cost_per_hour * slot / SECONDS_PER_HOUR, binary=True)
                        for e in trace.catalog]
                row(-math.inf, 1.0, cols, [1.0] * len(cols))
                for e, c in zip(trace.catalog, cols):
                    vm[(n, e.name, t)] = c
                    use[(c, t)] = ([c], [-float(e.gpus)])
    for job in jobs:
        first = max(0, math.ceil((job.submit_s - t0) / slot - 1e-9))
        work: tuple[list[int], list[float]] = ([], [])
        done = var(0.0, upper=math.inf)                  # completion - t0
        for t in range(first, slots):
            here = []
            for node, g, run_s, _ in runs[job.id]:
                for n, e in _places(trace, job, node, g, run_s):
                    marginal = 0.0
                    if not trace.cloud:
                        power = trace.nodes[n].power_w
                        marginal = energy_cost((power[g] - power[0]) * slot, trace.energy)
                    x = var(marginal, binary=True)
                    here.append(x)
                    work[0].append(x)
                    work[1].append(slot / run_s)
                    key = (vm[(n, e.name, t)], t) if e is not None else (-1 - n, t)
                    use.setdefault(key, ([], []))
                    use[key][0].append(x)
                    use[key][1].append(float(g))
            row(-math.inf, 1.0, here, [1.0] * len(here))
            # done >= (t + 1) slot when the job runs in slot t
            row(0.0, math.inf, [done] + here, [1.0] + [-(t + 1) * slot] * len(here))
        row(1.0, math.inf, *work)
        late = var(job.weight, upper=math.inf)
        row(t0 - job.due_s, math.inf, [late, done], [1.0, -1.0])
        row(0.0, math.inf, [makespan, done], [1.0, -1.0])
    for (key, _), (idx, val) in use.items():
        capacity = 0.0 if trace.cloud else float(trace.nodes[-1 - key].gpus)
        row(-math.inf, capacity, idx, val)
    h.run()
    info = h.getInfo()
    if not h.getSolution().value_valid:
        return None
    return SlotOptimum(bill=float(info.objective_function_value),
                       dual=float(info.mip_dual_bound),
                       optimal=h.getModelStatus() == highspy.HighsModelStatus.kOptimal,
                       slots=slots, slot_s=slot)


def tiny_trace(seed: int, nodes: int, jobs: int, *, cloud: bool = False,
               scenario: int = 1, slack: tuple[float, float] = (1.0, 2.0)) -> Trace:
    """A tiny trace: the synthetic snapshot's jobs and nodes, at most 2 GPUs per node or
    VM, submitted within half the time the jobs need at their fastest per node, each due
    ``slack`` (drawn in that range) times its fastest run after its submission."""
    rng = np.random.default_rng(seed)
    snap = random_snapshot(rng, nodes, jobs, scenario=scenario, cloud=cloud,
                           running_share=0.0)
    if cloud:
        catalog = tuple(e for e in snap.catalog if e.gpus <= 2)
        out_nodes = snap.nodes
    else:
        catalog = ()
        out_nodes = tuple(dataclasses.replace(n, gpus=min(n.gpus, 2),
                                              power_w=tuple(n.power_w[:3]))
                          for n in snap.nodes)
    fastest = [min(min(t[:2]) for t in j.epoch_time_s.values()) * j.epochs for j in snap.jobs]
    window = 0.5 * sum(fastest) / nodes
    submits = np.sort(rng.uniform(0, window, size=jobs))
    out = []
    for job, submit, run in zip(snap.jobs, submits, fastest):
        out.append(Job(id=job.id, app=job.app, submit_s=float(submit),
                       due_s=float(submit + rng.uniform(*slack) * run), weight=job.weight,
                       epochs=job.epochs,
                       epoch_time_s={t: tuple(v[:2]) for t, v in job.epoch_time_s.items()}))
    return Trace(nodes=out_nodes, jobs=tuple(out), catalog=catalog,
                 name=f"tiny-{'cloud' if cloud else 'op'}-n{nodes}-j{jobs}-s{seed}")



def _idle_per_s(trace: Trace) -> float:
    """Money per second of every node's idle draw (0 in the cloud); refuses a node whose
    power is not linear in its busy GPUs (the slot model adds up per-job shares)."""
    if trace.cloud:
        return 0.0
    for node in trace.nodes:
        a = node.power_w[1] - node.power_w[0]
        if any(abs(node.power_w[g] - node.power_w[0] - g * a) > 1e-6
               for g in range(1, node.gpus + 1)):
            raise ValueError(f"node {node.name}: power not linear in its busy GPUs")
    return energy_cost(sum(n.power_w[0] for n in trace.nodes), trace.energy)


def _places(trace: Trace, job: Job, node: int, gpus: int, run_s: float) -> list:
    """(node, catalog entry or None) where a configuration of ``job`` can run: on premise
    its own node; in the cloud every node, on every VM with the GPUs and that run time."""
    if not trace.cloud:
        return [(node, None)]
    return [(n, e) for n in range(len(trace.nodes)) for e in trace.catalog
            if e.gpus >= gpus and job.runs_on(e.gpu_type, gpus)
            and abs(job.epochs_left * job.epoch_time_s[e.gpu_type][gpus - 1] - run_s) < 1e-9]


UNIT_S = 3600.0


def unit_trace(seed: int, jobs: int) -> Trace:
    """A tiny trace whose optimum the slot model finds exactly: one node with one GPU, rigid
    jobs of whole hours, submitted and due on whole hours. An optimal schedule of one
    machine for a cost that grows with completion times (weighted tardiness, and the idle
    draw to the makespan; the busy energy is fixed) switches jobs only at submissions and
    completions, so here only on whole hours: hour slots lose nothing, and the slot
    model's proven optimum is the optimum of the trace in the papers' mode."""
    rng = np.random.default_rng(seed)
    node = Node(name="n001", gpu_type="T4", gpus=1, power_w=(160.0, 235.0))
    hours = [int(rng.integers(1, 5)) for _ in range(jobs)]
    submits = sorted(int(rng.integers(0, max(1, sum(hours) // 2) + 1)) for _ in range(jobs))
    out = []
    for i, (run, submit) in enumerate(zip(hours, submits)):
        out.append(Job(id=f"u{i + 1}", submit_s=submit * UNIT_S,
                       due_s=(submit + run + int(rng.integers(0, 4))) * UNIT_S,
                       weight=float(rng.uniform(0.003, 0.015)), epochs=6 * run,
                       epoch_time_s={"T4": (600.0,)}))
    return Trace(nodes=(node,), jobs=tuple(out), name=f"unit-j{jobs}-s{seed}")
