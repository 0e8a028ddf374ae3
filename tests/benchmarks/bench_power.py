"""Power-down benchmark: the energy that switching idle nodes off saves on low-load traces.

Issue 15: "power-down's energy saving on low-load traces is measured and reported". Per
generated trace, rg runs three times in the same process: idle nodes on (``power_w[0]``),
idle nodes off after ``--idle-s`` with a wake-up of ``--wake-s`` charged (the node draws
its idle power that long and the job begins after it), and off at once with no wake-up
(the simulator's old, free ``--power-off-idle``: the bound). Prints energy (kWh), total
cost and late jobs per run and the ratios against "on" measured in the same run, then the
ratios of the sums per arrival kind. No timing is asserted.
Run: ``python tests/benchmarks/bench_power.py`` (``--help``).
"""

from __future__ import annotations

import argparse
import sys

from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--scenarios", default="1,2")
    ap.add_argument("--arrivals", default="low,exponential")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--idle-s", type=float, default=1800.0)
    ap.add_argument("--wake-s", type=float, default=300.0)
    args = ap.parse_args(argv)
    base = SimOptions(iterations=args.iterations)
    runs = {"on": base,
            "off": SimOptions(iterations=args.iterations, power_off_idle=True,
                              power_idle_s=args.idle_s, wake_s=args.wake_s),
            "free": SimOptions(iterations=args.iterations, power_off_idle=True)}
    print(f"rg, N = {args.nodes}, off after {args.idle_s:g} s idle, wake-up {args.wake_s:g} s")
    print(f"{'sc':>2} {'arrival':<12} {'seed':>4} {'kWh on':>9} {'off/on':>7} {'free/on':>7} "
          f"{'cost off/on':>11} {'late on/off':>11} {'wakeups':>7}")
    sums: dict[str, dict[str, float]] = {}
    for scenario in (int(s) for s in args.scenarios.split(",")):
        for arrival in args.arrivals.split(","):
            for seed in range(1, args.seeds + 1):
                trace = generate_trace(n_nodes=args.nodes, scenario=scenario,
                                       arrival=arrival, seed=seed)
                r = {name: simulate(trace, "rg", opts) for name, opts in runs.items()}
                acc = sums.setdefault(arrival, {})
                for name, res in r.items():
                    acc[f"kwh_{name}"] = acc.get(f"kwh_{name}", 0.0) + res.energy_kwh
                    acc[f"cost_{name}"] = acc.get(f"cost_{name}", 0.0) + res.total_cost
                on, off, free = r["on"], r["off"], r["free"]
                print(f"{scenario:>2} {arrival:<12} {seed:>4} {on.energy_kwh:>9.1f} "
                      f"{off.energy_kwh / on.energy_kwh:>7.3f} "
                      f"{free.energy_kwh / on.energy_kwh:>7.3f} "
                      f"{off.total_cost / on.total_cost:>11.3f} "
                      f"{on.late_jobs:>5}/{off.late_jobs:<5} {off.wakeups:>7}", flush=True)
    for arrival, acc in sums.items():
        print(f"{arrival}: energy off/on {acc['kwh_off'] / acc['kwh_on']:.3f} "
              f"(free bound {acc['kwh_free'] / acc['kwh_on']:.3f}), total cost off/on "
              f"{acc['cost_off'] / acc['cost_on']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
