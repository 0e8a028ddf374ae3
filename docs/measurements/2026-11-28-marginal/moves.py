"""Helpers of hops.py and variant.py: a cell's trace and the moves of a simulation."""
from collections import Counter, defaultdict

from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions


def trace_of(cell: str):
    """(trace, options) of op:N:SC:ARRIVAL:SEED or zeus:N:SEED:on|off."""
    kind, *rest = cell.split(":")
    if kind == "zeus":
        n, seed, levels = rest
        trace = generate_trace(n_nodes=int(n), scenario=1, arrival="exponential",
                               seed=int(seed), workloads="zeus")
        return trace, SimOptions(power_levels=levels == "on")
    n, sc, arrival, seed = rest
    return (generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed)),
            SimOptions())


def moves(trace, result) -> tuple[Counter, Counter]:
    """Moves between two consecutive attempts of a job (same configuration on another
    node, another class, another GPU count), and the configurations jobs first start on."""
    kind = {x.name: (x.gpu_type, x.gpus) for x in trace.nodes}
    by = defaultdict(list)
    for a in sorted(result.attempts, key=lambda a: a.start_s):
        by[a.job].append(a)
    out, first = Counter(), Counter()
    for atts in by.values():
        first[f"{kind[atts[0].node][0]} x{atts[0].gpus}"] += 1
        for x, y in zip(atts, atts[1:]):
            if y.start_s > x.end_s + 1:
                continue
            if kind[x.node] != kind[y.node]:
                out["class"] += 1
            elif x.gpus != y.gpus:
                out["gpus"] += 1
            else:
                out["same configuration"] += 1
    return out, first
