"""The randomized construction procedure (ANDREAS Algorithm 1), B constructions at once.

A batch of B rows is built by the compiled kernel (``kernels.construct_rows``); each row
follows one *strategy*: a queue order, a preference order of configurations per job (the
deterministic choice and the fallback), the probabilities of the randomized choice, and
two flags: ``pinned`` (running jobs first stay where they run) and ``exclusive`` (one job
per node: a job never joins an open node). Every row is scored on f_obj, f_bar and f_mix
(``costs.evaluate``); the policies choose by f_mix, which is f_obj on premise.

- ``paper``: the papers' rule: jobs by pressure (late ones by Smith's rule, see
  ``problem.queue_order``), the cheapest configuration in D*_j, else the fastest,
  best-fit packing. "Cheapest" is ``problem.rank``: on premise pi, in the cloud the
  cost of the best mix starting there (``costs.mix_cost``). Row 0 is its deterministic
  row, the greedy, so the best of a batch is never worse than the greedy; the randomized
  rows are all of this strategy.
- ``fifo``, ``edf``, ``priority`` (the *floor*, ``floor=True``, off by default): the
  baselines' own plans (running jobs kept, one new job per free node, the best
  configuration over the free nodes), one deterministic row each on top of the
  ``iterations`` rows. They reproduce ``baselines.py`` exactly (a test holds them
  equal). A floor row is a candidate (``Batch.candidates``) only when it is
  *work-conserving* (no job waits while a node could run it): f_obj charges nothing for
  postponing a job with slack, so a baseline plan that leaves GPUs idle can "win" f_obj.
  Even so the floor costs more over whole lightly loaded traces
  (docs/design/objectives.md), hence off by default.

Other strategies were measured and dropped (docs/design/objectives.md):
pricing GPUs so that late jobs take one GPU each, keeping all running jobs first,
keeping on-time ones first, a local search on f_obj and look-ahead rollouts all won
f_obj on single snapshots and lost in the long run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from andreas.costs import SECONDS_PER_HOUR
from andreas.optimizer.kernels import Rows, RowsOut, construct_rows
from andreas.optimizer.problem import (DEFAULT_ORDER, INF, SHORTAGE_ORDER, Problem,
                                       compile_problem, queue_order)
from andreas.model import Snapshot
from andreas.policies import EnergyPrice

DEFAULT_SWAP_SCALE = 0.5
KEEP_RANDOM = 64     # randomized keep rows per batch (where moves cost something)
FLOOR = ("fifo", "edf", "priority")
SEARCH = ("paper", "keep")       # the strategies of the search itself (not the floor)


@dataclass(frozen=True, eq=False)
class Batch:
    """B complete solutions: node index and configuration per job (-1: postponed)."""

    node: np.ndarray        # (B, J) int
    cfg: np.ndarray         # (B, J) int
    node_cls: np.ndarray    # (B, N) class each node is configured with (-1: unused)
    f_obj: np.ndarray       # (B,)
    f_bar: np.ndarray       # (B,)
    f_mix: np.ndarray       # (B,) what the policies minimise (= f_obj on premise)
    strategy: np.ndarray    # (B,) index into ``names``
    work_conserving: np.ndarray   # (B,) no job waits next to GPUs that could run it
    names: tuple[str, ...] = ()

    @property
    def candidates(self) -> np.ndarray:
        """Rows a policy may choose: the papers' rows and the keep rows, and the floor's
        when work-conserving."""
        own = np.isin(self.strategy, [i for i, n in enumerate(self.names) if n in SEARCH])
        return np.flatnonzero(own | self.work_conserving)

    def best(self) -> int:
        """The candidate with the lowest f_mix (f_obj on premise; the first on a tie: row 0
        is the greedy)."""
        rows = self.candidates
        return int(rows[np.argmin(self.f_mix[rows])])

    def rows_of(self, *names: str) -> np.ndarray:
        """Indices of the rows built by the named strategies."""
        wanted = [i for i, n in enumerate(self.names) if n in names]
        return np.flatnonzero(np.isin(self.strategy, wanted))


@dataclass(frozen=True, kw_only=True, eq=False)
class Strategy:
    name: str
    queue: np.ndarray       # (J,)
    pref: np.ndarray        # (J, C) configurations, best first, unrunnable last
    value: np.ndarray       # (J, C) value of the randomized choice, inf: not a candidate
    pinned: bool = False
    exclusive: bool = False
    randomized: bool = True


def strategies(problem: Problem, *, floor: bool = True, keep: bool = False
               ) -> list[Strategy]:
    """The papers' rule first, then (``keep``) the same rule with the running jobs kept
    where they run, then (``floor``) the baselines' (see the module docstring)."""
    p = problem
    paper_value = np.where(p.in_dstar.any(axis=1, keepdims=True),
                           np.where(p.in_dstar, p.rank, INF), np.where(p.runnable, p.t, INF))
    out = [Strategy(name="paper", queue=p.queue, pref=p.pref, value=paper_value)]
    if keep:
        out.append(Strategy(name="keep", queue=p.queue, pref=p.pref, value=paper_value,
                            pinned=True))
    if floor and p.n_jobs:
        pref = _whole_node_pref(p) if p.cloud else p.pref
        keys: dict[str, list[tuple[Any, ...]]] = {
                "fifo": [(j.submit_s, j.id) for j in p.jobs],
                "edf": [(j.due_s, j.submit_s, j.id) for j in p.jobs],
                "priority": [(-j.weight, j.submit_s, j.id) for j in p.jobs]}
        for name in FLOOR:
            key = keys[name]
            order = np.array(sorted(range(p.n_jobs), key=key.__getitem__), dtype=np.int64)
            out.append(Strategy(name=name, queue=order, pref=pref, value=paper_value,
                                pinned=True, exclusive=True, randomized=False))
    return out


