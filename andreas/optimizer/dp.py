"""The dynamic-programming baselines of Saxena et al. as path-relinking-2022 §4.2.1 adapts them.

One job per node; jobs visited in FIFO order (submission time, then id). For every job
a proxy F1 picks its configuration, a proxy F2 prices running it against postponing it,
and a DP over the nodes used so far decides which jobs run, minimising the sum of F2
over all jobs; backtracking from the empty cluster gives the plan. Four variants:

==============  ======================  ==========
policy          F1 (configuration)      F2
==============  ======================  ==========
``dp-wct``      F_WCT (eq. 4)           F_WCT
``dp-fastwct``  fastest                 F_WCT
``dp-fastb``    fastest                 F_B
``dp-adjwct``   F~ (eq. 5, adjusted)    F_WCT
==============  ======================  ==========

Where the paper is silent or loose, the choices made here and why (Δt is the period the
optimizer is called with; τ_j the tardiness at the end of the step, τ~_j at completion;
F_WCT's postponement is P1a's term with H = Δt; F_B's constant B is one more than every
run cost, which makes F_B lexicographic) are written out in docs/design/optimizer.md,
"The DP baselines".

State. Cloud: the number of nodes used so far. On premise the classes are not
interchangeable, so the state is the vector of nodes used per class while
``Π_k (nodes_k + 1) <= max_states``; beyond that cap the DP runs in *rounds* of exact
per-class one-count DPs, a heuristic (``Plan.stats["dp_rounds"] > 0`` says it was used).

Running jobs are re-decided like waiting ones, because the paper's DP stops and resumes
jobs from checkpoints when their allocation changes; their times are restart-aware
(``costs.job_time_s``), and nodes are relabelled within a class so that a job keeping its
configuration stays on its node.

``Plan.objective`` is the plan's f_obj (the reference cost model, so every policy is
scored alike); the DP's own F2 optimum is ``Plan.stats["dp_objective"]``. Deterministic:
``rng`` is accepted only for the common policy signature.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from andreas.costs import SECONDS_PER_HOUR, evaluate
from andreas.errors import InputError
from andreas.model import Plan, Snapshot
from andreas.optimizer.problem import Problem, compile_problem
from andreas.optimizer.solution import to_plan

if TYPE_CHECKING:
    from collections.abc import Sequence

DEFAULT_MAX_STATES = 50_000
PRECOMPUTE_LIMIT = 2_000_000    # jobs x availability masks whose choices are tabled at once
F1_KINDS = ("wct", "fast", "adj")
F2_KINDS = ("wct", "b")
VARIANTS: dict[str, tuple[str, str]] = {
    "dp-wct": ("wct", "wct"),
    "dp-fastwct": ("fast", "wct"),
    "dp-fastb": ("fast", "b"),
    "dp-adjwct": ("adj", "wct"),
}


@dataclass(frozen=True, kw_only=True)
class Tables:
    """What the DP reads: per (job, configuration) run cost and F1 preference, per job
    postponement cost; ``cfg_res`` maps a configuration to the resource (node pool) it uses."""

    run: np.ndarray        # (J, C) R_jkg, inf where the job cannot run
    post: np.ndarray       # (J,) postponement cost under F2
    pref: tuple[np.ndarray, ...]   # per job: runnable configurations, F1-best first
    cfg_res: np.ndarray    # (C,) resource index of each configuration
    caps: np.ndarray       # (R,) nodes per resource
    order: np.ndarray      # (J,) job indices in FIFO order
    b: float               # F_B's constant (nan under F_WCT)


def decide_dp_wct(snapshot: Snapshot, rng: np.random.Generator | None = None, *,
                  max_states: int = DEFAULT_MAX_STATES) -> Plan:
    """DP(WCT): F1 = F2 = F_WCT."""
    return decide_dp(snapshot, "dp-wct", max_states=max_states)


def decide_dp_fastwct(snapshot: Snapshot, rng: np.random.Generator | None = None, *,
                      max_states: int = DEFAULT_MAX_STATES) -> Plan:
    """DP(FastWCT): fastest configuration, F2 = F_WCT."""
    return decide_dp(snapshot, "dp-fastwct", max_states=max_states)


def decide_dp_fastb(snapshot: Snapshot, rng: np.random.Generator | None = None, *,
                    max_states: int = DEFAULT_MAX_STATES) -> Plan:
    """DP(FastB): fastest configuration, F2 = F_B (postponement costs the constant B)."""
    return decide_dp(snapshot, "dp-fastb", max_states=max_states)


def decide_dp_adjwct(snapshot: Snapshot, rng: np.random.Generator | None = None, *,
                     max_states: int = DEFAULT_MAX_STATES) -> Plan:
    """DP(AdjWCT): F1 = F~ (adjusted tardiness), F2 = F_WCT."""
    return decide_dp(snapshot, "dp-adjwct", max_states=max_states)


def decide_dp(snapshot: Snapshot, variant: str, *,
              max_states: int = DEFAULT_MAX_STATES) -> Plan:
    """Run one DP variant (a key of ``VARIANTS``) on a snapshot."""
    if variant not in VARIANTS:
        raise InputError(f"policy: unknown DP variant {variant!r} (known: {', '.join(VARIANTS)})")
    if max_states < 1:
        raise InputError(f"max_states: must be >= 1, got {max_states}")
    f1, f2 = VARIANTS[variant]
    problem = compile_problem(snapshot)
    tables = build_tables(problem, f1=f1, f2=f2)
    states = n_states(tables.caps)
    if states <= max_states:
        cfg, _ = solve(tables)
        rounds = 0
    else:
        cfg, rounds = solve_in_rounds(tables)
    return _plan(problem, tables, cfg, variant, f2, states, rounds)


# -- the proxies ------------------------------------------------------------------------

def build_tables(problem: Problem, *, f1: str, f2: str) -> Tables:
    """F1 preferences and F2 costs of every job on every configuration (vectorised)."""
    if f1 not in F1_KINDS or f2 not in F2_KINDS:
        raise InputError(f"dp: F1 must be one of {F1_KINDS} and F2 one of {F2_KINDS}, "
                         f"got {f1!r}, {f2!r}")
    snap = problem.snapshot
    dt = snap.params.period_s
    if not dt > 0:
        raise InputError(f"params.period_s: the DP's period must be > 0, got {dt}")
    now = snap.now_s
    runnable = problem.runnable
    t = np.where(runnable, problem.t, 0.0)            # finite stand-in, masked below
    due = np.array([j.due_s for j in problem.jobs], dtype=float)
    w = problem.weight
    node_cost = problem.class_cost_h[problem.cfg_class, problem.cfg_g] * dt / SECONDS_PER_HOUR
    tau_step = np.maximum(0.0, now + np.minimum(t, dt) - due[:, None])
    run = np.where(runnable, w[:, None] * tau_step + node_cost[None, :], np.inf)
    if f2 == "wct":
        post = snap.params.rho * w * np.maximum(0.0, now + dt + problem.max_t - due)
        b = float("nan")
    else:
        worst = np.where(runnable, run, -np.inf).max(axis=1, initial=0.0)
        b = 1.0 + float(worst.sum())
        post = np.full(problem.n_jobs, b)
    if f1 == "fast":
        primary, secondary = t, np.broadcast_to(node_cost, t.shape)
    elif f1 == "wct":
        primary, secondary = np.where(runnable, run, 0.0), t
    else:
        tau_adj = np.maximum(0.0, now + t - due[:, None])
        primary, secondary = w[:, None] * tau_adj + node_cost[None, :], t
    pref = _preferences(primary, secondary, problem.cfg_g, runnable)
    if problem.cloud:
        cfg_res = np.zeros(len(problem.cfg_class), dtype=np.int64)
        caps = np.array([problem.n_nodes], dtype=np.int64)
    else:
        cfg_res = problem.cfg_class.astype(np.int64)
        caps = problem.class_count.astype(np.int64)
    order = np.array(sorted(range(problem.n_jobs),
                            key=lambda i: (problem.jobs[i].submit_s, problem.jobs[i].id)),
                     dtype=np.int64)
    return Tables(run=run, post=post, pref=pref, cfg_res=cfg_res, caps=caps, order=order, b=b)


def _preferences(primary: np.ndarray, secondary: np.ndarray, cfg_g: np.ndarray,
                 runnable: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per job, its runnable configurations sorted by (primary, secondary, g, index)."""
    nj, nc = primary.shape
    if nj == 0:
        return ()
    index = np.broadcast_to(np.arange(nc), (nj, nc))
    g = np.broadcast_to(cfg_g, (nj, nc))
    order = np.lexsort((index, g, secondary, primary, ~runnable), axis=1)
    counts = runnable.sum(axis=1)
    return tuple(order[j, : counts[j]].astype(np.int64) for j in range(nj))


