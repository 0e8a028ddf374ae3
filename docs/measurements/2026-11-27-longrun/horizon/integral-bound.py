"""python integral-bound.py CELL TIME_LIMIT_S : the on-premise LP bound and the integral
bound (HiGHS' dual bound within the limit) of one generated trace (cells as in
run-traces.py)."""
import sys
import time

from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.generate import generate_trace

setting, n, sc, arrival, seed = sys.argv[1].split(":")
trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed))
for integral in (False, True):
    t = time.perf_counter()
    b = onprem_lower_bound(trace, integral=integral, time_limit_s=float(sys.argv[2]))
    print(sys.argv[1], "integral" if integral else "LP", round(b.total_cost, 2),
          round(b.tardiness_cost, 2), b.status, f"{time.perf_counter() - t:.0f} s", flush=True)
