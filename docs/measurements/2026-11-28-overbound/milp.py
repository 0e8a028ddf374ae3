"""python milp.py OUT.jsonl CELL SLOTS LIMIT_S [work_rows] (from the repository root; CELL =
N:scenario:arrival:seed on premise): the integral model's HiGHS dual bound
(``onprem_lower_bound(..., integral=True)``) with SLOTS slots over the default span (fewer
slots: fewer binaries, a weaker LP, every figure still a lower bound) within LIMIT_S
seconds, with the rows of bound_rows.py unless the fifth argument is 0."""
import json
import sys
import time

sys.path.insert(0, ".")

from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.generate import generate_trace

out, cell, slots, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
work_rows = len(sys.argv) < 6 or sys.argv[5] != "0"
n, sc, arrival, seed = cell.split(":")
trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                       cloud=False)
default = onprem_lower_bound(trace, work_rows=work_rows)
span = default.slot_s * (default.slots - 1)
slot_s = span / (slots - 1)
start = time.perf_counter()
lp = onprem_lower_bound(trace, slot_s=slot_s, work_rows=work_rows)
lp_s = time.perf_counter() - start
start = time.perf_counter()
b = onprem_lower_bound(trace, slot_s=slot_s, integral=True, time_limit_s=limit,
                       work_rows=work_rows)
row = {"cell": f"op:{cell}", "work_rows": work_rows, "slots": b.slots, "slot_s": slot_s,
       "lp_default_slots": default.total_cost, "lp": lp.total_cost, "lp_s": round(lp_s, 1),
       "milp": b.total_cost, "status": b.status, "limit_s": limit,
       "milp_s": round(time.perf_counter() - start, 1)}
print(json.dumps(row), flush=True)
with open(out, "a") as f:
    f.write(json.dumps(row) + "\n")
