"""python levels-bound.py N SEED... (from the repository root): on the power-limit
benchmark's traces (zeus workloads, scenario 1, exponential), the energy bound of
power_bound.py (every job alone at its least-energy level, capacity ignored) against the
on-premise LP bound with the levels as configurations, and greedy's bill with levels."""
import sys

sys.path.insert(0, ".")

from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.power_bound import energy_bound
from andreas.simulator.results import SimOptions

print("| trace | energy bound kWh | LP energy kWh | LP tardiness | greedy kWh (levels) "
      "| greedy tardiness | greedy / energy bound | greedy / LP (kWh) | greedy / LP ($) |")
print("|---|---|---|---|---|---|---|---|---|", flush=True)
for seed in sys.argv[2:]:
    trace = generate_trace(n_nodes=int(sys.argv[1]), scenario=1, arrival="exponential",
                           seed=int(seed), workloads="zeus")
    per_kwh = trace.energy.pue * trace.energy.price_per_kwh
    eb = energy_bound(trace).total_kwh
    lp = onprem_lower_bound(trace)
    g = simulate(trace, "greedy", SimOptions())
    lp_kwh = lp.energy_cost / per_kwh
    print(f"| {trace.name} | {eb:.1f} | {lp_kwh:.1f} | {lp.tardiness_cost:.2f} "
          f"| {g.energy_kwh:.1f} | {g.tardiness_cost:.2f} | {g.energy_kwh / eb:.4f} "
          f"| {g.energy_kwh / lp_kwh:.4f} | {g.total_cost / lp.total_cost:.4f} |", flush=True)
