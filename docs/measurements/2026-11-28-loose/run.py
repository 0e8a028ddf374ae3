"""python run.py OUT.jsonl POLICY VARIANTS CELL...

Each CELL's trace simulated with POLICY once per variant of VARIANTS (comma list of
``node``, ``above-idle``, ``node+keep``, ``above-idle+keep``: the energy price, and
``+keep`` the option ``keep_node``), in the simulator's default mode. A CELL is
op:N:SCENARIO:ARRIVAL:SEED (the grid's generated traces) or zeus:N:SEED:LEVELS (the
power-limit benchmark's traces, exponential arrivals, scenario 1, LEVELS on or off; the
row carries the energy bound). One JSON line per (cell, variant) appended to OUT.jsonl as
soon as it ends, with the moves between consecutive attempts of a job (``moves``)."""
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.power_bound import energy_bound
from andreas.simulator.results import SimOptions

KEYS = ("total_cost", "energy_cost", "tardiness_cost", "energy_kwh", "energy_above_idle_kwh",
        "late_jobs", "makespan_s", "slow_s", "wait_s", "lost_work_s")


def moves(trace, result) -> dict:
    """Moves between two consecutive attempts of a job: same (class, g) on another node,
    same (class, g) on the same node, another class, another GPU count."""
    kind = {x.name: (x.gpu_type, x.gpus) for x in trace.nodes}
    by = defaultdict(list)
    for a in sorted(result.attempts, key=lambda a: a.start_s):
        by[a.job].append(a)
    out: Counter = Counter()
    for atts in by.values():
        for x, y in zip(atts, atts[1:]):
            if y.start_s > x.end_s + 1:
                out["after a wait"] += 1
            elif kind[x.node] != kind[y.node]:
                out["class"] += 1
            elif x.gpus != y.gpus:
                out["gpus"] += 1
            elif x.node != y.node:
                out["same cfg, other node"] += 1
            else:
                out["same cfg, same node"] += 1
    return dict(out)


out, policy, variants = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
for cell in sys.argv[4:]:
    kind, n, *rest = cell.split(":")
    extra: dict = {}
    if kind == "zeus":
        seed, levels = int(rest[0]), rest[1]
        trace = generate_trace(n_nodes=int(n), scenario=1, arrival="exponential", seed=seed,
                               workloads="zeus")
        base = SimOptions(power_levels=levels == "on")
        b = energy_bound(trace)
        extra = {"bound_kwh": b.total_kwh, "bound_above_idle_kwh": b.above_idle_kwh}
    else:
        sc, arrival, seed = rest
        trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival,
                               seed=int(seed))
        base = SimOptions()
    for variant in variants:
        price, _, keep = variant.partition("+")
        t = time.perf_counter()
        opts = replace(base, energy_price=price, keep_node=True if keep else None)
        r = simulate(trace, policy, opts)
        row = {"cell": cell, "policy": policy, "variant": variant,
               "wall_s": round(time.perf_counter() - t, 1),
               **{k: getattr(r, k) for k in KEYS}, "moves": moves(trace, r), **extra}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(cell, variant, round(r.total_cost, 2), r.late_jobs, round(r.energy_kwh, 1),
              row["moves"], flush=True)
