"""python table.py: the README's tables from grid.jsonl and zeus.jsonl (in this folder).

Grid bounds: the `bound` column of docs/results.md's grid table (the on-premise LP with
its cuts), as ../2026-11-28-marginal/table.py; Zeus: the energy bound (power_bound)."""
import json
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
BOUND = {"op:10:1:exponential:1": 203.93, "op:10:1:exponential:2": 177.35,
         "op:10:1:mixed:1": 234.78, "op:10:1:mixed:2": 203.18,
         "op:10:2:exponential:1": 228.36, "op:10:2:exponential:2": 199.04,
         "op:20:1:exponential:1": 370.76, "op:20:2:exponential:1": 411.79,
         "op:20:2:mixed:1": 281.81, "op:50:1:exponential:1": 957.21,
         "op:50:2:exponential:1": 1063.89}
V = ("node", "node+keep", "above-idle", "above-idle+keep")
SAME = "same cfg, other node"


def rows(name):
    by = defaultdict(dict)
    path = HERE / name
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            by[r["cell"]][r["variant"]] = r
    return {c: r for c, r in by.items() if all(v in r for v in V)}


def money(x):
    return f"{x:,.2f}".replace(",", " ")


def table(name, prefix):
    data = rows(name)
    grid = name.startswith("grid")
    head = ("| cell | " + " | ".join(f"{v}: $ (late)" for v in V)
            + " | node+keep / node | above-idle+keep / node | "
            + ("above-idle+keep / bound | " if grid else "kWh / bound (node, ai+keep) | ")
            + "kWh node / ai / ai+keep | lost work h node / ai / ai+keep "
            "| same-config moves node / node+keep / ai / ai+keep |")
    print(head)
    print("|---" * (len(V) + 6) + "|")
    tot = defaultdict(float)
    for cell, r in data.items():
        n, k = r["node"], r["above-idle+keep"]
        cols = [f"{money(r[v]['total_cost'])} ({r[v]['late_jobs']})" for v in V]
        for v in V:
            tot[v] += r[v]["total_cost"]
            tot[v + " late"] += r[v]["late_jobs"]
        if grid:
            b = f"{k['total_cost'] / BOUND[cell]:.4f}"
        else:
            b = f"{n['energy_kwh'] / n['bound_kwh']:.3f} / {k['energy_kwh'] / n['bound_kwh']:.3f}"
        kwh = " / ".join(f"{r[v]['energy_kwh']:.0f}" for v in ("node", "above-idle",
                                                               "above-idle+keep"))
        lost = " / ".join(f"{r[v]['lost_work_s'] / 3600:.0f}" for v in
                          ("node", "above-idle", "above-idle+keep"))
        same = " / ".join(str(r[v]["moves"].get(SAME, 0)) for v in V)
        print(f"| {cell[len(prefix):]} | " + " | ".join(cols)
              + f" | {r['node+keep']['total_cost'] / n['total_cost']:.4f}"
              + f" | {k['total_cost'] / n['total_cost']:.4f} | {b} | {kwh} | {lost} | {same} |")
    print()
    print("Totals: " + ", ".join(f"{v} {money(tot[v])} $ ({tot[v + ' late']:.0f} late)"
                                 for v in V))
    print()


table("zeus.jsonl", "zeus:")
table("grid.jsonl", "op:")
