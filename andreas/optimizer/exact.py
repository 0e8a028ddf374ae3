"""Exhaustive enumeration of every feasible plan of a tiny snapshot (on premise or cloud).

The ground truth the heuristics and the MILP are checked against: it visits each
assignment of every job to "postponed" or to (node, g) that respects node capacities,
and reports the optimum of the proxies (f_obj, f_bar, and f_mix, what greedy, rg and pr
minimise in the cloud). In cloud mode each node also chooses a catalog
entry or stays closed; cloud nodes are interchangeable, so only one node layout per
multiset of entries is visited (every layout where moves cost something: a running job
continues only on its own node). Exponential: meant for <= 3 nodes and <= 5 jobs.

With ``work_conserving`` (the default, as for ``milp``) only plans that postpone a job
when no node has room for it count: on premise every node of a class the job runs on has
fewer free GPUs than the fewest it runs on; in the cloud every node is open, and every
open node of a GPU type the job runs on has fewer free GPUs than that at the type's
largest VM. f_obj alone would leave on-time jobs waiting next to idle GPUs (postponing
them is free); this is the restriction the heuristics' constructions obey and milp's
work-conserving rows impose. ``postponed_that_fit`` checks a Plan against the same rule,
from the snapshot alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations_with_replacement, product
from typing import Any

import numpy as np

from andreas.costs import SECONDS_PER_HOUR
from andreas.errors import InputError
from andreas.model import Job, Plan, Snapshot
from andreas.optimizer.problem import Problem, compile_problem

MAX_PLANS = 2_000_000
CLOSED = -1


@dataclass(frozen=True, kw_only=True)
class ExactResult:
    min_f_obj: float
    max_f_bar: float
    min_f_mix: float     # = min_f_obj on premise (costs.evaluate)
    plans: int
    argmin_f_obj: tuple[tuple[int, int], ...]   # per job (node index, gpus); (-1, 0) postponed
    argmax_f_bar: tuple[tuple[int, int], ...]
    # cloud: per node the catalog entry it runs in that plan (None: closed); () on premise
    argmin_node_configs: tuple[str | None, ...] = ()
    argmax_node_configs: tuple[str | None, ...] = ()
    argmin_f_mix: tuple[tuple[int, int], ...] = ()
    argmin_mix_configs: tuple[str | None, ...] = ()


def _layouts(p: Problem) -> Iterator[tuple[int, ...]]:
    """Class of every node: fixed on premise; in cloud each multiset of entries (or closed)."""
    if not p.cloud:
        yield tuple(int(k) for k in p.node_class)
        return
    if p.has_moves:     # a node's identity matters (a job continues on its own node)
        yield from product(range(CLOSED, len(p.class_gpus)), repeat=p.n_nodes)
        return
    yield from combinations_with_replacement(range(CLOSED, len(p.class_gpus)), p.n_nodes)


def _options(p: Problem, layout: tuple[int, ...]) -> list[list[tuple[int, int, int]]]:
    """Per job: postponed, or (node, cfg, g) for each runnable configuration of its node's class."""
    options = []
    for j in range(p.n_jobs):
        opts = [(-1, -1, 0)]
        for n, k in enumerate(layout):
            if k == CLOSED:
                continue
            for c in np.flatnonzero((p.cfg_class == k) & p.runnable[j]):
                opts.append((n, int(c), int(p.cfg_g[c])))
        options.append(opts)
    return options


