"""python relabel-aligned.py OUT.jsonl POLICIES CELL...: a what-if, not the code of any
commit: ``solution._relabel`` replaced, in the cloud, by a first pass that maps solution
VMs to physical ones exactly as ``kernels.move_cost_row`` guesses (votes of the jobs that
keep their VM type and GPU count; ties to the lower (solution, physical) pair), then the
original scoring for the rest. Every plan's moves are then the ones its objective priced.
Rows as run-margin.py's (variant "aligned"); the policies' defaults (margin 3)."""
import json
import sys
import time
from collections import defaultdict

from andreas.optimizer import solution
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

original = solution._relabel


def relabel(problem, node, cfg, node_cls):
    if not problem.cloud:
        return original(problem, node, cfg, node_cls)
    votes = defaultdict(int)
    for i in range(len(problem.jobs)):
        if (problem.run_node[i] >= 0 and node[i] >= 0
                and problem.cfg_base[cfg[i]] == problem.run_cfg[i]):
            votes[(int(node[i]), int(problem.run_node[i]))] += 1
    label, taken = {}, set()
    for (s, p), _ in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0])):
        if s not in label and p not in taken:
            label[s] = p
            taken.add(p)
    rest = original(problem, node, cfg, node_cls)      # its choices for the others
    free = [p for p in range(problem.n_nodes) if p not in taken]
    for s in sorted({int(x) for x in node if x >= 0}):
        if s not in label:
            p = rest[s] if rest[s] not in taken else free[0]
            label[s] = p
            taken.add(p)
            free = [q for q in free if q != p]
    return label


solution._relabel = relabel
out, policies = sys.argv[1], sys.argv[2].split(",")
for cell in sys.argv[3:]:
    setting, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=True)
    for policy in policies:
        t = time.perf_counter()
        r = simulate(trace, policy, SimOptions())
        row = {"setting": setting, "nodes": int(n), "scenario": int(sc), "arrival": arrival,
               "seed": int(seed), "mode": "default", "policy": policy, "variant": "aligned",
               "wall_s": time.perf_counter() - t, **r.summary()}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(cell, policy, "aligned", round(r.total_cost, 2), r.late_jobs,
              r.migrations + r.resizes + r.preemptions, round(r.lost_work_s / 3600, 1),
              flush=True)
