"""CPU seconds per decision of greedy, rg and pr at 100 nodes x 450 jobs (half running,
0.4 of an epoch in progress, epoch mode, 10 s restart overhead)."""
import dataclasses
import time

import numpy as np

from andreas.model import Params
from andreas.optimizer import decide
from andreas.synthetic import random_snapshot

for cloud in (True, False):
    rng = np.random.default_rng(5)
    snap = random_snapshot(rng, 100, 450, cloud=cloud, running_share=0.5)
    jobs = tuple(dataclasses.replace(j, epochs_done=j.epochs_done + 0.4) if j.running else j
                 for j in snap.jobs)
    snap = dataclasses.replace(snap, jobs=jobs,
                               params=Params(progress="epoch", restart_overhead_s=10.0))
    for pol in ("greedy", "rg", "pr"):
        decide(snap, np.random.default_rng(0), pol, iterations=50)      # warm
        t = time.process_time()
        p = decide(snap, np.random.default_rng(0), pol)
        dt = time.process_time() - t
        print("cloud" if cloud else "onprem", pol, round(dt, 2), round(p.objective, 2),
              flush=True)