def enumerate_optimum(snapshot: Snapshot, *, work_conserving: bool = True) -> ExactResult:
    """Optimum f_obj and f_bar over all feasible (by default: work-conserving) plans;
    raises InputError if too large."""
    p = compile_problem(snapshot)
    layouts = list(_layouts(p))
    total = sum(int(np.prod([len(o) for o in _options(p, lay)], dtype=float)) for lay in layouts)
    if total > MAX_PLANS:
        raise InputError(f"snapshot: {total} candidate plans exceed the exact limit {MAX_PLANS}")
    best: dict[str, Any] = {"f_obj": np.inf, "f_bar": -np.inf, "f_mix": np.inf, "plans": 0,
                            "obj_at": (), "bar_at": (), "obj_cfg": (), "bar_cfg": (),
                            "mix_at": (), "mix_cfg": ()}
    blocked = _blocked_test(p) if work_conserving else None
    for layout in layouts:
        _search(p, layout, best, snapshot.params.mu, blocked)
    return ExactResult(min_f_obj=float(best["f_obj"]), max_f_bar=float(best["f_bar"]),
                       min_f_mix=float(best["f_mix"]), plans=best["plans"],
                       argmin_f_obj=best["obj_at"],
                       argmax_f_bar=best["bar_at"], argmin_node_configs=best["obj_cfg"],
                       argmax_node_configs=best["bar_cfg"], argmin_f_mix=best["mix_at"],
                       argmin_mix_configs=best["mix_cfg"])


def _fewest_gpus(p: Problem, key: np.ndarray, width: int) -> np.ndarray:
    """(J, width) the fewest GPUs each job runs on per key value of its configuration (0:
    none); written apart from milp's ``fewest_gpus`` so the cross-check stays a check."""
    out = np.zeros((p.n_jobs, width), dtype=np.int64)
    for j in range(p.n_jobs):
        for c in np.flatnonzero(p.runnable[j]):
            v, g = int(key[c]), int(p.cfg_g[c])
            if out[j, v] == 0 or g < out[j, v]:
                out[j, v] = g
    return out


Fits = Callable[[int, tuple[int, ...], list[int]], bool]


def _blocked_test(p: Problem) -> Fits:
    """``fits(j, layout, used)``: some node could still take postponed job j."""
    if not p.cloud:
        need = _fewest_gpus(p, p.cfg_class, len(p.class_gpus))

        def fits(j: int, layout: tuple[int, ...], used: list[int]) -> bool:
            return any(0 < need[j, k] <= p.class_gpus[k] - used[n]
                       for n, k in enumerate(layout))
        return fits
    types = sorted(set(p.class_type))
    type_of = np.array([types.index(t) for t in p.class_type])
    need = _fewest_gpus(p, type_of[p.cfg_class], len(types))
    largest = [max(int(g) for g, t in zip(p.class_gpus, type_of) if t == v)
               for v in range(len(types))]
    anywhere = need.max(axis=1, initial=0) > 0

    def fits_vm(j: int, layout: tuple[int, ...], used: list[int]) -> bool:
        for n, k in enumerate(layout):
            if used[n] == 0:        # closed (or opened for nothing): any VM could start
                if anywhere[j]:
                    return True
                continue
            v = type_of[k]
            if 0 < need[j, v] <= largest[v] - used[n]:
                return True
        return False
    return fits_vm


def postponed_that_fit(snapshot: Snapshot, plan: Plan) -> tuple[str, ...]:
    """Postponed jobs that some node could still run (see the module docstring), from the
    snapshot and the plan alone: () for a work-conserving plan."""
    busy: dict[str, int] = {}
    for a in plan.assignments:
        busy[a.node] = busy.get(a.node, 0) + a.gpus
    jobs = {j.id: j for j in snapshot.jobs}
    catalog = {c.name: c for c in snapshot.catalog}
    largest: dict[str, int] = {}
    for c in snapshot.catalog:
        largest[c.gpu_type] = max(largest.get(c.gpu_type, 0), c.gpus)

    def runs(job: Job, gpu_type: str, free: int) -> bool:
        return any(job.remaining_s(gpu_type, g) is not None for g in range(1, free + 1))

    out = []
    for job_id in plan.postponed:
        job = jobs[job_id]
        for node in snapshot.nodes:
            used = busy.get(node.name, 0)
            if not snapshot.cloud:
                assert node.gpu_type is not None      # on premise every node has its type
                fit = runs(job, node.gpu_type, node.gpus - used)
            elif used == 0:
                fit = any(runs(job, c.gpu_type, c.gpus) for c in snapshot.catalog)
            else:
                gpu_type = catalog[plan.node_configs[node.name]].gpu_type
                fit = runs(job, gpu_type, largest[gpu_type] - used)
            if fit:
                out.append(job_id)
                break
    return tuple(out)


