"""The long run: greedy, rg, pr, horizon against each other and the trace's lower bound.

Issue 33's targets, per trace of a sweep grid: the best policy (rg, pr or horizon) bills at
most what the deterministic greedy bills, and at most 1.05 x the lower bound up to load
1.5 (1.15 x under overload). The bound is ``simulator.bounds.lower_bound`` (cloud: per-job
configuration mixes; on premise: the time-indexed LP relaxation). Printed per trace:
each policy's bill, best / greedy, best / bound, and where pr's time went (job-hours
waiting, running beyond the fastest configuration, thrown away at stops) with its moves.
Ratios only, measured in the same run; targets printed, never asserted.

    python tests/benchmarks/bench_longrun.py --nodes 10 --seeds 2 --scenario 1,2 \\
        --arrival exponential,mixed,high [--cloud] [--paper]
    python tests/benchmarks/bench_longrun.py --from out/sweep/sweep.json   # a sweep's rows

``--paper``: the papers' mode (``--period-s 0 --progress exact``); default: the
simulator's default mode (epoch checkpoints, period 1 h, revisits, restart overhead).
One worker process (``--workers`` to change); a sweep of the same grid with ``--bound``
(``andreas simulate --sweep ... --bound``, or its merged shards) gives the same rows.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

TARGET_GREEDY = 1.00
TARGET_BOUND = 1.05         # up to load 1.5; 1.15 under overload
POLICIES = ("greedy", "rg", "pr")
EXTRA = ("horizon",)        # shown where the rows have it


def table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown rows, one per trace, from sweep rows (policies, ``bound`` and, where the
    sweep ran it, ``horizon``: then a column for it, and best covers it)."""
    by_trace: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by_trace[(r["scenario"], r["arrival"], r["nodes"], r["seed"])][r["policy"]] = r
    extra = [p for p in EXTRA if any(p in t for t in by_trace.values())]
    shown = (*POLICIES, *extra)
    out = ["| sc | arrival | N | seed | " + " | ".join(shown) + " | bound | best/greedy "
           "| best/bound | pr energy | pr tardiness | pr late | pr wait h | pr slow h "
           "| pr lost h | pr moves |",
           "|" + "---|" * (14 + len(shown))]
    for key in sorted(by_trace):
        t = by_trace[key]
        if not all(p in t for p in shown):
            continue
        best = min(t[p]["total_cost"] for p in ("rg", "pr", *extra))
        lower = t.get("bound", {}).get("total_cost")
        pr = t["pr"]
        moves = pr.get("migrations", 0) + pr.get("preemptions", 0) + pr.get("resizes", 0)
        out.append("| " + " | ".join([
            str(key[0]), key[1], str(key[2]), str(key[3]),
            *(f"{t[p]['total_cost']:.2f}" for p in shown),
            f"{lower:.2f}" if lower else "-",
            f"{best / t['greedy']['total_cost']:.4f}",
            f"{best / lower:.4f}" if lower else "-",
            f"{pr['energy_cost']:.2f}", f"{pr['tardiness_cost']:.2f}", str(pr["late_jobs"]),
            f"{pr.get('wait_s', 0) / 3600:.1f}", f"{pr.get('slow_s', 0) / 3600:.1f}",
            f"{pr.get('lost_work_s', 0) / 3600:.1f}", str(moves)]) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", help="a sweep.json (or merged sweep) to read")
    ap.add_argument("--nodes", default="10")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--scenario", default="1,2")
    ap.add_argument("--arrival", default="exponential,mixed,high")
    ap.add_argument("--cloud", action="store_true")
    ap.add_argument("--paper", action="store_true", help="--period-s 0 --progress exact")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    if args.source:
        with open(args.source) as f:
            rows = json.load(f)["runs"]
    else:
        from andreas.simulator.results import SimOptions
        from andreas.simulator.sweep import Grid, run_sweep
        grid = Grid(scenarios=tuple(int(x) for x in args.scenario.split(",")),
                    arrivals=tuple(args.arrival.split(",")),
                    nodes=tuple(int(x) for x in args.nodes.split(",")),
                    seeds=tuple(range(1, args.seeds + 1)), policies=(*POLICIES, *EXTRA, "bound"),
                    cloud=args.cloud)
        options = SimOptions(period_s=0, progress="exact") if args.paper else SimOptions()
        rows = run_sweep(grid, options, workers=args.workers)
    print("\n".join(table(rows)))
    print(f"targets: best/greedy <= {TARGET_GREEDY:.2f}; best/bound <= {TARGET_BOUND:.2f} up "
          "to load 1.5, <= 1.15 under overload")


if __name__ == "__main__":
    main()
