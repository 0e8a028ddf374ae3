"""python hops.py CELL: greedy with node and with above-idle on one cell
(op:N:SC:ARRIVAL:SEED or zeus:N:SEED:on|off), the moves of their attempts (same
configuration on another node, another class, another GPU count) and the
configurations jobs first start on."""
import sys
from dataclasses import replace

from moves import moves, trace_of

from andreas.simulator.engine import simulate

trace, opts = trace_of(sys.argv[1])
for price in ("node", "above-idle"):
    r = simulate(trace, "greedy", replace(opts, energy_price=price))
    moved, first = moves(trace, r)
    print(price, round(r.total_cost, 2), r.late_jobs, dict(moved), dict(first), flush=True)
