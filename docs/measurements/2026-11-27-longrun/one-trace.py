"""python one-trace.py N SCENARIO cloud|op POLICIES ARRIVALS [default|paper] [SEED]"""
import sys

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

n, sc = int(sys.argv[1]), int(sys.argv[2])
cloud, pols, arrs = sys.argv[3] == "cloud", sys.argv[4].split(","), sys.argv[5].split(",")
mode = sys.argv[6] if len(sys.argv) > 6 else "default"
seed = int(sys.argv[7]) if len(sys.argv) > 7 else 1
opt = SimOptions() if mode == "default" else SimOptions(period_s=0, progress="exact")
for a in arrs:
    tr = generate_trace(n_nodes=n, scenario=sc, arrival=a, seed=seed, cloud=cloud)
    for p in pols:
        r = simulate(tr, p, opt)
        print(a, p, round(r.total_cost, 2), round(r.energy_cost, 2),
              round(r.tardiness_cost, 2), r.late_jobs, r.migrations, r.preemptions,
              r.resizes, flush=True)
