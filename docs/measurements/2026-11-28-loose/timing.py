"""python timing.py: rg (1 000 constructions) and greedy on one random snapshot of 100
nodes x 450 jobs (half of them running), above idle, keep_node off and on, alternating;
median seconds of 5 and the ratio on / off, same run."""
import statistics
import time

import numpy as np

from andreas.optimizer import decide
from andreas.synthetic import random_snapshot

snap = random_snapshot(np.random.default_rng(7), 100, 450, running_share=0.5)
for policy in ("greedy", "rg"):
    times: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(6):
        for keep in (False, True):
            t = time.perf_counter()
            decide(snap, np.random.default_rng(1), policy, energy_price="above-idle",
                   keep_node=keep)
            if rep:     # the first round compiles
                times[keep].append(time.perf_counter() - t)
    off, on = (statistics.median(times[k]) for k in (False, True))
    print(f"{policy}: off {off * 1000:.0f} ms, on {on * 1000:.0f} ms, on / off {on / off:.2f}")
