"""Bills in the papers' mode (--period-s 0 --progress exact), N = 10, seed 1; run with the
code before and after to compare (PYTHONPATH=<checkout>)."""
import json

from andreas.simulator.bounds import cloud_lower_bound
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

for cloud in (True, False):
    tr = generate_trace(n_nodes=10, scenario=1, arrival="exponential", seed=1, cloud=cloud)
    for p in ("greedy", "rg", "pr"):
        r = simulate(tr, p, SimOptions(period_s=0, progress="exact"))
        print(json.dumps(dict(cloud=cloud, policy=p, total=r.total_cost, energy=r.energy_cost,
                              tard=r.tardiness_cost, calls=r.optimizer_calls,
                              migrations=r.migrations)), flush=True)
    if cloud:
        print("bound", cloud_lower_bound(tr), flush=True)