def choice_cdf(value: np.ndarray, alpha: float) -> np.ndarray:
    """(J, C) cumulative probabilities of the randomized configuration choice.

    The restricted candidate list keeps the candidates (finite values) within ``alpha`` of
    the best value (GRASP; alpha = 1 keeps every candidate), drawn with probability
    inversely proportional to the value.
    """
    cand = np.isfinite(value)
    lo = np.where(cand, value, INF).min(axis=1, keepdims=True, initial=INF)
    hi = np.where(cand, value, -INF).max(axis=1, keepdims=True, initial=-INF)
    with np.errstate(invalid="ignore"):
        rcl = cand & (value <= lo + alpha * (hi - lo) + 1e-12)
    inv = np.where(rcl, 1.0 / np.maximum(np.where(rcl, value, 1.0), 1e-12), 0.0)
    total = inv.sum(axis=1, keepdims=True)
    cdf = np.cumsum(inv, axis=1) / np.where(total > 0, total, 1.0)
    if cdf.shape[1]:
        cdf[:, -1] = 1.0
    return cdf


def construct(problem: Problem, iterations: int, rng: np.random.Generator, *,
              randomize: bool = True, alpha: float = 0.05,
              swap_scale: float = DEFAULT_SWAP_SCALE, floor: bool = False) -> Batch:
    """Build ``iterations`` schedules of the papers' strategy (the greedy, then randomized
    ones) and, with ``floor``, one more row per baseline. Without ``randomize`` only row 0,
    the greedy, is built."""
    p = problem
    keep = randomize and p.cloud and p.has_moves and len(p.pin_job) > 0
    strat = strategies(p, floor=floor and randomize, keep=keep)
    # row 0 the greedy, then the randomized rows (seeded by their own index, so the floor
    # changes none of them), then one row per other strategy, on top of ``iterations``;
    # where moves cost something (``keep``), KEEP_RANDOM randomized keep rows at the end
    n_random = max(1, iterations) - 1 if randomize else 0
    n_keep = min(KEEP_RANDOM, n_random) if keep else 0
    row_strategy = np.concatenate(([0], np.zeros(n_random, dtype=np.int64),
                                   np.arange(1, len(strat)),
                                   np.ones(n_keep, dtype=np.int64))).astype(np.int64)
    b = len(row_strategy)
    row_random = np.zeros(b, dtype=np.bool_)
    row_random[1:1 + n_random] = True
    row_random[b - n_keep:] = True
    row_seed = np.zeros(b, dtype=np.int64)
    if randomize:   # the greedy draws nothing
        row_seed[:1 + n_random] = rng.integers(0, 2**62, size=1 + n_random, dtype=np.int64)
        row_seed[b - n_keep:] = row_seed[1:1 + n_keep] + 1
    wpos = p.weight[p.weight > 0]
    wmin = wpos.min() if wpos.size else 1.0
    safe_w = np.where(p.weight > 0, p.weight, 1.0)
    p_swap = np.where(p.weight > 0, swap_scale * wmin / safe_w, swap_scale)
    nj, nn, nc, ns = p.n_jobs, p.n_nodes, len(p.cfg_g), len(strat)
    rows = Rows(strategy=row_strategy, randomized=row_random, seed=row_seed,
                queue=np.stack([s.queue for s in strat]).astype(np.int64).reshape(ns, nj),
                pref=np.stack([s.pref for s in strat]).astype(np.int64).reshape(ns, nj, nc),
                cdf=np.stack([choice_cdf(s.value, alpha) for s in strat]).reshape(ns, nj, nc),
                pinned=np.array([s.pinned for s in strat]),
                exclusive=np.array([s.exclusive for s in strat]), p_swap=p_swap.astype(float))
    out = empty_rows(b, nj, nn)
    construct_rows(p.kernel, rows, out)
    out_node, out_cfg, out_ncls, out_obj, out_bar, out_mix, out_wc = out
    return Batch(node=out_node, cfg=out_cfg, node_cls=out_ncls, f_obj=out_obj, f_bar=out_bar,
                 f_mix=out_mix,
                 strategy=row_strategy, work_conserving=out_wc,
                 names=tuple(s.name for s in strat))


