"""Power-limit benchmark: a policy with power levels against the same policy without, on
the same generated zeus traces, with the energy bound (issue 30).

Traces: ``generate_trace(workloads="zeus")`` (the six Zeus NSDI '23 workloads on V100 /
P100 nodes with their measured levels), exponential arrivals, N = 10 and 20, seeds 1-3 by
default. Per trace and in total: energy (kWh; and the part above the nodes' idle draw),
total cost and late jobs with limits on and off, the ratios on / off measured in the same
run, and the distance to ``simulator.power_bound`` (every job at its least-energy
configuration and level, capacity ignored). Then the optimizer's time per decision with
levels over without at 100 nodes x 450 jobs (one snapshot, the median of ``--repeat``
decisions each). Targets (issue 30): energy on / off <= 0.85, or within 2 % of the bound
where the bound itself is above 0.85 of off; late jobs not more; total cost lower;
decision time <= 2x. Run: ``python tests/benchmarks/bench_power_limits.py`` (``--help``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from andreas.levels import without_levels
from andreas.model import Snapshot
from andreas.optimizer import decide
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.power_bound import energy_bound
from andreas.simulator.results import SimOptions


def traces(nodes: list[int], seeds: int, arrival: str, scenario: int):
    for n in nodes:
        for seed in range(1, seeds + 1):
            yield generate_trace(n_nodes=n, scenario=scenario, arrival=arrival, seed=seed,
                                 workloads="zeus")


def run_trace(trace, policy: str, opts: SimOptions) -> dict:
    on = simulate(trace, policy, replace(opts, power_levels=True))
    off = simulate(trace, policy, replace(opts, power_levels=False))
    bound = energy_bound(trace)
    return {"trace": trace.name, "bound_kwh": bound.total_kwh,
            "bound_above_idle_kwh": bound.above_idle_kwh,
            **{f"{k}_{m}": getattr(r, k) for m, r in (("on", on), ("off", off))
               for k in ("energy_kwh", "energy_above_idle_kwh", "total_cost", "energy_cost",
                         "tardiness_cost", "late_jobs", "optimizer_mean_s", "makespan_s")}}


def decision_time(n_nodes: int, n_jobs: int, repeat: int, iterations: int) -> dict:
    """Median seconds of one rg decision with and without levels on one large snapshot."""
    trace = generate_trace(n_nodes=n_nodes, seed=1, workloads="zeus",
                           jobs_per_node=max(1, -(-n_jobs // n_nodes)))
    jobs = trace.jobs[:n_jobs]
    snap = Snapshot(now_s=max(j.submit_s for j in jobs), nodes=trace.nodes, jobs=jobs,
                    energy=trace.energy, params=trace.params, name=trace.name)
    out = {}
    for label, s in (("on", snap), ("off", without_levels(snap))):
        decide(s, np.random.default_rng(0), "rg", iterations=iterations)   # warm caches
        times = []
        for k in range(repeat):
            start = time.perf_counter()
            decide(s, np.random.default_rng(k), "rg", iterations=iterations)
            times.append(time.perf_counter() - start)
        out[label] = statistics.median(times)
    out["ratio"] = out["on"] / out["off"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="10,20")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--arrival", default="exponential")
    ap.add_argument("--scenario", type=int, default=1)
    ap.add_argument("--policy", default="rg")
    ap.add_argument("--iterations", type=int, default=None,
                    help="rg/pr constructions per decision (default: the policy's)")
    ap.add_argument("--timing-nodes", type=int, default=100)
    ap.add_argument("--timing-jobs", type=int, default=450)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    opts = SimOptions(iterations=args.iterations)
    rows = []
    print(f"{args.policy}, zeus workloads, scenario {args.scenario}, {args.arrival} arrivals")
    print(f"{'trace':<32} {'E on/off':>9} {'above-idle on/off':>18} {'E on/bound':>10} "
          f"{'bound/off':>9} {'cost on/off':>17} {'late on/off':>11}")
    for trace in traces([int(x) for x in args.nodes.split(",")], args.seeds, args.arrival,
                        args.scenario):
        r = run_trace(trace, args.policy, opts)
        rows.append(r)
        print(f"{r['trace']:<32} {r['energy_kwh_on'] / r['energy_kwh_off']:>9.3f} "
              f"{r['energy_above_idle_kwh_on'] / r['energy_above_idle_kwh_off']:>18.3f} "
              f"{r['energy_kwh_on'] / r['bound_kwh']:>10.3f} "
              f"{r['bound_kwh'] / r['energy_kwh_off']:>9.3f} "
              f"{r['total_cost_on']:>8.1f}/{r['total_cost_off']:<8.1f} "
              f"{r['late_jobs_on']:>5}/{r['late_jobs_off']:<5}", flush=True)
    tot = {k: sum(r[k] for r in rows) for k in rows[0] if k != "trace"}
    summary = {
        "energy_on_off": tot["energy_kwh_on"] / tot["energy_kwh_off"],
        "above_idle_on_off": tot["energy_above_idle_kwh_on"] / tot["energy_above_idle_kwh_off"],
        "energy_on_bound": tot["energy_kwh_on"] / tot["bound_kwh"],
        "energy_off_bound": tot["energy_kwh_off"] / tot["bound_kwh"],
        "bound_off": tot["bound_kwh"] / tot["energy_kwh_off"],
        "above_idle_on_bound": tot["energy_above_idle_kwh_on"] / tot["bound_above_idle_kwh"],
        "above_idle_bound_off": tot["bound_above_idle_kwh"] / tot["energy_above_idle_kwh_off"],
        "cost_on_off": tot["total_cost_on"] / tot["total_cost_off"],
        "energy_cost_on_off": tot["energy_cost_on"] / tot["energy_cost_off"],
        "late_on": tot["late_jobs_on"], "late_off": tot["late_jobs_off"],
        "traces_cost_lower": sum(r["total_cost_on"] < r["total_cost_off"] for r in rows),
        "traces_late_not_more": sum(r["late_jobs_on"] <= r["late_jobs_off"] for r in rows),
        "traces": len(rows)}
    print("total: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                for k, v in summary.items()))
    timing = None
    if not args.no_timing:
        timing = decision_time(args.timing_nodes, args.timing_jobs, args.repeat,
                               args.iterations or 1000)
        print(f"rg decision at {args.timing_nodes} nodes x {args.timing_jobs} jobs: "
              f"{timing['on'] * 1000:.0f} ms with levels, {timing['off'] * 1000:.0f} ms "
              f"without, ratio {timing['ratio']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary, "timing": timing},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
