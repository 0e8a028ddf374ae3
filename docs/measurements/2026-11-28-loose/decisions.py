"""python decisions.py CELL VARIANT FROM_H TO_H [JOB]

The decisions of greedy on a Zeus or grid cell (run.py's CELL and VARIANT) between
FROM_H and TO_H hours: per decision the queue in greedy's order with each job's state
(running where, at what), its first choices (configuration, pi, time) and where the plan
puts it. With JOB, only that job's lines and the running jobs'."""
import sys
from dataclasses import replace

import numpy as np

import andreas.simulator.engine as engine
from andreas.optimizer.construction import compile_ordered
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

cell, variant, lo, hi = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
only = sys.argv[5] if len(sys.argv) > 5 else None
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
opts = replace(base, energy_price=price, keep_node=True if keep else None)
real = engine.decide


def cfg_name(p, c):
    lvl = p.cfg_limit_w[c]
    return f"{p.class_name[p.cfg_class[c]]}/{p.cfg_g[c]}" + ("" if np.isnan(lvl) else
                                                           f"@{lvl:.0f}")


def traced(snapshot, rng, policy, **kw):
    plan = real(snapshot, rng, policy, **kw)
    h = snapshot.now_s / 3600
    if not lo <= h <= hi:
        return plan
    p = compile_ordered(snapshot, np.random.default_rng(0),
                        **{k: v for k, v in kw.items() if k in ("energy_price", "keep_node")})
    where = {a.job: a for a in plan.assignments}
    print(f"--- t = {h:.2f} h, {p.n_jobs} jobs")
    for j in p.queue:
        job = p.jobs[j]
        run = job.running
        if only and job.id != only and run is None:
            continue
        a = where.get(job.id)
        first = [f"{cfg_name(p, c)} pi {p.pi[j, c]:.3f} t {p.t[j, c] / 3600:.1f}h"
                 + ("*" if p.in_dstar[j, c] else "") for c in p.pref[j, :3] if p.runnable[j, c]]
        print(f"{job.id} due {(job.due_s - snapshot.now_s) / 3600:6.1f}h "
              f"run {run.node + '/' + str(run.gpus) if run else '-':>8} -> "
              f"{(a.node + '/' + str(a.gpus)) if a and a.node else 'wait':>8}  "
              + " | ".join(first))
    return plan


engine.decide = traced
r = engine.simulate(trace, "greedy", opts)
print(cell, variant, round(r.total_cost, 2), r.late_jobs)
