"""Exhaustive enumeration of every feasible plan of a tiny on-premise snapshot.

The ground truth the heuristics are checked against: it visits each assignment of
every job to "postponed" or to (node, g) that respects node capacities, and reports the
optimum of both proxies. Exponential: meant for <= 3 nodes and <= 5 jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from andreas.costs import SECONDS_PER_HOUR
from andreas.errors import InputError
from andreas.model import Snapshot
from andreas.optimizer.problem import compile_problem

MAX_PLANS = 2_000_000


@dataclass(frozen=True, kw_only=True)
class ExactResult:
    min_f_obj: float
    max_f_bar: float
    plans: int
    argmin_f_obj: tuple[tuple[int, int], ...]   # per job (node index, gpus); (-1, 0) postponed
    argmax_f_bar: tuple[tuple[int, int], ...]


def enumerate_optimum(snapshot: Snapshot) -> ExactResult:
    """Optimum f_obj and f_bar over all feasible plans (raises InputError if too large)."""
    if snapshot.cloud:
        raise InputError("snapshot: exact enumeration supports on-premise snapshots only")
    p = compile_problem(snapshot)
    options: list[list[tuple[int, int, int]]] = []   # per job: (node, cfg, g)
    for j in range(p.n_jobs):
        opts = [(-1, -1, 0)]
        for n in range(p.n_nodes):
            k = p.node_class[n]
            for c in np.flatnonzero((p.cfg_class == k) & p.runnable[j]):
                opts.append((n, int(c), int(p.cfg_g[c])))
        options.append(opts)
    total = int(np.prod([len(o) for o in options], dtype=float))
    if total > MAX_PLANS:
        raise InputError(f"snapshot: {total} candidate plans exceed the exact limit {MAX_PLANS}")
    cap = p.class_gpus[p.node_class].astype(int).tolist()
    used = [0] * p.n_nodes
    tmin = [np.inf] * p.n_nodes
    cost_h = p.class_cost_h
    mu = snapshot.params.mu
    best = {"f_obj": np.inf, "f_bar": -np.inf, "plans": 0, "obj_at": (), "bar_at": ()}
    path: list[tuple[int, int]] = []

    def leaf(partial_obj: float, partial_bar: float) -> None:
        node_cost = 0.0
        idle = 0
        for n in range(p.n_nodes):
            if used[n]:
                node_cost += tmin[n] * cost_h[p.node_class[n], used[n]] / SECONDS_PER_HOUR
                idle += cap[n] - used[n]
        f_obj = partial_obj + node_cost + mu * idle
        best["plans"] += 1
        if f_obj < best["f_obj"]:
            best["f_obj"], best["obj_at"] = f_obj, tuple(path)
        if partial_bar > best["f_bar"]:
            best["f_bar"], best["bar_at"] = partial_bar, tuple(path)

    def visit(j: int, obj: float, bar: float) -> None:
        if j == p.n_jobs:
            leaf(obj, bar)
            return
        for n, c, g in options[j]:
            path.append((n, g))
            if n < 0:
                visit(j + 1, obj + p.post_cost[j], bar)
                path.pop()
                continue
            if used[n] + g > cap[n]:
                path.pop()
                continue
            saved = tmin[n]
            used[n] += g
            tmin[n] = min(saved, p.t[j, c])
            visit(j + 1, obj + p.tard_cost[j, c], bar + p.fbar_term[j, c])
            used[n] -= g
            tmin[n] = saved
            path.pop()

    visit(0, 0.0, 0.0)
    return ExactResult(min_f_obj=float(best["f_obj"]), max_f_bar=float(best["f_bar"]),
                       plans=best["plans"], argmin_f_obj=best["obj_at"],
                       argmax_f_bar=best["bar_at"])
