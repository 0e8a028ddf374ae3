"""python tail.py CELL VARIANT [K|late]

The last K jobs to complete of a Zeus or grid cell (run.py's CELL and VARIANT), or its
late jobs, with their attempts (node, GPUs, start, end in hours): where a makespan or a
late job comes from."""
import sys
from collections import defaultdict
from dataclasses import replace

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

cell, variant = sys.argv[1], sys.argv[2]
k = sys.argv[3] if len(sys.argv) > 3 else "8"
kind, n, *rest = cell.split(":")
if kind == "zeus":
    trace = generate_trace(n_nodes=int(n), scenario=1, arrival="exponential",
                           seed=int(rest[0]), workloads="zeus")
    base = SimOptions(power_levels=rest[1] == "on")
else:
    trace = generate_trace(n_nodes=int(n), scenario=int(rest[0]), arrival=rest[1],
                           seed=int(rest[2]))
    base = SimOptions()
price, _, keep = variant.partition("+")
r = simulate(trace, "greedy", replace(base, energy_price=price, keep_node=True if keep else None))
spec = {j.id: j for j in trace.jobs}
att = defaultdict(list)
for a in sorted(r.attempts, key=lambda a: a.start_s):
    att[a.job].append(a)
print(cell, variant, round(r.total_cost, 2), "makespan h", round(r.makespan_s / 3600, 2))
shown = ([x for x in r.jobs if x.tardiness_s > 0] if k == "late"
         else sorted(r.jobs, key=lambda x: -x.completion_s)[:int(k)])
for rec in shown:
    j = spec[rec.id]
    print(f"{rec.id} {j.app} submit {j.submit_s / 3600:.2f} due {j.due_s / 3600:.2f} "
          f"end {rec.completion_s / 3600:.2f} late {rec.tardiness_s:.0f} s "
          f"epochs {j.epochs} w {j.weight:.4f} "
          f"times {dict(j.epoch_time_s)}")
    for a in att[rec.id]:
        print(f"   {a.node} g={a.gpus} {a.start_s / 3600:.2f}-{a.end_s / 3600:.2f} "
              f"limit {a.power_limit_w}")
