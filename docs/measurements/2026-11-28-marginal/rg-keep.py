"""python rg-keep.py node,above-idle: rg (100 constructions) with the on-premise fallback
to greedy turned off, on zeus N = 20 seed 1, levels off: whether choosing among rows by
f_obj, which prices moves, stops above-idle's moves (on premise rg builds no keep rows)."""
import sys

import andreas.optimizer.greedy as greedy
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

greedy.ONPREM_FALLBACK = 0.0
greedy.SHORTAGE_FALLBACK = 0.0
trace = generate_trace(n_nodes=20, scenario=1, arrival="exponential", seed=1,
                       workloads="zeus")
for price in sys.argv[1].split(","):
    r = simulate(trace, "rg", SimOptions(energy_price=price, power_levels=False,
                                         iterations=100))
    print("rg, fallback off, 100 constructions", price, round(r.total_cost, 2), r.late_jobs,
          round(r.energy_kwh, 1), round(r.lost_work_s / 3600, 1), flush=True)
