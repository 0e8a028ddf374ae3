"""python heldout.py OUT.jsonl CELL...: greedy with today's default (above idle with
keep_node where restarts cost an overhead) against c_ng pricing (energy_price=node,
keep_node off) on cells no choice was made on, default mode; one JSON line per run."""
import json
import sys

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

for cell in sys.argv[2:]:
    _, n, sc, arrival, seed = cell.split(":")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed))
    for name, opts in (("default", SimOptions()),
                       ("node", SimOptions(energy_price="node", keep_node=False))):
        r = simulate(trace, "greedy", opts)
        with open(sys.argv[1], "a") as f:
            f.write(json.dumps({"cell": cell, "variant": name, **r.summary()}) + "\n")
        print(cell, name, round(r.total_cost, 2), r.late_jobs, flush=True)
