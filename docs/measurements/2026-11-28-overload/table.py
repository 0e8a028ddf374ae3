"""python table.py [--only V1,V2] ROWS.jsonl... : one markdown table: bill, energy, tardiness,
late jobs, moves (migrations + preemptions + resizes), lost work, ratio to greedy (the
plain greedy row of the same file set) and to the bound (BOUNDS below: the on-premise
LP with its cuts, docs/results.md)."""
import json
import sys

BOUNDS = {"op:10:1:high:1": 1409.98, "op:10:1:high:2": 1640.40, "op:10:2:high:1": 8479.49,
          "op:10:2:high:2": 9373.47, "op:10:2:mixed:1": 152.02, "op:10:2:mixed:2": 130.20,
          "op:20:1:high:1": 277.04, "op:10:1:exponential:1": 203.93,
          "op:10:2:exponential:1": 228.36, "op:10:1:mixed:1": 234.78,
          "op:20:2:high:1": 8711.72, "op:20:2:mixed:1": 281.81, "op:50:1:high:1": 5125.87,
          "op:50:2:mixed:1": 725.21}
args = sys.argv[1:]
only = args[1].split(",") if args[:1] == ["--only"] else None
files = args[2:] if only else args
rows = [json.loads(line) for f in files for line in open(f)]
if only:
    rows = [r for r in rows if r["variant"] in only]
cells = list(dict.fromkeys(r["cell"] for r in rows))
print("| cell | variant | bill | energy | tardiness | late | moves | lost h | / greedy | / bound |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cell in cells:
    mine = [r for r in rows if r["cell"] == cell]
    base = next((r["total_cost"] for r in mine if r["variant"] == "greedy"), None)
    seen = set()
    for r in mine:
        if r["variant"] in seen:
            continue
        seen.add(r["variant"])
        moves = r["migrations"] + r["preemptions"] + r["resizes"]
        bound = BOUNDS.get(cell)
        to_greedy = f"{r['total_cost'] / base:.4f}" if base else "–"
        to_bound = f"{r['total_cost'] / bound:.2f}" if bound else "–"
        print(f"| {cell} | {r['variant']} | {r['total_cost']:,.2f} | {r['energy_cost']:,.2f} | "
              f"{r['tardiness_cost']:,.2f} | {r['late_jobs']} | {moves} | "
              f"{r['lost_work_s'] / 3600:.1f} | {to_greedy} | {to_bound} |")
