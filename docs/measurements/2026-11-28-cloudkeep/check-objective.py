"""python check-objective.py CELL [POLICY] [keep]: at every decision of a cloud cell
(default mode, the policy's defaults; keep: with keep_node), the plan's objective
against ``costs.evaluate`` of the plan with the policy's move margin; prints the
decisions where they differ and the relocations (same VM type and GPU count, another
VM) those plans make."""
import sys

from andreas import costs
from andreas.model import ActionKind
from andreas.optimizer.greedy import CLOUD_MOVE_MARGIN
from andreas.simulator import engine
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

cell, policy = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "rg"
keep = len(sys.argv) > 3 and sys.argv[3] == "keep"
setting, n, sc, arrival, seed = cell.split(":")[:5]
trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                       cloud=True)
real = engine.decide
stats = {"decisions": 0, "differ": 0, "reloc": 0, "reloc_in_differ": 0, "gap": 0.0}


def decide(snapshot, rng, name, **opts):
    plan = real(snapshot, rng, name, **opts)
    ev = costs.evaluate(snapshot, plan, move_margin=CLOUD_MOVE_MARGIN)
    nodes = {x.name: x.config for x in snapshot.nodes}
    where = {a.job: a for a in plan.assignments}
    reloc = 0
    for act in plan.actions(snapshot):
        if act.kind is ActionKind.MOVE:
            job = next(j for j in snapshot.jobs if j.id == act.job)
            a = where[act.job]
            if (plan.node_configs[a.node], a.gpus) == (nodes[job.running.node],
                                                       job.running.gpus):
                reloc += 1
    stats["decisions"] += 1
    stats["reloc"] += reloc
    if abs(plan.objective - ev.f_mix) > 1e-6 * max(1.0, abs(ev.f_mix)):
        stats["differ"] += 1
        stats["reloc_in_differ"] += reloc
        stats["gap"] += ev.f_mix - plan.objective
    return plan


engine.decide = decide
r = engine.simulate(trace, policy, SimOptions(keep_node=keep or None))
print(cell, policy, round(r.total_cost, 2), stats)