def compile_ordered(snapshot: Snapshot, rng: np.random.Generator, *,
                    order: str = DEFAULT_ORDER, energy_price: str = EnergyPrice.NODE,
                    keep_node: bool = False, move_margin: float = 0.0) -> Problem:
    """``compile_problem``; with ``SHORTAGE_ORDER`` the queue is wspt-late's while its
    greedy row runs every job that can run, and late-atc's while it leaves one waiting:
    who goes first then decides the lateness the cluster owes, and late-atc lets a
    short, heavy job with some slack pass a long, light one whose slack is smaller,
    where wspt-late serves the least slack first. Only on premise where moves cost
    something (the simulator's default mode, the manager): measured there; in the
    cloud rg and pr lost with it, and the papers' mode keeps its plans
    (docs/results.md, "What stands between the best policy and the goals")."""
    p = compile_problem(snapshot, order=order, energy_price=energy_price,
                        keep_node=keep_node, move_margin=move_margin)
    if order != SHORTAGE_ORDER or p.cloud or not p.moves_cost or not short_of_gpus(p, rng):
        return p
    t_min = np.where(p.runnable, p.t, INF).min(axis=1, initial=INF)
    return replace(p, queue=queue_order(p.pressure, p.weight, t_min, "late-atc"))


def short_of_gpus(problem: Problem, rng: np.random.Generator) -> bool:
    """The greedy row leaves a job that could run waiting."""
    node = construct(problem, 1, rng, randomize=False).node[0]
    return bool(((node < 0) & problem.runnable.any(axis=1)).any())


def empty_rows(b: int, n_jobs: int, n_nodes: int) -> RowsOut:
    """Room for what B rows build."""
    return RowsOut(node=np.empty((b, n_jobs), dtype=np.int64),
                   cfg=np.empty((b, n_jobs), dtype=np.int64),
                   ncls=np.empty((b, n_nodes), dtype=np.int64), obj=np.empty(b),
                   bar=np.empty(b), mix=np.empty(b), wc=np.empty(b, dtype=np.bool_))


def _whole_node_pref(p: Problem) -> np.ndarray:
    """Cloud preference when a job has its VM to itself: D* by t * the whole VM's price."""
    whole = np.where(p.runnable, p.t * p.class_cost_h[p.cfg_class, 1] / SECONDS_PER_HOUR, INF)
    key1 = np.where(p.in_dstar, 0, np.where(p.runnable, 1, 2))
    key2 = np.where(p.in_dstar, whole, np.where(p.runnable, p.t, 0.0))
    nc = len(p.cfg_g)
    return np.lexsort((np.broadcast_to(p.cfg_g, (p.n_jobs, nc)), key2, key1), axis=1)
