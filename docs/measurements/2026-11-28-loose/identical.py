"""python identical.py: one hash of the default plans (greedy, rg and pr with 50
iterations, no option) on 8 random snapshots of 10 nodes x 40 jobs, half running; the
same hash at aaf13fc and after the fix (identical.log) means the same plans."""
import hashlib
import numpy as np
from andreas.optimizer import decide
from andreas.synthetic import random_snapshot
h = hashlib.sha256()
for seed in range(8):
    snap = random_snapshot(np.random.default_rng(seed), 10, 40, running_share=0.5)
    for policy, extra in (("greedy", {}), ("rg", {"iterations": 50}), ("pr", {"iterations": 50})):
        plan = decide(snap, np.random.default_rng(seed), policy, **extra)
        h.update(repr((plan.assignments, plan.objective)).encode())
print(h.hexdigest())
