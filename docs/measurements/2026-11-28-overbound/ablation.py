"""python ablation.py CELL... (from the repository root): the default bound with one
family of bound_rows.py left out at a time (late_rows, busy_rows, set_rows), on the eight
unit traces of bench_bound_tightness.py and on the given on-premise cells
(N:scenario:arrival:seed); each figure as bound/wall seconds."""
import sys
import time

sys.path.insert(0, ".")

from andreas.simulator import bound_rows as R
from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.generate import generate_trace
from tests.simulator.exact_schedules import unit_trace

FAMILIES = ("busy_rows", "late_rows", "set_rows")
original = {name: getattr(R, name) for name in FAMILIES}


def solve(trace, drop: tuple) -> tuple[float, float]:
    for name in FAMILIES:
        setattr(R, name, (lambda *a, **k: None) if name in drop else original[name])
    start = time.perf_counter()
    return onprem_lower_bound(trace).total_cost, time.perf_counter() - start


traces = [unit_trace(s, n) for s, n in [(1, 4), (2, 5), (3, 6), (4, 3), (5, 4), (6, 5),
                                        (7, 6), (8, 3)]]
for cell in sys.argv[1:]:
    n, sc, arrival, seed = cell.split(":")
    traces.append(generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival,
                                 seed=int(seed), cloud=False))
for drop in [("late_rows",), ("busy_rows",), ("set_rows",)]:
    cells = [solve(t, drop) for t in traces]
    print("drop", drop, " ".join(f"{v:.4f}/{s:.1f}s" for v, s in cells), flush=True)
