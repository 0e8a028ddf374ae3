"""python table.py: the README's tables from grid.jsonl and zeus.jsonl (in this folder).

Grid bounds: the `bound` column of docs/results.md's grid table (the on-premise LP with
its cuts, docs/measurements/2026-11-28-lpbound/bounds.jsonl), not re-solved here."""
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


def rows(name):
    by = defaultdict(dict)
    for line in (HERE / name).read_text().splitlines():
        r = json.loads(line)
        by[r["cell"]][r["price"]] = r
    return by


def money(x):
    return f"{x:,.2f}".replace(",", " ")


print("| cell | node | above-idle | above-idle / node | node / bound | above-idle / bound "
      "| above-idle kWh / node kWh | lost work h (node / above-idle) |")
print("|---|---|---|---|---|---|---|---|")
for cell, r in rows("grid.jsonl").items():
    n, a, b = r["node"], r["above-idle"], BOUND[cell]
    print(f"| {cell[3:]} | {money(n['total_cost'])} ({n['late_jobs']}) | "
          f"{money(a['total_cost'])} ({a['late_jobs']}) | "
          f"{a['total_cost'] / n['total_cost']:.4f} | {n['total_cost'] / b:.4f} | "
          f"{a['total_cost'] / b:.4f} | {a['energy_kwh'] / n['energy_kwh']:.4f} | "
          f"{n['lost_work_s'] / 3600:.0f} / {a['lost_work_s'] / 3600:.0f} |")
print()
print("| trace, levels | cost node | cost above-idle | cost above-idle / node | kWh node "
      "| kWh above-idle | kWh bound | node / bound | above-idle / bound | "
      "lost work h (node / above-idle) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cell, r in rows("zeus.jsonl").items():
    n, a = r["node"], r["above-idle"]
    b = n["bound_kwh"]
    print(f"| {cell[5:]} | {money(n['total_cost'])} ({n['late_jobs']}) | "
          f"{money(a['total_cost'])} ({a['late_jobs']}) | "
          f"{a['total_cost'] / n['total_cost']:.4f} | {n['energy_kwh']:.1f} | "
          f"{a['energy_kwh']:.1f} | {b:.1f} | {n['energy_kwh'] / b:.4f} | "
          f"{a['energy_kwh'] / b:.4f} | {n['lost_work_s'] / 3600:.0f} / "
          f"{a['lost_work_s'] / 3600:.0f} |")