def _moves(p: Problem, path: list[tuple[int, int]], cfgs: list[int]) -> float:
    """Move costs of a path whose nodes are physical (``_layouts`` with move costs)."""
    total = 0.0
    for j, ((n, _), c) in enumerate(zip(path, cfgs)):
        if p.run_node[j] < 0:
            continue
        if n < 0:
            total += p.mv_stop[j]
        elif p.cfg_base[c] != p.run_cfg[j]:
            total += p.mv_change[j]
        elif n != p.run_node[j]:
            total += p.mv_same[j]
    return total


def _search(p: Problem, layout: tuple[int, ...], best: dict, mu: float,
            blocked: Fits | None = None) -> None:
    """Depth-first over the jobs of one node layout, updating ``best`` at every leaf
    (with ``blocked``, only at the work-conserving ones)."""
    options = _options(p, layout)
    cap = [int(p.class_gpus[k]) if k != CLOSED else 0 for k in layout]
    used = [0] * p.n_nodes
    tmin = [np.inf] * p.n_nodes
    cost_h = p.class_cost_h
    path: list[tuple[int, int]] = []
    cfgs: list[int] = []

    def configs() -> tuple[str | None, ...]:
        if not p.cloud:
            return ()
        return tuple(p.class_name[k] if used[n] else None for n, k in enumerate(layout))

    def leaf(partial_obj: float, partial_bar: float, partial_mix: float) -> None:
        if blocked is not None and any(n < 0 and blocked(j, layout, used)
                                       for j, (n, _) in enumerate(path)):
            return
        node_cost = idle_cost = 0.0
        idle = 0
        for n in range(p.n_nodes):
            if used[n]:
                hourly = cost_h[layout[n], used[n]]
                node_cost += tmin[n] * hourly / SECONDS_PER_HOUR
                idle += cap[n] - used[n]
                idle_cost += tmin[n] * hourly * (cap[n] - used[n]) / cap[n] / SECONDS_PER_HOUR
        moves = _moves(p, path, cfgs) if p.has_moves else 0.0
        f_obj = partial_obj + node_cost + mu * idle + moves
        f_mix = partial_mix + idle_cost + mu * idle + moves if p.cloud else f_obj
        if f_mix < best["f_mix"]:
            best["f_mix"], best["mix_at"], best["mix_cfg"] = f_mix, tuple(path), configs()
        best["plans"] += 1
        if f_obj < best["f_obj"]:
            best["f_obj"], best["obj_at"], best["obj_cfg"] = f_obj, tuple(path), configs()
        if partial_bar > best["f_bar"]:
            best["f_bar"], best["bar_at"], best["bar_cfg"] = partial_bar, tuple(path), configs()

    def visit(j: int, obj: float, bar: float, mix: float) -> None:
        if j == p.n_jobs:
            leaf(obj, bar, mix)
            return
        for n, c, g in options[j]:
            path.append((n, g))
            cfgs.append(c)
            if n < 0:
                visit(j + 1, obj + p.post_cost[j], bar, mix + p.post_cost[j])
                path.pop()
                cfgs.pop()
                continue
            if used[n] + g > cap[n]:
                path.pop()
                cfgs.pop()
                continue
            saved = tmin[n]
            used[n] += g
            tmin[n] = min(saved, p.t_energy[j, c])
            visit(j + 1, obj + p.job_cost[j, c], bar + p.fbar_term[j, c],
                  mix + p.job_cost[j, c] + p.rank[j, c])
            used[n] -= g
            tmin[n] = saved
            path.pop()
            cfgs.pop()

    visit(0, 0.0, 0.0, 0.0)
