"""python cells.py OUT.jsonl CELL... (from the repository root; CELL = N:scenario:arrival:
seed, on premise): the bound before the rows of bound_rows.py (work_rows=False, the
cuts of the lpbound branch) and with them (the default), one after the other in one
process, with each solve's wall time. One JSON line per cell."""
import json
import sys
import time

sys.path.insert(0, ".")

from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.generate import generate_trace

out = sys.argv[1]
for cell in sys.argv[2:]:
    n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival,
                           seed=int(seed), cloud=False)
    row: dict = {"cell": f"op:{cell}", "jobs": len(trace.jobs)}
    for name, options in (("before", {"work_rows": False}), ("after", {})):
        start = time.perf_counter()
        b = onprem_lower_bound(trace, **options)
        row[name] = {"total": b.total_cost, "energy": b.energy_cost,
                     "tardiness": b.tardiness_cost, "slots": b.slots,
                     "wall_s": round(time.perf_counter() - start, 1)}
        print(cell, name, round(b.total_cost, 2), round(b.energy_cost, 2),
              round(b.tardiness_cost, 2), row[name]["wall_s"], flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
