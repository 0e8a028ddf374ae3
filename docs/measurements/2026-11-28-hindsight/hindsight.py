"""python hindsight.py OUT_PREFIX CELL [--evals N] [--seed S] [--start FILE.json]

Offline (hindsight) search for cheaper schedules of one generated trace in the simulator's
default mode (epoch checkpoints, period 1 h, revisits, 10 s restart overhead). A CELL is
op:N:SCENARIO:ARRIVAL:SEED as in ../2026-11-28-overload/run-cells.py.

The schedule is greedy (the default order, wspt-atc) driven by a static per-job vector
fixed before the run, which no online policy could know:

- tier[j] (integer, default 0): at every decision the queue is sorted by tier (highest
  first), then by greedy's own order; a job with tier > 0 passes every tier-0 job, one
  with tier < 0 waits behind them (it still runs on GPUs nobody else takes);
- mode[j]: which configuration the job tries first: 0 greedy's (the cheapest on-time one,
  else the fastest), 1 the fewest GPUs (then greedy's preference), 2 the fastest.

Every candidate is evaluated by the real simulator (``simulate``: its plans pass
``check_plan``), so every bill found is a feasible schedule of the trace: an upper bound
on its optimum in the default mode. The search is iterated local search with threshold
acceptance and an explicit rng: moves promote a job (chosen by its weighted tardiness),
demote one (chosen by GPU-seconds over weight), change a job's mode, or promote one and
demote another; the threshold falls linearly from THRESHOLD to 0, and the walk returns to
the best after RESTART non-improving steps. All-zero vectors reproduce greedy's plans
(checked: the first evaluation equals ``simulate(trace, "greedy")`` to the last digit).

Writes OUT_PREFIX.jsonl (one line per evaluation: index, move, bill, accepted, best) and
OUT_PREFIX-best.json (the best vectors, its summary, per-job records and attempts).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace

import numpy as np

from andreas.costs import objective_name
from andreas.optimizer.construction import compile_ordered, construct
from andreas.optimizer.problem import DEFAULT_ORDER
from andreas.optimizer.solution import to_plan
from andreas.simulator import engine
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

TIER: dict[str, int] = {}
MODE: dict[str, int] = {}
MAX_TIER = 3
THRESHOLD = 0.02
RESTART = 40
_decide = engine.decide


def _pref(problem, mode: np.ndarray) -> np.ndarray:
    """Greedy's preference with each job's first configurations chosen by its mode."""
    pref = problem.pref.copy()
    for j in np.flatnonzero(mode):
        row = pref[j]
        ok = problem.runnable[j, row]
        if mode[j] == 1:
            key = np.where(ok, problem.cfg_g[row], 10**9)
        else:
            key = np.where(ok, problem.t[j, row], np.inf)
        pref[j] = row[np.argsort(key, kind="stable")]
    return pref


def decide_fixed(snapshot, rng, *, order=DEFAULT_ORDER, energy_price="node",
                 keep_node=False, sharing=None):
    """decide_greedy with the static tiers and modes applied to its problem."""
    problem = compile_ordered(snapshot, rng, order=order, energy_price=energy_price,
                              keep_node=keep_node)
    ids = [j.id for j in problem.jobs]
    tier = np.array([TIER.get(i, 0) for i in ids], dtype=np.int64)
    mode = np.array([MODE.get(i, 0) for i in ids], dtype=np.int64)
    if tier.any():
        pos = np.empty(len(ids), dtype=np.int64)
        pos[problem.queue] = np.arange(len(ids))
        problem = replace(problem, queue=np.lexsort((pos, -tier)).astype(np.int64))
    if mode.any():
        problem = replace(problem, pref=_pref(problem, mode))
    batch = construct(problem, 1, rng, randomize=False)
    return to_plan(problem, batch.node[0], batch.cfg[0], batch.node_cls[0], policy="greedy",
                   objective=batch.f_mix[0], objective_name=objective_name(problem.cloud),
                   stats={"jobs": problem.n_jobs})


def _hooked(snapshot, rng, policy, **options):
    if policy != "greedy":
        return _decide(snapshot, rng, policy, **options)
    return decide_fixed(snapshot, rng, **options)


def evaluate(trace, tier: dict, mode: dict):
    TIER.clear(), TIER.update(tier)
    MODE.clear(), MODE.update(mode)
    engine.decide = _hooked
    try:
        return simulate(trace, "greedy", SimOptions())
    finally:
        engine.decide = _decide


def _pick(rng, ids, weights):
    w = np.asarray(weights, dtype=float)
    if not np.isfinite(w).all() or w.sum() <= 0:
        return ids[rng.integers(len(ids))]
    return ids[rng.choice(len(ids), p=w / w.sum())]


def neighbour(rng, tier: dict, mode: dict, result) -> tuple[dict, dict, str]:
    """One guided move from the current vectors (``result``: the current simulation)."""
    tier, mode = dict(tier), dict(mode)
    recs = result.jobs
    ids = [r.id for r in recs]
    late = np.array([r.tardiness_cost for r in recs]) + 1e-9
    heavy = np.array([r.gpu_seconds / max(r.weight, 1e-9) for r in recs])
    u = rng.random()
    if u < 0.3:
        j = _pick(rng, ids, late)
        tier[j] = min(MAX_TIER, tier.get(j, 0) + 1)
        what = f"promote {j}"
    elif u < 0.5:
        j = _pick(rng, ids, heavy)
        tier[j] = max(-MAX_TIER, tier.get(j, 0) - 1)
        what = f"demote {j}"
    elif u < 0.7:
        j = _pick(rng, ids, late + late.mean())
        mode[j] = int((mode.get(j, 0) + rng.integers(1, 3)) % 3)
        what = f"mode {j}={mode[j]}"
    elif u < 0.9:
        j, k = _pick(rng, ids, late), _pick(rng, ids, heavy)
        tier[j] = min(MAX_TIER, tier.get(j, 0) + 1)
        tier[k] = max(-MAX_TIER, tier.get(k, 0) - 1)
        what = f"promote {j} demote {k}"
    else:
        changed = [i for i in ids if tier.get(i, 0) or mode.get(i, 0)]
        if not changed:
            return neighbour(rng, tier, mode, result)
        j = changed[rng.integers(len(changed))]
        tier.pop(j, None), mode.pop(j, None)
        what = f"reset {j}"
    return ({k: v for k, v in tier.items() if v}, {k: v for k, v in mode.items() if v}, what)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("cell")
    ap.add_argument("--evals", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", help="a -best.json whose vectors start the search")
    a = ap.parse_args()
    _, n, sc, arrival, seed = a.cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=False)
    greedy = simulate(trace, "greedy", SimOptions())
    tier: dict = {}
    mode: dict = {}
    if a.start:
        with open(a.start) as f:
            start = json.load(f)
        tier, mode = start["tier"], start["mode"]
    rng = np.random.default_rng(a.seed)
    cur = evaluate(trace, tier, mode)
    if not a.start:
        assert cur.total_cost == greedy.total_cost, (cur.total_cost, greedy.total_cost)
    best, best_tm, stale = cur, (tier, mode), 0
    t0 = time.perf_counter()
    with open(f"{a.out}.jsonl", "w") as log:
        for i in range(a.evals):
            nt, nm, what = neighbour(rng, tier, mode, cur)
            r = evaluate(trace, nt, nm)
            thr = THRESHOLD * (1 - i / a.evals)
            accepted = r.total_cost < cur.total_cost * (1 + thr)
            if accepted:
                tier, mode, cur = nt, nm, r
            if r.total_cost < best.total_cost - 1e-9:
                best, best_tm, stale = r, (nt, nm), 0
            else:
                stale += 1
            if stale >= RESTART:
                tier, mode, cur, stale = *best_tm, best, 0
            log.write(json.dumps({"i": i, "move": what, "bill": r.total_cost,
                                  "late": r.late_jobs, "accepted": accepted,
                                  "best": best.total_cost}) + "\n")
            log.flush()
            if i % 25 == 0:
                print(a.cell, i, round(r.total_cost, 2), "best", round(best.total_cost, 2),
                      f"{time.perf_counter() - t0:.0f}s", flush=True)
    out = {"cell": a.cell, "evals": a.evals, "seed": a.seed, "greedy": greedy.summary(),
           "best": best.summary(), "tier": best_tm[0], "mode": best_tm[1],
           "greedy_jobs": [asdict(r) for r in greedy.jobs],
           "best_jobs": [asdict(r) for r in best.jobs],
           "greedy_attempts": [asdict(x) for x in greedy.attempts],
           "best_attempts": [asdict(x) for x in best.attempts]}
    with open(f"{a.out}-best.json", "w") as f:
        json.dump(out, f)
    print(a.cell, "greedy", round(greedy.total_cost, 2), greedy.late_jobs, "best",
          round(best.total_cost, 2), best.late_jobs,
          f"ratio {best.total_cost / greedy.total_cost:.4f}", flush=True)


if __name__ == "__main__":
    main()
