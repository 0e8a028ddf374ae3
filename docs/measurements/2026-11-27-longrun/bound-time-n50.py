"""Wall time of the LP bounds at N = 50 (scenario 1 / cloud, exponential, seed 1)."""
import time

from andreas.simulator.generate import generate_trace
from andreas.simulator.bounds import onprem_lower_bound, cloud_capacity_bound
for cloud in (False, True):
    tr = generate_trace(n_nodes=50, scenario=1, arrival="exponential", seed=1, cloud=cloud)
    t = time.time()
    b = cloud_capacity_bound(tr) if cloud else onprem_lower_bound(tr)
    print("cloud" if cloud else "onprem", round(b.total_cost, 2), round(b.tardiness_cost, 2),
          b.slots, round(time.time() - t, 1), flush=True)
