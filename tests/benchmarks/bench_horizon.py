"""Decision time of the rolling-horizon policy at 100 nodes x 450 jobs, against rg.

Issue 33's target: a new policy decides within 10 s at 100 nodes x 450 jobs. One random
snapshot per setting (half the jobs running, 0.4 of an epoch in progress, epoch mode, 10 s
restart overhead), rg and horizon on the same snapshot in the same run; printed per
setting: wall and CPU seconds per decision (median of ``--repeat``), horizon / rg, how
horizon's decision went (model columns, solved to optimality or stopped at the time
limit, which plan it returned) and both plans' f_mix. horizon plans under shortage too
(``plan_shortage``): the model is built and solved, its worst case. Ratios printed,
never asserted.

    python tests/benchmarks/bench_horizon.py [--repeat 3] [--time-limit-s 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np

from andreas.model import Params
from andreas.optimizer import decide
from andreas.optimizer.horizon import CHOICES, DEFAULT_TIME_LIMIT_S
from andreas.synthetic import random_snapshot

TARGET_S = 10.0


def snapshot(cloud: bool, nodes: int, jobs: int):
    snap = random_snapshot(np.random.default_rng(5), nodes, jobs, cloud=cloud,
                           running_share=0.5)
    moved = tuple(dataclasses.replace(j, epochs_done=j.epochs_done + 0.4) if j.running else j
                  for j in snap.jobs)
    return dataclasses.replace(snap, jobs=moved,
                               params=Params(progress="epoch", restart_overhead_s=10.0))


def timed(snap, policy: str, repeat: int, **options) -> tuple[float, float, object]:
    walls, cpus, plan = [], [], None
    for i in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        plan = decide(snap, np.random.default_rng(i), policy, **options)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=450)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--time-limit-s", type=float, default=DEFAULT_TIME_LIMIT_S)
    args = ap.parse_args()
    print(f"{args.nodes} nodes x {args.jobs} jobs, median of {args.repeat}, "
          f"horizon time limit {args.time_limit_s} s, target <= {TARGET_S} s per decision")
    print("setting   rg wall/cpu s   horizon wall/cpu s   horizon/rg wall   columns  solved "
          "chosen   f_mix rg / horizon")
    for cloud in (False, True):
        snap = snapshot(cloud, args.nodes, args.jobs)
        decide(snap, np.random.default_rng(0), "rg", iterations=20)     # kernels compiled
        rg_w, rg_c, rg = timed(snap, "rg", args.repeat)
        hz_w, hz_c, hz = timed(snap, "horizon", args.repeat, time_limit_s=args.time_limit_s,
                               plan_shortage=True)
        s = hz.stats
        print(f"{'cloud' if cloud else 'onprem':8}  {rg_w:6.2f} / {rg_c:5.2f}   "
              f"{hz_w:8.2f} / {hz_c:6.2f}   {hz_w / rg_w:14.1f}   {int(s['columns']):7d}  "
              f"{int(s['solved']):6d} {CHOICES[int(s['chosen'])]:8} "
              f"{rg.objective:.2f} / {hz.objective:.2f}   "
              f"{'ok' if hz_w <= TARGET_S else 'ABOVE TARGET'}", flush=True)


if __name__ == "__main__":
    main()
