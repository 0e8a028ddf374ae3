"""Tariff benchmark: tariff-aware against tariff-blind rg (or ``--policy``) on the same traces.

Target of issue 15: under the same day/night tariff (``profiles/tariffs/day-night.csv``)
tariff-aware rg costs less than tariff-blind rg. Both bills integrate the tariff over the
actual run intervals; the blind run plans with the tariff's mean price and PUE. Prints
per trace the total bill, its energy and tardiness parts and the ratio aware / blind
measured in the same run, then the ratio of the sums per arrival kind and over all.
Run: ``bash scripts/bench.sh tariff`` or this file with python (``--help``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from andreas.costs import with_tariff
from andreas.formats.tariff import load_tariff
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TARIFF = ROOT / "profiles" / "tariffs" / "day-night.csv"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tariff", type=Path, default=DEFAULT_TARIFF)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--scenarios", default="1,2")
    ap.add_argument("--arrivals", default="low,exponential")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--policy", default="rg", help="the policy both runs use (default rg)")
    ap.add_argument("--power-off-idle", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tariff = load_tariff(args.tariff)
    opts = SimOptions(iterations=args.iterations, power_off_idle=args.power_off_idle)
    rows = []
    print(f"tariff {args.tariff.name}, N = {args.nodes}, {args.policy} at {args.iterations} "
          "iterations"
          + (", idle nodes off" if args.power_off_idle else ""))
    print(f"{'scenario':>8} {'arrival':<12} {'seed':>4} {'blind':>9} {'aware':>9} "
          f"{'energy b/a':>15} {'tardiness b/a':>15} {'aware/blind':>11}")
    for scenario in (int(s) for s in args.scenarios.split(",")):
        for arrival in args.arrivals.split(","):
            for seed in range(1, args.seeds + 1):
                trace = generate_trace(n_nodes=args.nodes, scenario=scenario, arrival=arrival,
                                       seed=seed)
                trace = replace(trace, energy=with_tariff(trace.energy, tariff))
                blind = simulate(trace, args.policy, replace(opts, tariff_blind=True))
                aware = simulate(trace, args.policy, opts)
                ratio = aware.total_cost / blind.total_cost
                print(f"{scenario:>8} {arrival:<12} {seed:>4} {blind.total_cost:>9.1f} "
                      f"{aware.total_cost:>9.1f} "
                      f"{blind.energy_cost:>7.1f}/{aware.energy_cost:<7.1f} "
                      f"{blind.tardiness_cost:>7.1f}/{aware.tardiness_cost:<7.1f} "
                      f"{ratio:>11.3f}", flush=True)
                rows.append({"scenario": scenario, "arrival": arrival, "seed": seed,
                             "blind_total": blind.total_cost, "aware_total": aware.total_cost,
                             "blind_energy": blind.energy_cost,
                             "aware_energy": aware.energy_cost,
                             "blind_tardiness": blind.tardiness_cost,
                             "aware_tardiness": aware.tardiness_cost,
                             "blind_late_jobs": blind.late_jobs,
                             "aware_late_jobs": aware.late_jobs, "ratio": ratio})
    summary = {}
    for arrival in [*args.arrivals.split(","), "all"]:
        mine = [r for r in rows if arrival in ("all", r["arrival"])]
        summary[arrival] = {
            "total_ratio": sum(r["aware_total"] for r in mine)
            / sum(r["blind_total"] for r in mine),
            "energy_ratio": sum(r["aware_energy"] for r in mine)
            / sum(r["blind_energy"] for r in mine),
            "aware_cheaper": sum(r["ratio"] < 1 for r in mine), "traces": len(mine)}
        s = summary[arrival]
        print(f"{arrival}: bill aware / blind = {s['total_ratio']:.3f} (energy "
              f"{s['energy_ratio']:.3f}); aware cheaper on {s['aware_cheaper']} of "
              f"{s['traces']} traces")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"policy": args.policy, "nodes": args.nodes,
                                         "power_off_idle": args.power_off_idle,
                                         "tariff": str(args.tariff), "rows": rows,
                                         "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
