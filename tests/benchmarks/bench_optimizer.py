"""Optimizer benchmark: time per decision and plan quality on synthetic snapshots.

Default cases: 100 nodes with 50/200/450 concurrent jobs in ANDREAS scenarios 1 and 2,
and the two large ones of the optimizer-quality issue (1 000 nodes x 3 000 jobs in
scenario 1, x 5 000 in scenario 2). Prints each policy's median wall time over a few
runs (the JSON also has the process time: median ``cpu_seconds``, least
``cpu_min_seconds``) and its ratio to ``greedy`` measured in the same run, the issue's
target, f_obj (lower is better) and its ratio to the best of FIFO / EDF / priority on the
same snapshot (<= 1 means never worse than a baseline), f_bar, and the relinking moves.
Every plan is checked for feasibility; times are reported, never asserted. Run:
``bash scripts/bench.sh optimizer`` (or this file with python; ``--quick`` for 100 nodes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from andreas.costs import evaluate
from andreas.feasibility import check_plan
from andreas.optimizer import decide
from andreas.policies import get as policy_spec
from andreas.synthetic import random_snapshot

# targets on this 2-core machine: at 450 jobs (100 nodes) and rg at 1 000 x 5 000
TARGET_S = {(450, "greedy"): 0.020, (450, "rg"): 1.0, (450, "pr"): 3.0, (5000, "rg"): 3.0}
POLICIES = ("greedy", "rg", "pr", "fifo", "edf", "priority")
BASELINES = ("fifo", "edf", "priority")
CASES = ((100, 50, 1), (100, 200, 1), (100, 450, 1), (100, 50, 2), (100, 200, 2),
         (100, 450, 2), (1000, 3000, 1), (1000, 5000, 2))


def run(cases, repeats: int, iterations: int, policies=POLICIES) -> list[dict]:
    decide(random_snapshot(np.random.default_rng(0), 3, 5), np.random.default_rng(0), "rg")
    rows = []
    for nodes, jobs, scenario in cases:
        snap = random_snapshot(np.random.default_rng(1000 + jobs), nodes, jobs,
                               scenario=scenario)
        found: dict[str, dict] = {}
        for policy in policies:
            times, cpu = [], []
            for r in range(repeats):
                start, start_cpu = time.perf_counter(), time.process_time()
                plan = decide(snap, np.random.default_rng(r), policy,
                              **policy_spec(policy).accepted({"iterations": iterations}))
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            check_plan(snap, plan)
            ev = evaluate(snap, plan)
            found[policy] = {"seconds": statistics.median(times),
                             "cpu_seconds": statistics.median(cpu),
                             "cpu_min_seconds": min(cpu), "f_obj": ev.f_obj,
                             "f_bar": ev.f_bar, "running": len(plan.assignments),
                             "moves": plan.stats.get("moves_applied")}
        floor = min(found[b]["f_obj"] for b in BASELINES)
        for policy, f in found.items():
            target = TARGET_S.get((jobs, policy))
            rows.append({
                "scenario": scenario, "nodes": nodes, "jobs": jobs, "policy": policy,
                "seconds": f["seconds"], "cpu_seconds": f["cpu_seconds"],
                "cpu_min_seconds": f["cpu_min_seconds"],
                "ratio_to_greedy": f["seconds"] /
                found["greedy"]["seconds"], "target_s": target,
                "meets_target": None if target is None else f["seconds"] < target,
                "f_obj": f["f_obj"], "f_obj_vs_best_baseline": f["f_obj"] / floor if floor
                else float("nan"), "f_bar": f["f_bar"], "running": f["running"],
                "relinking_moves_applied": f["moves"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the 100-node cases")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=1000, help="MaxIt of rg and pr")
    ap.add_argument("--case", action="append", metavar="NODES,JOBS,SCENARIO",
                    help="run this case instead of the defaults (repeatable)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="comma-separated; greedy and the baselines always run")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.quick or c[0] <= 100]
    if args.case:
        cases = [tuple(int(x) for x in c.split(",")) for c in args.case]
    wanted = set(args.policies.split(",")) | {"greedy", *BASELINES}
    rows = run(cases, args.repeats, args.iterations, [p for p in POLICIES if p in wanted])
    head = (f"{'N':>4} {'sc':>2} {'jobs':>4} {'policy':<8} {'seconds':>9} {'x greedy':>9} "
            f"{'target':>7} {'ok':>3} {'f_obj':>14} {'/best base':>10} {'f_bar':>12} "
            f"{'run':>5} {'PR moves':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        target = f"{r['target_s']:.3g}" if r["target_s"] else "-"
        ok = {None: "-", True: "yes", False: "NO"}[r["meets_target"]]
        moves = "-" if r["relinking_moves_applied"] is None else r["relinking_moves_applied"]
        print(f"{r['nodes']:>4} {r['scenario']:>2} {r['jobs']:>4} {r['policy']:<8} "
              f"{r['seconds']:>9.4f} {r['ratio_to_greedy']:>9.1f} {target:>7} {ok:>3} "
              f"{r['f_obj']:>14.1f} {r['f_obj_vs_best_baseline']:>10.3f} {r['f_bar']:>12.1f} "
              f"{r['running']:>5} {moves:>8}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
