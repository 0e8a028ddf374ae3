import time, dataclasses, sys
import numpy as np
from andreas.synthetic import random_snapshot
from andreas.optimizer import decide
from andreas.model import Params
for cloud in (True, False):
    rng = np.random.default_rng(5)
    snap = random_snapshot(rng, 100, 450, cloud=cloud, running_share=0.5)
    jobs = tuple(dataclasses.replace(j, epochs_done=j.epochs_done + 0.4) if j.running else j for j in snap.jobs)
    snap = dataclasses.replace(snap, jobs=jobs, params=Params(progress="epoch", restart_overhead_s=10.0))
    for pol in ("greedy", "rg", "pr"):
        decide(snap, np.random.default_rng(0), pol, iterations=50)  # warm
        t = time.process_time(); p = decide(snap, np.random.default_rng(0), pol); dt = time.process_time() - t
        print("cloud" if cloud else "onprem", pol, round(dt, 2), round(p.objective, 2), flush=True)
