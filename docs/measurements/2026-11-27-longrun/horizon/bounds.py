"""python bounds.py OUT.jsonl CELL... : bound_row (the --bound entry) of each cell's trace,
one JSON line per cell (cells as in run-traces.py)."""
import json
import sys
import time

from andreas.simulator.bounds import bound_row
from andreas.simulator.generate import generate_trace

for cell in sys.argv[2:]:
    setting, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=setting == "cloud")
    t = time.perf_counter()
    row = bound_row(trace)
    row.update(setting=setting, nodes=int(n), scenario=int(sc), arrival=arrival,
               seed=int(seed), wall_s=time.perf_counter() - t)
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(row) + "\n")
    print(cell, round(row["total_cost"], 2), flush=True)
