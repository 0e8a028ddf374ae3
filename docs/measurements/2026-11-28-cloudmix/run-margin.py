"""python run-margin.py OUT.jsonl POLICIES VARIANTS CELL...

A CELL is cloud|op:N:SCENARIO:ARRIVAL:SEED[:MODE] as in
../2026-11-27-longrun/horizon/run-traces.py (MODE default or paper). A VARIANT is
m<MARGIN>[nr]: rg's and pr's ``move_margin`` (``m-`` leaves it unset: the policy's
default), ``nr`` adds --no-revisit. Each (cell, policy, variant) appends one JSON line
to OUT.jsonl as soon as it ends (the summary's keys, the cell, the variant, wall s)."""
import json
import sys
import time
from dataclasses import replace

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

out, policies, variants = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
for cell in sys.argv[4:]:
    setting, n, sc, arrival, seed, *rest = cell.split(":")
    mode = rest[0] if rest else "default"
    base = SimOptions() if mode == "default" else SimOptions(period_s=0, progress="exact")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=setting == "cloud")
    for policy in policies:
        for variant in variants:
            margin = variant[1:].removesuffix("nr")
            options = replace(base, move_margin=None if margin == "-" else float(margin),
                              revisit=base.revisit and not variant.endswith("nr"))
            t = time.perf_counter()
            r = simulate(trace, policy, options)
            row = {"setting": setting, "nodes": int(n), "scenario": int(sc),
                   "arrival": arrival, "seed": int(seed), "mode": mode, "policy": policy,
                   "variant": variant, "wall_s": time.perf_counter() - t, **r.summary()}
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(cell, policy, variant, round(r.total_cost, 2), r.late_jobs,
                  r.migrations + r.resizes + r.preemptions, round(r.lost_work_s / 3600, 1),
                  flush=True)
