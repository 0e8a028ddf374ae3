"""python bound.py OUT.jsonl CELL...

The on-premise LP lower bound (``andreas.simulator.bounds.onprem_lower_bound``, defaults)
of each cell's generated trace, one JSON line per cell appended to OUT.jsonl."""
import json
import sys
import time

from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.generate import generate_trace

for cell in sys.argv[2:]:
    _, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=False)
    t = time.perf_counter()
    b = onprem_lower_bound(trace)
    row = {"cell": cell, "total_cost": b.total_cost, "energy_cost": b.energy_cost,
           "tardiness_cost": b.tardiness_cost, "wall_s": time.perf_counter() - t}
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(row) + "\n")
    print(cell, round(b.total_cost, 2), flush=True)
