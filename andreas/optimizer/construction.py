"""The randomized construction procedure (ANDREAS Algorithm 1), B constructions at once.

The MaxIt constructions are independent, so they advance together: at step k every
construction places the job at position k of its own (randomly perturbed) queue.
State is kept as arrays of shape (B, N) per node and (B, K, L) counts of open nodes of
class k with l free GPUs, so choosing a best-fit node is a few array operations on
small axes; only locating the concrete node touches a (B, N) array.

Row 0 is the deterministic greedy (no swaps, best configuration, exact best fit), so
the best of a batch is never worse than the greedy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from andreas.costs import SECONDS_PER_HOUR
from andreas.optimizer.problem import Problem

DEFAULT_SWAP_SCALE = 0.5


@dataclass(frozen=True, eq=False)
class Batch:
    """B complete solutions: node index and configuration per job (-1: postponed)."""

    node: np.ndarray        # (B, J) int
    cfg: np.ndarray         # (B, J) int
    node_cls: np.ndarray    # (B, N) class each node is configured with (-1: unused)
    f_obj: np.ndarray       # (B,)
    f_bar: np.ndarray       # (B,)


def construct(problem: Problem, iterations: int, rng: np.random.Generator, *,
              randomize: bool = True, alpha: float = 0.05,
              swap_scale: float = DEFAULT_SWAP_SCALE) -> Batch:
    """Build ``iterations`` schedules; row 0 is deterministic when ``randomize``."""
    b, nj = iterations, problem.n_jobs
    state = _State(problem, b)
    order = np.tile(problem.queue, (b, 1))
    rand_rows = np.ones(b, dtype=bool) if randomize else np.zeros(b, dtype=bool)
    rand_rows[0] = False
    best_cfg = problem.best_cfg()
    if randomize and nj:
        cdf = problem.choice_cdf(alpha)
        wpos = problem.weight[problem.weight > 0]
        wmin = wpos.min() if wpos.size else 1.0
        with np.errstate(divide="ignore"):
            p_swap = np.where(problem.weight > 0, swap_scale * wmin / problem.weight, swap_scale)
    rows_all = np.arange(b)
    for k in range(nj):
        if not state.any_capacity():
            state.postpone_rest(order[:, k:])
            break
        if randomize and k + 1 < nj:
            swap = rand_rows & (rng.random(b) < p_swap[order[:, k]])
            if swap.any():
                r = np.flatnonzero(swap)
                order[r, k], order[r, k + 1] = order[r, k + 1], order[r, k].copy()
        j = order[:, k]
        cfg = best_cfg[j]
        if randomize:
            u = rng.random(b)
            drawn = (cdf[j] < u[:, None]).sum(axis=1)
            cfg = np.where(rand_rows, drawn, cfg)
            level_u = rng.random(b)
        else:
            level_u = None
        placed = state.place(rows_all, j, cfg, rand_rows if randomize else None, level_u)
        if not placed.all():
            rest = rows_all[~placed]
            state.place_fallback(rest, j[rest])
    return state.result()


class _State:
    """Mutable arrays of a batch under construction."""

    def __init__(self, p: Problem, b: int) -> None:
        self.p = p
        n, k, levels = p.n_nodes, len(p.class_name), p.n_levels
        self.free = np.zeros((b, n), dtype=np.int64)
        if not p.cloud:
            self.free[:] = p.class_gpus[p.node_class]
        self.used = np.zeros((b, n), dtype=np.int64)
        self.tmin = np.full((b, n), np.inf)
        self.node_cls = np.tile(p.node_class, (b, 1))
        self.cnt = np.zeros((b, k, levels), dtype=np.int64)   # open nodes by free level
        self.opened_cls = np.zeros((b, k), dtype=np.int64)      # on-premise: opened per class
        self.opened = np.zeros(b, dtype=np.int64)               # cloud: opened in all
        self.out_node = np.full((b, p.n_jobs), -1, dtype=np.int64)
        self.out_cfg = np.full((b, p.n_jobs), -1, dtype=np.int64)
        self.tard = np.zeros(b)
        self.post = np.zeros(b)
        self.fbar = np.zeros(b)
        self.levels = np.arange(levels)
        # total GPUs that could still be handed out, per row
        self.capacity = np.full(b, int(p.class_gpus[p.node_class].sum()) if not p.cloud
                                else int(p.class_gpus.max()) * n)

    def any_capacity(self) -> bool:
        return bool((self.capacity > 0).any())

    def closed_all(self, rows: np.ndarray) -> np.ndarray:
        """(R, K): whether a node of each class can still be opened."""
        if self.p.cloud:
            return np.broadcast_to((self.opened[rows] < self.p.n_nodes)[:, None],
                                   (len(rows), len(self.p.class_name)))
        return self.opened_cls[rows] < self.p.class_count[None, :]

    def closed_ok(self, rows: np.ndarray, k: np.ndarray) -> np.ndarray:
        if self.p.cloud:
            return self.opened[rows] < self.p.n_nodes
        return self.opened_cls[rows, k] < self.p.class_count[k]

    def place(self, rows, j, cfg, rand_rows, level_u) -> np.ndarray:
        """Best fit of configuration ``cfg`` for job ``j`` in each row; returns placed mask."""
        p = self.p
        k, g = p.cfg_class[cfg], p.cfg_g[cfg]
        lv = self.cnt[rows, k, :]
        ok = (lv > 0) & (self.levels >= g[:, None])
        open_fit = ok.any(axis=1)
        level = np.argmax(ok, axis=1)                       # exact best fit: fewest left idle
        if rand_rows is not None:
            r = rand_rows & open_fit
            if r.any():
                w = np.where(ok[r], lv[r] / np.maximum(1.0 + self.levels - g[r, None], 1.0), 0.0)
                cum = np.cumsum(w, axis=1)
                pick = (cum <= (level_u[r] * cum[:, -1])[:, None]).sum(axis=1)
                level[r] = np.minimum(pick, self.levels[-1])
        opening = ~open_fit & self.closed_ok(rows, k)
        if open_fit.any():
            ro = rows[open_fit]
            ko, lo = k[open_fit], level[open_fit]
            hit = ((self.node_cls[ro] == ko[:, None]) & (self.free[ro] == lo[:, None])
                   & (self.used[ro] > 0))
            node = np.argmax(hit, axis=1)
            self.cnt[ro, ko, lo] -= 1
            self._assign(ro, j[open_fit], cfg[open_fit], node)
        if opening.any():
            ro, ko = rows[opening], k[opening]
            if p.cloud:
                node = self.opened[ro].copy()
                self.opened[ro] += 1
                self.node_cls[ro, node] = ko
                self.free[ro, node] = p.class_gpus[ko]
                # a newly configured VM's GPUs become available
                self.capacity[ro] -= p.class_gpus.max() - p.class_gpus[ko]
            else:
                node = p.class_nodes[ko, self.opened_cls[ro, ko]]
                self.opened_cls[ro, ko] += 1
            self._assign(ro, j[opening], cfg[opening], node)
        return open_fit | opening

    def _assign(self, rows, j, cfg, node) -> None:
        p = self.p
        g = p.cfg_g[cfg]
        k = p.cfg_class[cfg]
        self.free[rows, node] -= g
        self.used[rows, node] += g
        self.capacity[rows] -= g
        t = p.t[j, cfg]
        self.tmin[rows, node] = np.minimum(self.tmin[rows, node], t)
        self.cnt[rows, k, self.free[rows, node]] += 1
        self.out_node[rows, j] = node
        self.out_cfg[rows, j] = cfg
        self.tard[rows] += p.tard_cost[j, cfg]
        self.fbar[rows] += p.fbar_term[j, cfg]

    def place_fallback(self, rows, j) -> None:
        """ASSIGN_TO_SUBOPTIMAL: the first configuration in preference order that fits."""
        p = self.p
        # ge[r, k, l]: some open node of class k has at least l free GPUs
        ge = np.flip(np.cumsum(np.flip(self.cnt[rows] > 0, axis=2), axis=2), axis=2) > 0
        fits = ge[:, p.cfg_class, p.cfg_g] | self.closed_all(rows)[:, p.cfg_class]
        fits &= p.runnable[j]
        ranked = np.take_along_axis(fits, p.pref[j], axis=1)
        any_fit = ranked.any(axis=1)
        if any_fit.any():
            pick = np.argmax(ranked[any_fit], axis=1)
            cfg = p.pref[j[any_fit], pick]
            placed = self.place(rows[any_fit], j[any_fit], cfg, None, None)
            assert placed.all()
        if not any_fit.all():
            self.post[rows[~any_fit]] += p.post_cost[j[~any_fit]]

    def postpone_rest(self, rest: np.ndarray) -> None:
        self.post += self.p.post_cost[rest].sum(axis=1)

    def result(self) -> Batch:
        p = self.p
        busy = self.used > 0
        cls = np.where(busy, self.node_cls, 0)
        hourly = p.class_cost_h[cls, self.used]
        node_cost = (np.where(busy, self.tmin, 0.0) * hourly / SECONDS_PER_HOUR).sum(axis=1)
        idle = np.where(busy, self.free, 0).sum(axis=1)
        f_obj = self.tard + self.post + node_cost + p.snapshot.params.mu * idle
        return Batch(node=self.out_node, cfg=self.out_cfg, node_cls=self.node_cls,
                     f_obj=f_obj, f_bar=self.fbar)
