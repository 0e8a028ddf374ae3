"""python variant.py CELL VARIANT: greedy with energy_price=above-idle on one cell
(op:N:SC:ARRIVAL:SEED or zeus:N:SEED:on|off) with a part of the pricing switched off or
changed, and the moves of its attempts. VARIANT contains "notail": no idle draw beyond
the last running job; "nomargin": no 15 % margin on D*; "pinned": greedy's row places
the running jobs first where they run (construction.py's ``pinned``); "grouped": greedy's
queue takes the running jobs first, grouped by the node they run on (so best fit packs
them as they run), then the waiting ones in their order; else as shipped."""
import dataclasses
import sys

import numpy as np
from moves import moves, trace_of

import andreas.optimizer.construction as construction
import andreas.optimizer.problem as problem
from andreas.simulator.engine import simulate

cell, variant = sys.argv[1], sys.argv[2]
if "nomargin" in variant:
    problem.ON_TIME_MARGIN = 0.0
if "notail" in variant:
    problem._beyond_known_end = lambda t, runnable, pins, idle_h: np.zeros_like(t)
if "pinned" in variant:
    strategies = construction.strategies
    construction.strategies = lambda p, **kw: [
        dataclasses.replace(s, pinned=True) if s.name == "paper" else s
        for s in strategies(p, **kw)]
if "grouped" in variant:
    import andreas.optimizer.greedy as greedy
    compile_problem = greedy.compile_problem

    def grouped(snapshot, **kw):
        p = compile_problem(snapshot, **kw)
        at = {j.id: j.running.node for j in p.jobs if j.running is not None}
        names = {n: i for i, n in enumerate(p.node_names)}
        running = sorted((i for i, j in enumerate(p.jobs) if j.id in at),
                         key=lambda i: names.get(at[p.jobs[i].id], -1))
        rest = [i for i in p.queue if p.jobs[i].id not in at]
        return dataclasses.replace(p, queue=np.array(running + rest, dtype=np.int64))
    greedy.compile_problem = grouped
trace, opts = trace_of(cell)
r = simulate(trace, "greedy", dataclasses.replace(opts, energy_price="above-idle"))
print(cell, variant, round(r.total_cost, 2), r.late_jobs, round(r.energy_kwh, 1),
      dict(moves(trace, r)[0]), flush=True)
