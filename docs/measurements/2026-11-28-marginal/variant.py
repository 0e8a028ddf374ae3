"""python variant.py CELL VARIANT: greedy with energy_price=above-idle on one cell
(op:N:SC:ARRIVAL:SEED or zeus:N:SEED:on|off) with a part of the pricing switched off or
changed, and the moves of its attempts. VARIANT contains "notail": no idle draw beyond
the last running job; "nomargin": no 15 % margin on D*; "pinned": greedy's row places
the running jobs first where they run (construction.py's ``pinned``); else as shipped."""
import dataclasses
import sys

import numpy as np
from moves import moves, trace_of

import andreas.optimizer.construction as construction
import andreas.optimizer.problem as problem
from andreas.simulator.engine import simulate

cell, variant = sys.argv[1], sys.argv[2]
if "nomargin" in variant:
    problem.ABOVE_IDLE_MARGIN = 0.0
if "notail" in variant:
    problem._beyond_known_end = lambda t, runnable, pins, idle_h: np.zeros_like(t)
if "pinned" in variant:
    strategies = construction.strategies
    construction.strategies = lambda p, **kw: [
        dataclasses.replace(s, pinned=True) if s.name == "paper" else s
        for s in strategies(p, **kw)]
trace, opts = trace_of(cell)
r = simulate(trace, "greedy", dataclasses.replace(opts, energy_price="above-idle"))
print(cell, variant, round(r.total_cost, 2), r.late_jobs, round(r.energy_kwh, 1),
      dict(moves(trace, r)[0]), flush=True)
