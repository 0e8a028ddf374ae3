"""How tight the lower bound is on tiny traces whose optimum can be bracketed.

Traces whose optimum is known: ``unit_trace`` (one 1-GPU node, rigid jobs of whole
hours, submitted and due on whole hours), where the slot model with hour slots is exact,
so its proven optimum is the optimum of the papers' mode. Then tiny generated traces,
where it is only bracketed (1-2 on-premise nodes of at most 2 GPUs, or 1-2 cloud nodes with
1-2-GPU VMs; 3-5 jobs submitted close together, due 3-5 x ("loose") or 1-2 x ("tight")
their fastest run after submission). Per trace:

- ``LP``: the ``--bound`` figure (``simulator/bounds.py``: on premise the time-indexed
  LP relaxation with its valid inequalities, in the cloud the larger of the per-job and
  capacity bounds); ``LP alone``: on premise the relaxation without them (``cuts=False``);
  ``LP cuts``: on premise with the cuts of ``bounds.py`` only (``work_rows=False``, no
  rows of ``bound_rows.py``);
- ``MILP``: on premise the integral model's HiGHS dual bound (``integral=True``), also
  a lower bound on the optimum of every schedule;
- ``search``: the best non-preemptive list schedule (``tests/simulator/
  exact_schedules.py``), a feasible bill in both modes ("*": its clock stopped it);
- ``slot model``: the optimum of the time-indexed MILP whose jobs may stop, move and
  resize at slot boundaries (papers' mode), a feasible bill there ("*": HiGHS' best
  within its clock, not proven optimal for the slot model);
- the policies' bills: greedy, rg, pr, horizon in the default mode, greedy, rg, pr in
  the papers' mode (``--period-s 0 --progress exact``).

LB = max(LP, MILP) is below the optimum of either mode; UB = the least feasible bill of
the mode. So LP / optimum lies in [LP / UB, LP / LB]: one figure, "(proven)", where LB
meets UB within 1e-6. Nothing is asserted (``tests/simulator/test_exact_schedules.py``
holds LB <= UB and the reference's billing equal to the simulator's).

    python tests/benchmarks/bench_bound_tightness.py [--cases 12] [--limit-s 30]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from andreas.simulator.bounds import lower_bound, onprem_lower_bound
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
from tests.simulator.exact_schedules import (UNIT_S, best_non_preemptive, slot_optimum,
                                             tiny_trace, unit_trace)

DEFAULT_POLICIES = ("greedy", "rg", "pr", "horizon")
PAPER_POLICIES = ("greedy", "rg", "pr")
PAPER = SimOptions(period_s=0, progress="exact")


LOOSE, TIGHT = (3.0, 5.0), (1.0, 2.0)
CASES = [  # (seed, nodes, jobs, cloud, scenario, due slack)
    (1, 1, 3, False, 1, LOOSE), (2, 1, 4, False, 2, LOOSE), (3, 2, 4, False, 1, LOOSE),
    (4, 2, 5, False, 2, LOOSE),
    (1, 1, 3, False, 1, TIGHT), (2, 1, 4, False, 2, TIGHT), (3, 2, 4, False, 1, TIGHT),
    (4, 2, 5, False, 2, TIGHT),
    (1, 1, 3, True, 1, LOOSE), (2, 2, 4, True, 1, LOOSE),
    (1, 1, 3, True, 1, TIGHT), (2, 2, 4, True, 1, TIGHT),
]


UNIT_CASES = [(1, 4), (2, 5), (3, 6), (4, 3), (5, 4), (6, 5), (7, 6), (8, 3)]  # (seed, jobs)


def measure(case: tuple, limit_s: float, slots: int) -> dict:
    if len(case) == 2:
        trace = unit_trace(*case)
        row: dict = {"trace": trace.name}
        t0 = min(j.submit_s for j in trace.jobs)
        span = max(j.submit_s for j in trace.jobs) - t0 + sum(j.epochs * 600.0
                                                               for j in trace.jobs)
        slots = int(round(span / UNIT_S))
        cloud = False
    else:
        seed, nodes, jobs, cloud, scenario, slack = case
        trace = tiny_trace(seed, nodes, jobs, cloud=cloud, scenario=scenario, slack=slack)
        row = {"trace": trace.name + ("-loose" if slack == LOOSE else "-tight")}
        span = None
    row["lp"] = lower_bound(trace)
    row["lp_alone"] = None if cloud else onprem_lower_bound(trace, cuts=False).total_cost
    row["lp_cuts"] = None if cloud else onprem_lower_bound(trace, work_rows=False).total_cost
    row["milp"], row["milp_status"] = None, "-"
    if not cloud:
        mip = onprem_lower_bound(trace, integral=True, time_limit_s=limit_s)
        row["milp"], row["milp_status"] = mip.total_cost, mip.status
    found = best_non_preemptive(trace, time_limit_s=limit_s)
    row["search"], row["search_complete"] = found.bill, found.complete
    if span is None:      # room to round a known schedule's runs up to slots
        span = 1.2 * (max(p.end_s for p in found.schedule)
                      - min(j.submit_s for j in trace.jobs))
    grid = slot_optimum(trace, horizon_s=span, slots=slots, time_limit_s=limit_s)
    row["slot"] = grid.bill if grid else math.inf
    row["slot_optimal"] = bool(grid and grid.optimal)
    bills = {}
    for policy in DEFAULT_POLICIES:
        bills[policy] = simulate(trace, policy, SimOptions()).total_cost
    for policy in PAPER_POLICIES:
        bills[f"{policy} paper"] = simulate(trace, policy, PAPER).total_cost
    row["bills"] = bills
    lb = max(row["lp"], row["milp"] or 0.0)
    # the papers' mode: every schedule here runs in it; the default mode: the
    # non-preemptive schedules and the default-mode bills (the slot model's moves and
    # resizes would pay restarts and lost epochs there)
    if len(case) == 2 and grid and grid.optimal:   # hour slots are exact (unit_trace)
        lb = max(lb, grid.bill)
    row["lb"] = lb
    row["ub_paper"] = min(row["search"], row["slot"],
                          *(v for k, v in bills.items() if k.endswith("paper")))
    row["ub_default"] = min(row["search"], *(bills[p] for p in DEFAULT_POLICIES))
    return row


def _cell(lp: float, lb: float, ub: float) -> str:
    if lb >= ub * (1 - 1e-6):
        return f"{lp / ub:.4f} (proven)"
    return f"{lp / ub:.4f} – {lp / lb:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=len(UNIT_CASES) + len(CASES))
    ap.add_argument("--limit-s", type=float, default=30.0,
                    help="clock of each search and each HiGHS model per trace")
    ap.add_argument("--slots", type=int, default=48, help="slots of the slot model")
    args = ap.parse_args()
    print("| trace | LP alone | LP cuts | LP | MILP (status) | search | slot model | greedy | rg | pr | horizon "
          "| greedy paper | rg paper | pr paper | LP / opt, papers' mode | LP / opt, default "
          "mode |")
    print("|" + "---|" * 16)
    for case in (UNIT_CASES + CASES)[:args.cases]:
        r = measure(case, args.limit_s, args.slots)
        b = r["bills"]
        milp = "–" if r["milp"] is None else (
            f"{r['milp']:.4f} ({'optimal' if r['milp_status'] == 'optimal' else 'dual'})")
        alone = "–" if r["lp_alone"] is None else f"{r['lp_alone']:.4f}"
        cuts = "–" if r["lp_cuts"] is None else f"{r['lp_cuts']:.4f}"
        print(f"| {r['trace']} | {alone} | {cuts} | {r['lp']:.4f} | {milp} | {r['search']:.4f}"
              f"{'' if r['search_complete'] else '*'} | {r['slot']:.4f}"
              f"{'' if r['slot_optimal'] else '*'} | "
              + " | ".join(f"{b[p]:.4f}" for p in DEFAULT_POLICIES)
              + " | " + " | ".join(f"{b[p + ' paper']:.4f}" for p in PAPER_POLICIES)
              + f" | {_cell(r['lp'], r['lb'], r['ub_paper'])}"
              f" | {_cell(r['lp'], r['lb'], r['ub_default'])} |", flush=True)


if __name__ == "__main__":
    main()
