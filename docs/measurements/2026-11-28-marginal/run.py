"""python run.py OUT.jsonl POLICY PRICES CELL...

Each CELL's trace simulated with POLICY once per energy price of PRICES (comma list of
``node``, ``above-idle``), in the simulator's default mode unless the cell says ``paper``.
A CELL is op:N:SCENARIO:ARRIVAL:SEED[:paper] (the grid's generated traces, as
``../2026-11-27-longrun/horizon/run-traces.py``), cloud:N:SCENARIO:ARRIVAL:SEED[:paper],
or zeus:N:SEED:LEVELS (the power-limit benchmark's traces, exponential arrivals, scenario
1, LEVELS on or off; the row carries the energy bound). One JSON line per (cell, price)
appended to OUT.jsonl as soon as it ends."""
import json
from dataclasses import replace
import sys
import time

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.power_bound import energy_bound
from andreas.simulator.results import SimOptions

KEYS = ("total_cost", "energy_cost", "tardiness_cost", "energy_kwh", "energy_above_idle_kwh",
        "late_jobs", "makespan_s", "slow_s", "wait_s", "lost_work_s")

out, policy, prices = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
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
        sc, arrival, seed, *mode = rest
        trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival,
                               seed=int(seed), cloud=kind == "cloud")
        base = (SimOptions(period_s=0, progress="exact") if mode == ["paper"]
                else SimOptions())
    for price in prices:
        t = time.perf_counter()
        opts = replace(base, energy_price=price)
        r = simulate(trace, policy, opts)
        row = {"cell": cell, "policy": policy, "price": price,
               "wall_s": round(time.perf_counter() - t, 1),
               **{k: getattr(r, k) for k in KEYS}, **extra}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(cell, price, round(r.total_cost, 2), r.late_jobs, round(r.energy_kwh, 1),
              flush=True)
