"""Simulator benchmark: one N = 50 trace (500 jobs) under rg at 1000 iterations.

Target of the simulator issue: at most 250 s on this 2-core machine (what the papers'
C++ implementation needs for a trace of that size here). Prints the wall time, the
number of rescheduling points, the share spent in the optimizer, and the ratio to an
EDF simulation of the same trace measured in the same run. Run: ``bash scripts/bench.sh
--simulator`` or this file with python.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

TARGET_S = 250.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arrival", default="exponential")
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--policies", default="edf,rg,pr")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    trace = generate_trace(n_nodes=args.nodes, scenario=1, arrival=args.arrival, seed=args.seed)
    rows = []
    base = None
    print(f"trace {trace.name}: {len(trace.jobs)} jobs, {len(trace.nodes)} nodes")
    print(f"{'policy':<8} {'wall s':>8} {'x edf':>8} {'resched.':>9} {'optimizer s':>12} "
          f"{'target s':>9} {'ok':>3} {'total cost':>11}")
    for policy in args.policies.split(","):
        r = simulate(trace, policy, SimOptions(iterations=args.iterations))
        base = base or r.wall_s
        target = TARGET_S if policy == "rg" else None
        ok = "-" if target is None else ("yes" if r.wall_s <= target else "NO")
        print(f"{policy:<8} {r.wall_s:>8.1f} {r.wall_s / base:>8.1f} {r.optimizer_calls:>9} "
              f"{r.optimizer_total_s:>12.1f} {target or '-':>9} {ok:>3} {r.total_cost:>11.1f}")
        rows.append({"policy": policy, "wall_s": r.wall_s, "ratio_to_first": r.wall_s / base,
                     "rescheduling_points": r.optimizer_calls,
                     "optimizer_total_s": r.optimizer_total_s, "target_s": target,
                     "total_cost": r.total_cost})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
