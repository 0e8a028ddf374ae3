"""The 8 on-premise sweep cells at one N, each policy with revisits off and on.

Usage: python onprem.py N SEEDS POLICIES [WORKERS], e.g. ``onprem.py 10 1 rg,pr``; one JSON
array per line: scenario, arrivals, N, seed, policy, revisit, total_cost, late_jobs,
decisions, revisits, CPU seconds. Since revisits became cloud-only, on-premise plans name
none and both runs of a cell agree; the log beside this file was measured before that.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

ARRIVALS = ("exponential", "high", "low", "mixed")


def run(task: tuple) -> tuple:
    scenario, arrival, nodes, seed, policy, revisit = task
    trace = generate_trace(n_nodes=nodes, scenario=scenario, arrival=arrival, seed=seed)
    cpu = time.process_time()
    r = simulate(trace, policy, SimOptions(revisit=revisit))
    return (*task, r.total_cost, r.late_jobs, r.optimizer_calls, r.revisits,
            time.process_time() - cpu)


def main() -> None:
    nodes = int(sys.argv[1])
    seeds = [int(s) for s in sys.argv[2].split(",")]
    policies = sys.argv[3].split(",")
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    tasks = [(sc, arr, nodes, s, p, rv) for sc in (1, 2) for arr in ARRIVALS for s in seeds
             for p in policies for rv in (False, True)]
    with ProcessPoolExecutor(workers) as pool:
        for result in pool.map(run, tasks):
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
