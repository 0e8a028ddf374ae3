"""python instrument.py OUT.json CELL [POLICY] [KEY=VALUE ...]

Runs one cloud cell (cloud:N:SC:ARRIVAL:SEED, default mode) under POLICY (rg) and records,
without changing any plan, every move the plans make: its trigger (submission,
completion, period, revisit), its kind (preemption; relocation: same VM type and GPU
count elsewhere; type change; GPU-count change), the work it throws away (partial epoch
+ restart overhead) priced at the VM share it restarts on, and the per-job saving the
plan saw (costs._job_mix_cost on the old configuration, continuing, against the new
one, restarting, plus the tardiness difference). KEY=VALUE: policy options."""
import collections
import json
import math
import sys

from andreas import costs
from andreas.model import ActionKind
from andreas.simulator import engine
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

out, cell = sys.argv[1], sys.argv[2]
policy = sys.argv[3] if len(sys.argv) > 3 else "rg"
extra = dict(a.split("=", 1) for a in sys.argv[4:])
setting, n, sc, arrival, seed = cell.split(":")[:5]
trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                       cloud=True)
subs = collections.Counter(round(j.submit_s, 6) for j in trace.jobs)
state = {"revisit": math.inf, "completions": set()}
rows = []
real_decide = engine.decide


def config_time(snapshot, job, vm, g, continuing):
    entry = {c.name: c for c in snapshot.catalog}[vm]
    return job.time_s(entry.gpu_type, g, snapshot.params, continuing=continuing)


def job_view(snapshot, job, vm, g, classes):
    entry = {c.name: c for c in snapshot.catalog}[vm]
    mix = costs._job_mix_cost(snapshot, job, entry, g, classes)
    cont = (job.running is not None and job.running.gpus == g
            and classes[job.running.node] == ("vm", vm))
    t = job.time_s(entry.gpu_type, g, snapshot.params, continuing=cont)
    late = job.weight * max(0.0, snapshot.now_s + t - job.due_s)
    return mix, late, t, entry.cost_per_hour * g / entry.gpus


def decide(snapshot, rng, policy, **opts):
    plan = real_decide(snapshot, rng, policy, **opts)
    t = snapshot.now_s
    trig = []
    if subs.get(round(t, 6)):
        trig.append("submission")
    if any(abs(c - t) < 1e-6 for c in state["completions"]):
        trig.append("completion")
    if snapshot.params.period_s and abs(t / snapshot.params.period_s
                                        - round(t / snapshot.params.period_s)) < 1e-9:
        trig.append("period")
    if state["revisit"] <= t + 1e-6:
        trig.append("revisit")
    state["revisit"] = plan.revisit_s if plan.revisit_s is not None and plan.revisit_s > t \
        else math.inf
    nodes = {nd.name: nd for nd in snapshot.nodes}
    classes = costs.node_classes(snapshot)
    ev = costs.evaluate(snapshot, plan)
    jobs = {j.id: j for j in snapshot.jobs}
    where = {a.job: a for a in plan.assignments}
    for act in plan.actions(snapshot):
        if act.kind not in (ActionKind.PREEMPT, ActionKind.MOVE, ActionKind.RESIZE):
            continue
        job = jobs[act.job]
        run = job.running
        old_vm = nodes[run.node].config
        row = {"t": t, "trigger": "+".join(trig) or "?", "job": job.id,
               "kind": act.kind.value, "from": [old_vm, run.gpus, run.node],
               "plan_move_cost": ev.move_cost}
        ep = job.epoch_time_s[{c.name: c for c in snapshot.catalog}[old_vm].gpu_type][
            run.gpus - 1]
        partial = (job.epochs_done - math.floor(job.epochs_done + 1e-9)) * ep
        row["partial_s"] = partial
        row["epoch_s"] = ep
        old = job_view(snapshot, job, old_vm, run.gpus, classes)
        row["old_mix"], row["old_late"], row["old_t"], row["old_rate"] = old
        a = where.get(job.id)
        if a is None:
            row["kind2"] = "preempt"
            row["redo_cost"] = 0.0
        else:
            new_vm = plan.node_configs[a.node]
            row["to"] = [new_vm, a.gpus, a.node]
            new = job_view(snapshot, job, new_vm, a.gpus, classes)
            row["new_mix"], row["new_late"], row["new_t"], row["new_rate"] = new
            row["kind2"] = ("relocate" if (new_vm, a.gpus) == (old_vm, run.gpus) else
                            "type" if new_vm != old_vm and a.gpus == run.gpus else
                            "gpus" if new_vm == old_vm else "type+gpus")
            row["redo_cost"] = (partial + snapshot.params.restart_overhead_s) * new[3] / 3600
            row["seen_saving"] = (old[0] + old[1]) - (new[0] + new[1])
            row["vm_reconfigured"] = plan.node_configs.get(run.node) != old_vm
        rows.append(row)
    return plan


real_complete = engine.Simulator._complete


def complete(self, run, t):
    state["completions"].add(t)
    return real_complete(self, run, t)


engine.decide = decide
engine.Simulator._complete = complete
opts = SimOptions()
if extra:
    import dataclasses
    opts = dataclasses.replace(opts, **{k: type(getattr(opts, k))(v) if getattr(opts, k)
                                        is not None else float(v) for k, v in extra.items()})
r = engine.simulate(trace, policy, opts)
summary = r.summary()
summary.pop("options", None)
json.dump({"cell": cell, "policy": policy, "summary": summary, "moves": rows},
          open(out, "w"), default=str)
print(cell, policy, round(r.total_cost, 2), r.late_jobs, len(rows), "moves")
