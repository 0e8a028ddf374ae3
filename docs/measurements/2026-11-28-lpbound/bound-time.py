"""python bound-time.py OLD_BOUNDS.py CELL... : the on-premise bound's solve time, the
relaxation before its cuts (OLD_BOUNDS.py, e.g. `git show 11e91e4:andreas/simulator/
bounds.py`) and with them, alternately on each cell's trace in one process (cells as in
../2026-11-27-longrun/horizon/run-traces.py)."""
import importlib.util
import sys
import time

from andreas.simulator import bounds
from andreas.simulator.generate import generate_trace

spec = importlib.util.spec_from_file_location("bounds_old", sys.argv[1])
old = importlib.util.module_from_spec(spec)
sys.modules["bounds_old"] = old
spec.loader.exec_module(old)
print("| cell | jobs | slots | before $ | before s | with cuts $ | with cuts s | ratio $ "
      "| ratio s |")
print("|---|---|---|---|---|---|---|---|---|", flush=True)
for cell in sys.argv[2:]:
    setting, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=False)
    t = time.perf_counter()
    a = old.onprem_lower_bound(trace)
    ta = time.perf_counter() - t
    t = time.perf_counter()
    b = bounds.onprem_lower_bound(trace)
    tb = time.perf_counter() - t
    print(f"| {cell} | {len(trace.jobs)} | {b.slots} | {a.total_cost:.2f} | {ta:.1f} "
          f"| {b.total_cost:.2f} | {tb:.1f} | {b.total_cost / a.total_cost:.4f} "
          f"| {tb / ta:.2f} |", flush=True)
