"""Optimizer benchmark: 100 nodes, 50/200/450 concurrent jobs, ANDREAS scenarios 1 and 2.

Prints each policy's median wall time over a few runs, its ratio to ``greedy``
measured in the same run, the issue's target, and the objectives (f_obj: lower is
better; f_bar: higher is better). Every plan is checked for feasibility; times are
reported, never asserted. Run: ``bash scripts/bench.sh`` (or this file with python).
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
from andreas.synthetic import random_snapshot

TARGET_S = {"greedy": 0.020, "rg": 1.0, "pr": 3.0}   # at 450 jobs on this 2-core machine
POLICIES = ("greedy", "rg", "pr", "edf")


def run(nodes: int, jobs_list: list[int], scenarios: list[int], repeats: int,
        iterations: int) -> list[dict]:
    rows = []
    for scenario in scenarios:
        for jobs in jobs_list:
            snap = random_snapshot(np.random.default_rng(1000 + jobs), nodes, jobs,
                                   scenario=scenario)
            base = None
            for policy in POLICIES:
                times = []
                for r in range(repeats):
                    start = time.perf_counter()
                    plan = decide(snap, np.random.default_rng(r), policy, iterations=iterations)
                    times.append(time.perf_counter() - start)
                check_plan(snap, plan)
                ev = evaluate(snap, plan)
                median = statistics.median(times)
                if policy == "greedy":
                    base = median
                target = TARGET_S.get(policy) if jobs == 450 else None
                rows.append({
                    "scenario": scenario, "nodes": nodes, "jobs": jobs, "policy": policy,
                    "seconds": median, "ratio_to_greedy": median / base,
                    "target_s": target, "meets_target": None if target is None else median < target,
                    "f_obj": ev.f_obj, "f_bar": ev.f_bar, "running": len(plan.assignments),
                    "relinking_moves_applied": plan.stats.get("moves_applied"),
                })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--jobs", default="50,200,450")
    ap.add_argument("--scenarios", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=1000, help="MaxIt of rg and pr")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    args = ap.parse_args(argv)
    rows = run(args.nodes, [int(x) for x in args.jobs.split(",")],
               [int(x) for x in args.scenarios.split(",")], args.repeats, args.iterations)
    head = (f"{'sc':>2} {'jobs':>4} {'policy':<7} {'seconds':>9} {'x greedy':>9} "
            f"{'target':>7} {'ok':>3} {'f_obj':>14} {'f_bar':>10} {'run':>4} {'PR moves':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        target = f"{r['target_s']:.3g}" if r["target_s"] else "-"
        ok = {None: "-", True: "yes", False: "NO"}[r["meets_target"]]
        moves = "-" if r["relinking_moves_applied"] is None else r["relinking_moves_applied"]
        print(f"{r['scenario']:>2} {r['jobs']:>4} {r['policy']:<7} {r['seconds']:>9.4f} "
              f"{r['ratio_to_greedy']:>9.1f} {target:>7} {ok:>3} {r['f_obj']:>14.2f} "
              f"{r['f_bar']:>10.1f} {r['running']:>4} {moves:>8}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
