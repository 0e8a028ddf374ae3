"""python probe-rules.py OUT.jsonl RULE[,RULE...] CELL...

Candidate online rules read off the hindsight schedules, tried before any is coded into
andreas: greedy (default order) whose problem a RULE changes at every decision while its
greedy row leaves a job waiting (``construction.short_of_gpus``), from the snapshot only:

- ``none``: greedy as is (the check that the hook changes nothing);
- ``defer:F``: jobs whose WSPT index w / p (p: fastest remaining time) is below F x the
  median index of the snapshot's runnable jobs go behind every other job (late or not);
- ``fast:F``: jobs with p above F x the mean p try their fastest configuration first;
- ``defer:F+fast:G``: both; ``+ontime:1``: defer only jobs that can still be on time;
  ``+long:G``: defer only jobs with p above G x the mean p.

One JSON line per (cell, rule) appended to OUT.jsonl (the summary's keys)."""
import json
import sys
import time
from dataclasses import replace

import numpy as np

from andreas.costs import objective_name
from andreas.optimizer.construction import compile_ordered, construct, short_of_gpus
from andreas.optimizer.problem import INF
from andreas.optimizer.solution import to_plan
from andreas.simulator import engine
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

RULE: dict = {}
_decide = engine.decide


def decide_rule(snapshot, rng, *, order="wspt-atc", energy_price="node", keep_node=False,
                sharing=None):
    p = compile_ordered(snapshot, rng, order=order, energy_price=energy_price,
                        keep_node=keep_node)
    if RULE and p.n_jobs and short_of_gpus(p, rng):
        t_min = np.where(p.runnable, p.t, INF).min(axis=1, initial=INF)
        ok = np.isfinite(t_min)
        if "defer" in RULE and ok.any():
            index = np.where(ok, p.weight / np.maximum(t_min, 1e-9), np.inf)
            deferred = index < RULE["defer"] * np.median(index[ok])
            if "long" in RULE:
                deferred &= t_min > RULE["long"] * t_min[ok].mean()
            if RULE.get("ontime"):
                deferred &= p.pressure < 0
            p = replace(p, queue=p.queue[np.argsort(deferred[p.queue], kind="stable")])
        if "fast" in RULE and ok.any():
            long = ok & (t_min > RULE["fast"] * t_min[ok].mean())
            pref = p.pref.copy()
            for j in np.flatnonzero(long):
                row = pref[j]
                pref[j] = row[np.argsort(np.where(p.runnable[j, row], p.t[j, row], np.inf),
                                         kind="stable")]
            p = replace(p, pref=pref)
    batch = construct(p, 1, rng, randomize=False)
    return to_plan(p, batch.node[0], batch.cfg[0], batch.node_cls[0], policy="greedy",
                   objective=batch.f_mix[0], objective_name=objective_name(p.cloud),
                   stats={"jobs": p.n_jobs})


def _hooked(snapshot, rng, policy, **options):
    if policy != "greedy":
        return _decide(snapshot, rng, policy, **options)
    return decide_rule(snapshot, rng, **options)


engine.decide = _hooked
out, rules = sys.argv[1], sys.argv[2].split(",")
for cell in sys.argv[3:]:
    _, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=False)
    for rule in rules:
        RULE.clear()
        for part in rule.split("+"):
            if part != "none":
                key, value = part.split(":")
                RULE[key] = float(value)
        t = time.perf_counter()
        r = simulate(trace, "greedy", SimOptions())
        row = {"cell": cell, "rule": rule, "wall_s": time.perf_counter() - t, **r.summary()}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(cell, rule, round(r.total_cost, 2), r.late_jobs, flush=True)