# -- the DP -----------------------------------------------------------------------------

def n_states(caps: np.ndarray) -> int:
    """Π (cap + 1), as a Python int (no overflow)."""
    total = 1
    for c in caps:
        total *= int(c) + 1
    return total


def solve(tables: Tables) -> tuple[np.ndarray, float]:
    """Exact DP over the vector of nodes used per resource.

    Backward over the FIFO queue: ``W_j(s)`` is the least F2 of jobs j.. from state s;
    job j either waits (``post_j + W_{j+1}(s)``) or runs on its F1-best configuration
    among the resources with a free node in s (``R + W_{j+1}(s + e_k)``). The plan is
    read forward from the empty state. Returns the configuration per job (-1 = wait)
    and the optimum.
    """
    caps = tables.caps
    strides = np.cumprod(np.concatenate(([1], caps[:-1] + 1))).astype(np.int64)
    size = n_states(caps)
    s = np.arange(size, dtype=np.int64)
    avail = (s[:, None] // strides[None, :]) % (caps[None, :] + 1) < caps[None, :]
    shift = np.arange(len(caps), dtype=np.int64)
    bits = (avail.astype(np.int64) << shift).sum(axis=1)
    masks, inverse = np.unique(bits, return_inverse=True)    # F1's choice depends on these
    mask_avail = ((masks[:, None] >> shift[None, :]) & 1).astype(bool)
    order = tables.order
    best_u = _best_per_mask(tables, mask_avail)                  # (J, masks) config or -1
    step_c = strides[tables.cfg_res]
    at_once = best_u.size <= PRECOMPUTE_LIMIT                     # else per job (memory)
    if at_once:
        run_all, step_all = _run_and_step(tables.run, best_u, step_c)
    value = np.zeros(size)
    small = tables.run.shape[1] <= np.iinfo(np.int16).max
    choice = np.full((len(order), size), -1, dtype=np.int16 if small else np.int32)
    for pos in range(len(order) - 1, -1, -1):
        j = order[pos]
        b = best_u[j]
        if at_once:
            run_u, step_u = run_all[j], step_all[j]
        else:
            run_rows, step_rows = _run_and_step(tables.run[j: j + 1], b[None], step_c)
            run_u, step_u = run_rows[0], step_rows[0]
        wait = tables.post[j] + value
        run = run_u[inverse] + value[s + step_u[inverse]]        # inf where nothing fits
        take = run <= wait
        choice[pos] = np.where(take, b[inverse], -1)
        value = np.where(take, run, wait)
    cfg_of = np.full(len(order), -1, dtype=np.int64)
    state = 0
    for pos, j in enumerate(order):
        c = int(choice[pos, state])
        cfg_of[j] = c
        if c >= 0:
            state += int(strides[tables.cfg_res[c]])
    return cfg_of, float(value[0])


def _run_and_step(run: np.ndarray, best: np.ndarray, step_c: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Run cost and state step of F1's choices ``best`` (rows of jobs x masks; -1: none)."""
    fits = best >= 0
    pick = np.maximum(best, 0)
    cost = np.where(fits, np.take_along_axis(run, pick, axis=1), np.inf)
    return cost, np.where(fits, step_c[pick], 0)


def _best_per_mask(tables: Tables, mask_avail: np.ndarray) -> np.ndarray:
    """F1's choice of every job for every set of resources with a free node (-1: none)."""
    nj, nc = tables.run.shape
    rank = np.full((nj, nc), nc, dtype=np.int64)                 # nc: not a candidate
    for j, cand in enumerate(tables.pref):
        rank[j, cand] = np.arange(len(cand))
    usable = mask_avail[:, tables.cfg_res]                       # (masks, C)
    best = np.full((nj, len(mask_avail)), -1, dtype=np.int32)
    if len(usable) <= nj:                                        # few masks: loop on them
        for u, row in enumerate(usable):
            r = np.where(row[None, :], rank, nc)
            first = r.argmin(axis=1)
            best[:, u] = np.where(r[np.arange(nj), first] < nc, first, -1)
    else:                                                        # many classes: on the jobs
        for j in range(nj):
            r = np.where(usable, rank[j][None, :], nc)
            first = r.argmin(axis=1)
            best[j] = np.where(r[np.arange(len(usable)), first] < nc, first, -1)
    return best


def solve_in_rounds(tables: Tables) -> tuple[np.ndarray, int]:
    """The documented fallback beyond ``max_states``: exact one-count DPs per resource.

    Each round fixes every pending job's resource to its F1-best among those with free
    nodes, solves each resource's one-count DP on its jobs (FIFO), and keeps the jobs
    still postponed for the next round; it stops when a round starts nobody.
    """
    left = tables.caps.copy()
    cfg_of = np.full(len(tables.order), -1, dtype=np.int64)
    pending = list(tables.order)
    rounds = 0
    while pending and (left > 0).any():
        rounds += 1
        best = {}
        for j in pending:
            cand = [c for c in tables.pref[j] if left[tables.cfg_res[c]] > 0]
            if cand:
                best[j] = cand[0]
        started = 0
        for r in np.flatnonzero(left > 0):
            jobs = [j for j in pending if j in best and tables.cfg_res[best[j]] == r]
            if not jobs:
                continue
            sub = _single_resource(tables, jobs, [best[j] for j in jobs], int(left[r]))
            cfg, _ = solve(sub)
            for j, c in zip(jobs, cfg):
                if c >= 0:
                    cfg_of[j] = best[j]
                    left[r] -= 1
                    started += 1
        pending = [j for j in pending if cfg_of[j] < 0]
        if started == 0:
            break
    return cfg_of, rounds


def _single_resource(tables: Tables, jobs: Sequence[int], cfgs: Sequence[int],
                     cap: int) -> Tables:
    """The one-count sub-problem of ``jobs`` (FIFO order kept), each on its fixed config."""
    n = len(jobs)
    run = np.array([[tables.run[j, c]] for j, c in zip(jobs, cfgs)]).reshape(n, 1)
    return Tables(run=run, post=tables.post[list(jobs)],
                  pref=tuple(np.zeros(1, dtype=np.int64) for _ in jobs),
                  cfg_res=np.zeros(1, dtype=np.int64), caps=np.array([cap], dtype=np.int64),
                  order=np.arange(n, dtype=np.int64), b=tables.b)


# -- the plan ---------------------------------------------------------------------------

def objective(tables: Tables, cfg: np.ndarray) -> float:
    """F2 of a decision: run cost of the started jobs plus postponement of the others."""
    ran = cfg >= 0
    jobs = np.arange(len(cfg))
    return float(tables.run[jobs[ran], cfg[ran]].sum() + tables.post[~ran].sum())


def _plan(problem: Problem, tables: Tables, cfg: np.ndarray, variant: str, f2: str,
          states: int, rounds: int) -> Plan:
    """One node per started job: on premise the next node of its class, in the cloud the
    next node of the pool; ``to_plan`` then relabels so kept jobs stay on their node."""
    node = np.full(problem.n_jobs, -1, dtype=np.int64)
    node_cls = np.full(max(problem.n_nodes, 1), -1, dtype=np.int64)
    used = np.zeros(len(problem.class_gpus), dtype=np.int64)
    pool = 0
    for j in tables.order:
        c = cfg[j]
        if c < 0:
            continue
        k = int(problem.cfg_class[c])
        if problem.cloud:
            node[j] = pool
            pool += 1
        else:
            node[j] = problem.class_nodes[k, used[k]]
            used[k] += 1
        node_cls[node[j]] = k
    stats = {"jobs": problem.n_jobs, "started": int((cfg >= 0).sum()),
             "dp_objective": objective(tables, cfg), "dp_states": states,
             "dp_rounds": rounds, "delta_t_s": problem.snapshot.params.period_s}
    if f2 == "b":
        stats["B"] = tables.b
    plan = to_plan(problem, node, np.where(cfg >= 0, cfg, 0), node_cls, policy=variant,
                   objective=0.0, objective_name="f_obj", stats=stats, revisit=False)
    return replace(plan, objective=evaluate(problem.snapshot, plan).f_obj)
