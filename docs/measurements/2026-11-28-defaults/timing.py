"""greedy and rg on one random snapshot of 100 nodes x 450 jobs (half running, restart
overhead 10 s): the default (above idle + keep_node, f_obj reported through
costs.evaluate) against c_ng pricing, alternating; medians of 5."""
import statistics
import time
from dataclasses import replace

import numpy as np

from andreas.optimizer import decide
from andreas.synthetic import random_snapshot

snap = random_snapshot(np.random.default_rng(7), 100, 450, running_share=0.5)
snap = replace(snap, params=replace(snap.params, restart_overhead_s=10.0))
for policy in ("greedy", "rg"):
    times = {"default": [], "node": []}
    for rep in range(6):
        for name, opts in (("default", {}), ("node", {"energy_price": "node", "keep_node": False})):
            t = time.perf_counter()
            decide(snap, np.random.default_rng(1), policy, **opts)
            if rep:
                times[name].append(time.perf_counter() - t)
    d, n = (statistics.median(times[k]) for k in ("default", "node"))
    print(f"{policy}: default {d * 1000:.1f} ms, c_ng {n * 1000:.1f} ms, ratio {d / n:.2f}")
