"""python run-cells.py OUT.jsonl VARIANT[,VARIANT...] CELL...

A VARIANT is POLICY[:OPTION=VALUE[:OPTION=VALUE...]], e.g. greedy, greedy:order=pressure,
edf; an OPTION in capitals sets that constant of andreas.optimizer.problem for the run
(greedy:order=atc:ATC_K=1.0). A CELL is op|cloud:N:SCENARIO:ARRIVAL:SEED[:MODE] (MODE:
default, or paper for --period-s 0 --progress exact), as in
../2026-11-27-longrun/horizon/run-traces.py.
Each (cell, variant): the simulation of the generated trace, one JSON line appended to
OUT.jsonl (the summary's keys, the cell, the variant, the wall seconds)."""
import json
import sys
import time

from andreas.optimizer import problem as problem_module
from andreas.simulator import engine
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

_decide = engine.decide
EXTRA: dict = {}
ORIGINAL: dict = {}     # constants a variant changed, with their values before


def _with_extra(snapshot, rng, policy, **options):
    return _decide(snapshot, rng, policy, **options, **EXTRA)


engine.decide = _with_extra


def parse(variant: str) -> tuple[str, dict]:
    policy, *pairs = variant.split(":")
    options = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        options[key] = {"true": True, "false": False}.get(value, value)
        try:
            options[key] = float(value) if "." in value else int(value)
        except ValueError:
            pass
    return policy, options


out, variants = sys.argv[1], sys.argv[2].split(",")
for cell in sys.argv[3:]:
    setting, n, sc, arrival, seed, *rest = cell.split(":")
    mode = rest[0] if rest else "default"
    sim = SimOptions() if mode == "default" else SimOptions(period_s=0, progress="exact")
    trace = generate_trace(n_nodes=int(n), scenario=int(sc), arrival=arrival, seed=int(seed),
                           cloud=setting == "cloud")
    for variant in variants:
        policy, options = parse(variant)
        EXTRA.clear()
        EXTRA.update({k: v for k, v in options.items() if not k.isupper()})
        for k, v in ORIGINAL.items():
            setattr(problem_module, k, v)
        for k, v in options.items():
            if k.isupper():
                ORIGINAL.setdefault(k, getattr(problem_module, k))
                setattr(problem_module, k, v)
        t = time.perf_counter()
        r = simulate(trace, policy, sim)
        row = {"cell": cell, "variant": variant, "setting": setting, "nodes": int(n),
               "scenario": int(sc), "arrival": arrival, "seed": int(seed), "mode": mode,
               "policy": policy, "wall_s": time.perf_counter() - t, **r.summary()}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        moves = r.summary()["migrations"] + r.summary()["preemptions"] + r.summary()["resizes"]
        print(cell, variant, round(r.total_cost, 2), r.late_jobs, moves, flush=True)
