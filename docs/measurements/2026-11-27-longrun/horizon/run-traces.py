"""python run-traces.py OUT.jsonl POLICIES CELL...

A CELL is cloud|op:N:SCENARIO:ARRIVAL:SEED[:MODE].

MODE: default (the simulator's defaults) or paper (--period-s 0 --progress exact).
Each cell's generated trace, each policy in that mode, one JSON line
per (trace, policy) appended to OUT.jsonl as soon as it ends (the summary's keys, the
cell, the wall seconds), so an interrupted run keeps what it finished."""
import json
import sys
import time

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

out, policies = sys.argv[1], sys.argv[2].split(",")
for cell in sys.argv[3:]:
    setting, n, sc, arrival, seed, *rest = cell.split(":")
    mode = rest[0] if rest else "default"
    options = SimOptions() if mode == "default" else SimOptions(period_s=0, progress="exact")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=setting == "cloud")
    for policy in policies:
        t = time.perf_counter()
        r = simulate(trace, policy, options)
        row = {"setting": setting, "nodes": int(n), "scenario": int(sc), "arrival": arrival,
               "seed": int(seed), "mode": mode, "policy": policy, "wall_s": time.perf_counter() - t,
               **r.summary()}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(cell, policy, round(r.total_cost, 2), r.late_jobs, flush=True)
