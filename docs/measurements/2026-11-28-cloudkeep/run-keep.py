"""python run-keep.py OUT.jsonl POLICIES VARIANTS CELL...

A CELL is cloud:N:SCENARIO:ARRIVAL:SEED (the simulator's default mode, the policies'
default move margin). A VARIANT is off (the defaults) or keep (``keep_node``). Every plan
is classified against its snapshot (without changing it): for each running job, stay,
relocation (same VM type and GPU count, another VM), gpus (same type), type (same GPU
count), type+gpus, preemption (postponed). One JSON line per (cell, policy, variant)."""
import collections
import json
import sys
import time
from dataclasses import replace

from andreas.simulator import engine
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

out, policies, variants = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
kinds: collections.Counter = collections.Counter()
real_decide = engine.decide


def decide(snapshot, rng, policy, **opts):
    plan = real_decide(snapshot, rng, policy, **opts)
    vm = {n.name: n.config for n in snapshot.nodes}
    at = {a.job: a for a in plan.assignments}
    for job in snapshot.jobs:
        run = job.running
        if run is None:
            continue
        a = at.get(job.id)
        if a is None:
            kinds["preemption"] += 1
            continue
        same_t = plan.node_configs.get(a.node) == vm[run.node]
        same_g = a.gpus == run.gpus
        if same_t and same_g:
            kinds["stay" if a.node == run.node else "relocation"] += 1
        else:
            kinds["gpus" if same_t else "type" if same_g else "type+gpus"] += 1
    return plan


engine.decide = decide
for cell in sys.argv[4:]:
    setting, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=setting == "cloud")
    for policy in policies:
        for variant in variants:
            options = replace(SimOptions(), keep_node=True if variant == "keep" else None)
            kinds.clear()
            t = time.perf_counter()
            r = simulate(trace, policy, options)
            row = {"cell": cell, "policy": policy, "variant": variant,
                   "wall_s": time.perf_counter() - t, "kinds": dict(kinds), **r.summary()}
            with open(out, "a") as f:
                f.write(json.dumps(row, default=str) + "\n")
            print(cell, policy, variant, round(r.total_cost, 2), r.late_jobs,
                  r.migrations + r.resizes + r.preemptions, dict(kinds), flush=True)
