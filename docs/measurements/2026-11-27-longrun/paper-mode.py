import sys, json
from andreas.simulator.generate import generate_trace
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
from andreas.simulator.bounds import cloud_lower_bound
out = []
for cloud, sc in ((True, 1), (False, 1)):
    tr = generate_trace(n_nodes=10, scenario=sc, arrival="exponential", seed=1, cloud=cloud)
    for p in ("greedy", "rg", "pr"):
        r = simulate(tr, p, SimOptions(period_s=0, progress="exact"))
        out.append(dict(cloud=cloud, policy=p, total=r.total_cost, energy=r.energy_cost, tard=r.tardiness_cost, calls=r.optimizer_calls, migrations=r.migrations))
        print(json.dumps(out[-1]), flush=True)
    if cloud: print("bound", cloud_lower_bound(tr), flush=True)
