"""python stress.py unit|tiny|SEED [COUNT] (from the repository root): the bound, with its
cuts and the rows of bound_rows.py, below every proven optimum of 40 unit traces (unit),
below the best non-preemptive schedule of 60 tiny traces (tiny), or below every bill of 5
policies x 2 progress modes x 2 periods x power-down off/on on COUNT (default 40) random
traces from SEED. Prints "BAD" per violation and, at the end, the count and the largest
bound / bill (a copy of ../2026-11-28-lpbound/stress.py with COUNT)."""
import itertools
import sys

sys.path.insert(0, ".")

from andreas.simulator.bounds import lower_bound
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
from tests.simulator.exact_schedules import (UNIT_S, best_non_preemptive, slot_optimum,
                                             tiny_trace, unit_trace)
from tests.simulator.test_simulator import random_trace

checked, bad, worst = 0, 0, 0.0


def check(name: str, bound: float, bill: float) -> None:
    global checked, bad, worst
    checked += 1
    worst = max(worst, bound / bill)
    if bound > bill * (1 + 1e-9):
        bad += 1
        print("BAD", name, bound, bill, flush=True)


part = sys.argv[1]
if part == "unit":
    for seed in range(1, 41):
        trace = unit_trace(seed, 3 + seed % 4)
        span = (max(j.submit_s for j in trace.jobs) - min(j.submit_s for j in trace.jobs)
                + sum(j.epochs * 600.0 for j in trace.jobs))
        best = slot_optimum(trace, horizon_s=span, slots=round(span / UNIT_S),
                            time_limit_s=60)
        if best is not None and best.optimal:
            bound = lower_bound(trace)
            check(trace.name, bound, best.bill)
            print(trace.name, round(bound / best.bill, 6), flush=True)
elif part == "tiny":
    for seed in range(60):
        trace = tiny_trace(seed, 1 + seed % 2, 3 + seed % 3, cloud=seed % 5 == 0,
                           scenario=1 + seed % 2,
                           slack=(1.0, 2.0) if seed % 2 else (3.0, 5.0))
        check(trace.name, lower_bound(trace), best_non_preemptive(trace, time_limit_s=5.0).bill)
else:
    policies = ("fifo", "edf", "greedy", "rg", "pr")
    for seed in range(int(part), int(part) + int(sys.argv[2] if len(sys.argv) > 2 else 40)):
        nodes, jobs, cloud = 1 + seed % 3, 4 + seed % 9, seed % 4 == 3
        trace = random_trace(seed, nodes, jobs, cloud=cloud)
        for off in (False,) if cloud else (False, True):
            bound = lower_bound(trace, power_off_idle=off)
            for policy, mode, period in itertools.product(policies, ("epoch", "exact"),
                                                          (None, 0)):
                options = dict(iterations=10, progress=mode, power_off_idle=off)
                if period is not None:
                    options["period_s"] = period
                bill = simulate(trace, policy, SimOptions(**options)).total_cost
                check(f"{seed} off={off} {policy} {mode} period={period}", bound, bill)
        print(seed, nodes, jobs, cloud, round(bound, 3), flush=True)
print("checked", checked, "bad", bad, "max bound / bill", worst)
