"""Path relinking (path-relinking paper Algorithm 2, thesis §3), and pr's final choice.

1. The randomized construction (rg's, see greedy.py and construction.py) builds MaxIt_RG
   solutions; the sigma best distinct ones by f_bar (distinct job setups, the paper's
   notion of equivalence) form the elite pool.
2. From the best elite, a path is walked towards every other elite. A move (j, n) gives
   job j the setup (class, g) it has in the target, on a node n of the source that fits
   it (best fit; or postpones j when the target does). Each move is valued by its own
   change of f_bar plus the best change of a move it newly enables (one-step
   look-ahead: moves blocked for lack of GPUs that the freed GPUs unblock). The best
   move is applied while it improves; values are cached and reused while the classes
   of nodes they depend on are unchanged (exact, so the cache changes no decision).
3. Post-processing: in cloud mode a node with idle GPUs is downsized to a smaller VM of
   the same GPU type; then a node's idle GPUs go to its job with the best speed-up. We
   keep such a change only when f_bar does not drop, so the result is never worse than
   the best elite (the paper applies it unconditionally).
4. The final choice (andreas; the paper returns the relinked solution by f_bar), by the
   objective rg minimises (f_obj on premise, f_mix in the cloud; ``costs.evaluate``):
   when the lowest-objective construction leaves a job waiting
   (``window_when="postponed"``, the default: GPUs are short), among the constructions
   within ``slack`` (20 % on premise, 0 in the cloud) of the lowest objective of the
   batch, the one that restarts the fewest running jobs (then the lower objective); when
   it runs every job, the lowest objective (ties: fewer restarts), as rg. The relinked
   solution replaces the choice only if its objective is lower and it restarts no more
   jobs. So pr's objective is at most (1 + slack) times rg's (the same batch).

Why, measured in the simulator (docs/design/objectives.md, "pr's window"): f_bar's plans
cost more than rg's under load (it has no term for postponed jobs), and so did picking
pr's plan by f_obj alone: every decision then reshuffles near-equal plans and running
jobs redo partial epochs. Plans that keep running jobs as they are, within a small f_obj
slack, cost less than rg's over overloaded traces; but a window at every decision cost
more on traces overloaded only in bursts, where the steady plan keeps jobs on slow node
classes for hours while nothing waits, hence ``window_when="postponed"``. In the cloud
the window cost more than rg (steady plans keep VMs that a cheaper packing would
resize): there the slack is 0, and the relinked solution is compared by the whole f_mix,
idle-GPU term included, or pr takes relinked plans that idle GPUs.

The published C++ implementation caps its elite pool at one solution, so its relinking
never runs; ``Plan.stats`` counts this one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from andreas.errors import InputError
from andreas.model import Plan, Snapshot
from andreas.costs import objective_name
from andreas.optimizer.construction import (DEFAULT_SWAP_SCALE, SEARCH, compile_ordered,
                                            construct)
from andreas.optimizer.greedy import (energy_price_of, fallback_margin, falls_back,
                                     keep_node_of, keeps_greedy, move_margin_of)
from andreas.optimizer.kernels import evaluate_row, move_cost_row
from andreas.optimizer.greedy import DEFAULT_ITERATIONS, PR_ALPHA
from andreas.optimizer.problem import DEFAULT_ORDER, Problem
from andreas.optimizer.solution import restarts, to_plan

DEFAULT_SIGMA = 10
DEFAULT_SLACK = 0.2        # on premise
CLOUD_SLACK = 0.0          # cloud: the best f_obj, restarts break ties (measured)
# when the window applies: "always", or "postponed" (only when the best plan leaves a job
# waiting: the cluster is short of GPUs; otherwise pr takes the best f_obj like rg)
WINDOW_WHEN = ("always", "postponed")
DEFAULT_WINDOW_WHEN = "postponed"
EPS = 1e-9


@dataclass(eq=False)
class Solution:
    """One mutable schedule: per job node and configuration, per node class and load."""

    node: np.ndarray   # (J,) node index or -1
    cfg: np.ndarray    # (J,) configuration or -1
    ncls: np.ndarray   # (N,) class of each node (cloud: -1 while closed)
    used: np.ndarray   # (N,)
    value: float       # f_bar

    def copy(self) -> Solution:
        return Solution(self.node.copy(), self.cfg.copy(), self.ncls.copy(), self.used.copy(),
                        self.value)


class Relinker:
    """Walks paths between elite solutions; counts what it finds and applies."""

    def __init__(self, problem: Problem, max_steps: int) -> None:
        self.p = problem
        self.max_steps = max_steps
        self.stats = {"moves_found": 0, "moves_explored": 0, "cache_hits": 0,
                      "moves_applied": 0, "improvements": 0, "paths": 0}
        p = problem
        self.term = np.concatenate([p.fbar_term, np.zeros((p.n_jobs, 1))], axis=1)  # cfg -1 -> 0

    # -- solutions -------------------------------------------------------------------
    def from_batch(self, node: np.ndarray, cfg: np.ndarray, ncls: np.ndarray) -> Solution:
        p = self.p
        used = np.zeros(p.n_nodes, dtype=np.int64)
        on = node >= 0
        np.add.at(used, node[on], p.cfg_g[cfg[on]])
        ncls = ncls.copy()
        if p.cloud:
            ncls[used == 0] = -1
        value = float(self.term[np.arange(p.n_jobs), cfg].sum())
        return Solution(node.copy(), cfg.copy(), ncls, used, value)

    def capacity(self, s: Solution) -> np.ndarray:
        return np.where(s.ncls >= 0, self.p.class_gpus[np.maximum(s.ncls, 0)], 0)

    def is_open(self, s: Solution) -> np.ndarray:
        return s.used > 0

    # -- moves -----------------------------------------------------------------------
    def get_moves(self, s: Solution, t: Solution):
        """Feasible moves (job, cfg, node) and blocked ones (job, cfg) from s towards t."""
        p = self.p
        jobs = np.flatnonzero(s.cfg != t.cfg)
        tcfg = t.cfg[jobs]
        node = np.full(len(jobs), -1, dtype=np.int64)
        removal = tcfg < 0
        free = self.capacity(s) - s.used
        fit = self._best_fit_table(s, free)
        add = ~removal
        k, g = p.cfg_class[tcfg[add]], p.cfg_g[tcfg[add]]
        node_add = fit[k, g]
        # resizing in place on the job's own node beats a migration
        own = s.node[jobs[add]]
        own_ok = (own >= 0) & (s.ncls[np.maximum(own, 0)] == k)
        own_ok &= free[np.maximum(own, 0)] + p.cfg_g[np.maximum(s.cfg[jobs[add]], 0)] >= g
        node_add = np.where(own_ok, own, node_add)
        node[add] = node_add
        ok = removal | (node >= 0)
        return jobs[ok], tcfg[ok], node[ok], jobs[~ok], tcfg[~ok]

    def _best_fit_table(self, s: Solution, free: np.ndarray) -> np.ndarray:
        """(K, L) node that best fits g GPUs of class k: fullest open node, else a closed one."""
        p = self.p
        k_n, levels = len(p.class_name), p.n_levels
        table = np.full((k_n, levels), -1, dtype=np.int64)
        open_ = self.is_open(s)
        for k in range(k_n):
            if p.cloud:
                members = np.flatnonzero((s.ncls == k) & open_)
                closed = np.flatnonzero(s.ncls < 0)
            else:
                members = np.flatnonzero((p.node_class == k) & open_)
                closed = np.flatnonzero((p.node_class == k) & ~open_)
            for g in range(1, int(p.class_gpus[k]) + 1):
                cand = members[free[members] >= g]
                if cand.size:
                    table[k, g] = cand[np.argmin(free[cand])]
                elif closed.size:
                    table[k, g] = closed[0]
        return table

    def values(self, s: Solution, jobs, tcfg, node, b_jobs, b_cfg) -> np.ndarray:
        """Change of f_bar of each move plus the best change of a move it unblocks."""
        p = self.p
        delta = self.term[jobs, tcfg] - self.term[jobs, s.cfg[jobs]]
        if not len(b_jobs):
            return delta
        b_delta = self.term[b_jobs, b_cfg] - self.term[b_jobs, s.cfg[b_jobs]]
        b_k, b_g = p.cfg_class[b_cfg], p.cfg_g[b_cfg]
        src = s.node[jobs]
        has_src = src >= 0
        srcn = np.maximum(src, 0)
        g_src = np.where(has_src, p.cfg_g[np.maximum(s.cfg[jobs], 0)], 0)
        g_new = np.where(tcfg >= 0, p.cfg_g[np.maximum(tcfg, 0)], 0)
        cap = self.capacity(s)
        freed = cap[srcn] - s.used[srcn] + g_src - np.where(node == src, g_new, 0)
        emptied = has_src & (s.used[srcn] - g_src + np.where(node == src, g_new, 0) == 0)
        # blocked move (j', c') becomes feasible on the source node of move m
        avail = freed[:, None] + np.where(s.node[b_jobs][None, :] == src[:, None],
                                          p.cfg_g[np.maximum(s.cfg[b_jobs], 0)][None, :], 0)
        same_cls = s.ncls[srcn][:, None] == b_k[None, :]
        enabled = has_src[:, None] & same_cls & (avail >= b_g[None, :])
        if p.cloud:
            enabled |= emptied[:, None] & (p.class_gpus[b_k][None, :] >= b_g[None, :])
        enabled &= b_jobs[None, :] != jobs[:, None]
        gain = np.where(enabled, b_delta[None, :], 0.0).max(axis=1)
        return delta + np.maximum(gain, 0.0)

    def apply(self, s: Solution, j: int, c: int, n: int) -> None:
        p = self.p
        if s.node[j] >= 0:
            old = s.node[j]
            s.used[old] -= p.cfg_g[s.cfg[j]]
            if p.cloud and s.used[old] == 0:
                s.ncls[old] = -1
        s.value += self.term[j, c] - self.term[j, s.cfg[j]]
        s.node[j], s.cfg[j] = n, c
        if n >= 0:
            if p.cloud and s.ncls[n] < 0:
                s.ncls[n] = p.cfg_class[c]
            s.used[n] += p.cfg_g[c]

    # -- the procedure ---------------------------------------------------------------
    def relink(self, source: Solution, target: Solution, best: Solution) -> Solution:
        """Walk from ``source`` towards ``target``; return the best solution seen."""
        p = self.p
        self.stats["paths"] += 1
        cache: dict[tuple, float] = {}
        epoch = np.zeros(len(p.class_name) + 1, dtype=np.int64)
        for _ in range(self.max_steps):
            jobs, tcfg, node, b_jobs, b_cfg = self.get_moves(source, target)
            if not len(jobs):
                break
            self.stats["moves_found"] += len(jobs)
            src_cls = self._source_class(source, jobs)
            keys = [(int(a), int(b), int(c), int(epoch[k])) for a, b, c, k in
                    zip(jobs, tcfg, node, src_cls)]
            vals = np.array([cache.get(key, np.nan) for key in keys])
            todo = np.isnan(vals)
            self.stats["cache_hits"] += int((~todo).sum())
            if todo.any():
                vals[todo] = self.values(source, jobs[todo], tcfg[todo], node[todo],
                                         b_jobs, b_cfg)
                self.stats["moves_explored"] += int(todo.sum())
                for key, v in zip((k for k, t in zip(keys, todo) if t), vals[todo]):
                    cache[key] = float(v)
            m = int(np.argmax(vals))
            if vals[m] <= EPS:
                break
            touched = {src_cls[m], self._class_of(source, int(node[m]))}
            self.apply(source, int(jobs[m]), int(tcfg[m]), int(node[m]))
            self.stats["moves_applied"] += 1
            if p.cloud:
                epoch += 1
            else:
                for k in touched:
                    epoch[k] += 1
            if source.value > best.value + EPS:
                best = source.copy()
                self.stats["improvements"] += 1
        return best

    def _class_of(self, s: Solution, n: int) -> int:
        return int(s.ncls[n]) if n >= 0 else len(self.p.class_name)

    def _source_class(self, s: Solution, jobs: np.ndarray) -> np.ndarray:
        n = s.node[jobs]
        return np.where(n >= 0, s.ncls[np.maximum(n, 0)], len(self.p.class_name))

    def postprocess(self, s: Solution) -> int:
        """Downsize VMs (cloud) and give idle GPUs to the job with the best speed-up."""
        p = self.p
        changes = 0
        for n in np.flatnonzero(s.used > 0):
            if p.cloud:
                changes += self._downsize(s, int(n))
            idle = int(self.capacity(s)[n] - s.used[n])
            if idle <= 0:
                continue
            on = np.flatnonzero(s.node == n)
            k = s.ncls[n]
            best = None
            for j in on:
                c_new = self._cfg_index(k, int(p.cfg_g[s.cfg[j]]) + idle,
                                        int(p.cfg_level[s.cfg[j]]))
                if c_new is None or not p.runnable[j, c_new]:
                    continue
                speedup = p.t[j, s.cfg[j]] / p.t[j, c_new]
                gain = self.term[j, c_new] - self.term[j, s.cfg[j]]
                if gain >= -EPS and (best is None or speedup > best[0]):
                    best = (speedup, j, c_new)
            if best is not None:
                _, j, c_new = best
                self.apply(s, int(j), int(c_new), int(n))
                changes += 1
        return changes

    def _downsize(self, s: Solution, n: int) -> int:
        p = self.p
        k = s.ncls[n]
        on = np.flatnonzero(s.node == n)
        gtype = p.class_type[k]
        options = [k2 for k2 in range(len(p.class_name)) if p.class_type[k2] == gtype
                   and s.used[n] <= p.class_gpus[k2] < p.class_gpus[k]]
        if not options:
            return 0
        k2 = min(options, key=lambda x: p.class_cost_h[x, 1])
        new_cfg = [self._cfg_index(k2, int(p.cfg_g[s.cfg[j]])) for j in on]
        gain = sum(self.term[j, c] - self.term[j, s.cfg[j]] for j, c in zip(on, new_cfg))
        if gain < -EPS:
            return 0
        for j, c in zip(on, new_cfg):
            s.value += self.term[j, c] - self.term[j, s.cfg[j]]
            s.cfg[j] = c
        s.ncls[n] = k2
        return 1

    def _cfg_index(self, k: int, g: int, level: int = 0) -> int | None:
        """(class, g) at power level ``level`` (its default: 0)."""
        hit = np.flatnonzero((self.p.cfg_class == k) & (self.p.cfg_g == g)
                            & (self.p.cfg_level == level))
        return int(hit[0]) if hit.size else None


def elite_pool(problem: Problem, batch, sigma: int, rows: np.ndarray | None = None) -> list[int]:
    """Rows (of ``rows``, default all) of the sigma best distinct solutions by f_bar."""
    chosen: list[int] = []
    seen: set[bytes] = set()
    rows = np.arange(len(batch.f_bar)) if rows is None else rows
    for r in rows[np.argsort(-batch.f_bar[rows], kind="stable")]:
        key = batch.cfg[r].tobytes()
        if key not in seen:
            seen.add(key)
            chosen.append(int(r))
            if len(chosen) == sigma:
                break
    return chosen


def decide_pr(snapshot: Snapshot, rng: np.random.Generator, *,
              iterations: int = DEFAULT_ITERATIONS, alpha: float = PR_ALPHA,
              swap_scale: float = DEFAULT_SWAP_SCALE,
              sigma: int = DEFAULT_SIGMA, max_steps: int | None = None,
              postprocess: bool = True, order: str = DEFAULT_ORDER,
              slack: float | None = None, floor: bool = False,
              window_when: str | None = None, fallback: float | None = None,
              energy_price: str | None = None, keep_node: bool | None = None,
              move_margin: float | None = None) -> Plan:
    """Constructions -> elite pool -> path relinking -> post-processing, then the final
    choice by f_obj and stability (see the module docstring)."""
    window_when = window_when or DEFAULT_WINDOW_WHEN
    if window_when not in WINDOW_WHEN:
        raise InputError(f"window_when: must be one of {', '.join(WINDOW_WHEN)}, got "
                         f"{window_when!r}", field="window_when")
    p = compile_ordered(snapshot, rng, order=order,
                        energy_price=energy_price_of(energy_price, snapshot),
                        keep_node=keep_node_of(keep_node, snapshot),
                        move_margin=move_margin_of(move_margin, snapshot))
    if keeps_greedy(p, fallback, floor):
        row = construct(p, 1, rng, alpha=alpha, swap_scale=swap_scale)
        kept: dict[str, Any] = {"jobs": p.n_jobs, "iterations": 1, "chosen": "greedy",
                                "restarts": restarts(p, row.node[0], row.cfg[0])}
        return to_plan(p, row.node[0], row.cfg[0], row.node_cls[0], policy="pr",
                       objective=float(row.f_mix[0]), objective_name=objective_name(p.cloud),
                       stats=kept)
    batch = construct(p, max(1, iterations), rng, alpha=alpha, swap_scale=swap_scale,
                      floor=floor)
    pool = elite_pool(p, batch, sigma, rows=batch.rows_of(*SEARCH))
    relinker = Relinker(p, max_steps if max_steps is not None else p.n_nodes)
    elites = [relinker.from_batch(batch.node[r], batch.cfg[r], batch.node_cls[r]) for r in pool]
    best = elites[0].copy()
    best_elite = best.value
    source = elites[0]
    for target in elites[1:]:
        best = relinker.relink(source, target, best)
    changes = relinker.postprocess(best) if postprocess else 0
    # the final choice: the steadiest plan within ``slack`` of the best f_obj found
    if slack is None:
        slack = CLOUD_SLACK if p.cloud else DEFAULT_SLACK
    best_row = batch.best()
    score = batch.f_mix          # what the policies minimise: f_obj on premise, cloud f_mix
    lowest = float(score[best_row])
    if window_when == "postponed" and not (batch.node[best_row] < 0).any():
        slack = 0.0         # every job runs in the best plan: no GPU is short, no window
    paper = batch.rows_of(*SEARCH)
    window = paper[score[paper] <= lowest + slack * abs(lowest) + 1e-9]
    if window.size:
        pick = int(min(window, key=lambda r: (restarts(p, batch.node[r], batch.cfg[r]),
                                              score[r])))
    else:
        pick = best_row
    node, cfg, ncls = batch.node[pick], batch.cfg[pick], batch.node_cls[pick]
    value, chosen = float(score[pick]), batch.names[batch.strategy[pick]]
    stops = restarts(p, node, cfg)
    relinked = f_mix_of(p, best)
    if relinked < value and (best_stops := restarts(p, best.node, best.cfg)) <= stops:
        node, cfg, ncls = best.node, best.cfg, _ncls_for_plan(p, best)
        value, chosen, stops = relinked, "relinked", best_stops
    fell = (chosen != "paper" or pick != 0) and not floor
    fell = fell and falls_back(value, float(score[0]),
                               fallback_margin(p, fallback, bool((batch.node[0] < 0).any())))
    if fell:       # the greedy's plan (row 0)
        node, cfg, ncls = batch.node[0], batch.cfg[0], batch.node_cls[0]
        value, chosen, stops = float(score[0]), "greedy", restarts(p, batch.node[0],
                                                                   batch.cfg[0])
    stats = {"jobs": p.n_jobs, "iterations": iterations, "elite_pool": len(elites),
             "best_elite_f_bar": best_elite, "relinked_f_bar": best.value,
             "relinked_objective": relinked, **relinker.stats, "postprocess_changes": changes,
             "best_objective": lowest, "window": int(window.size), "chosen": chosen,
             "restarts": stops}
    return to_plan(p, node, cfg, ncls, policy="pr", objective=value,
                   objective_name=objective_name(p.cloud), stats=stats)


def _ncls_for_plan(problem: Problem, s: Solution) -> np.ndarray:
    return s.ncls if problem.cloud else problem.node_class


def f_mix_of(problem: Problem, s: Solution) -> float:
    """f_mix of a relinker solution (f_obj on premise; the constructions' definition)."""
    p = problem
    ncls = _ncls_for_plan(p, s).astype(np.int64)
    cfg = s.cfg.astype(np.int64).copy()
    node = s.node.astype(np.int64)
    _, _, mix = evaluate_row(p.kernel, node, cfg, ncls, s.used.astype(np.int64))
    if p.has_moves:
        mix += move_cost_row(p.kernel, node, cfg)
    return float(mix)
