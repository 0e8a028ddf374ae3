"""rg and pr with other fallback margins: python fallback-variants.py NO-SHORTAGE POLICIES
SHORTAGE (e.g. inf rg,pr 0.1); scenario 1, seed 1, default options."""
import sys

import andreas.optimizer.greedy as G
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

G.ONPREM_FALLBACK = float(sys.argv[1])
G.SHORTAGE_FALLBACK = float(sys.argv[3])
for n, a in [(3, "exponential"), (10, "exponential"), (10, "high")]:
    tr = generate_trace(n_nodes=n, scenario=1, arrival=a, seed=1)
    for p in sys.argv[2].split(","):
        r = simulate(tr, p, SimOptions())
        print(sys.argv[1], sys.argv[3], n, a, p, round(r.total_cost, 2),
              round(r.tardiness_cost, 2), r.late_jobs, r.migrations, r.preemptions, flush=True)
