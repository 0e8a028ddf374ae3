"""python table.py BOUNDS.jsonl CELL...

Per cell: greedy's bill, the hindsight search's best after 100, 200, 400 evaluations of
its first run (search-CELL.jsonl) and after the continuation (search2-CELL.jsonl, if
any), the ratios to greedy and to the LP bound."""
import json
import os
import sys

bounds = {json.loads(line)["cell"]: json.loads(line)["total_cost"] for line in open(sys.argv[1])}
print("| cell | greedy | best @100 | @200 | @400 | @800 (continued) | best / greedy | "
      "LP bound | greedy / bound | best / bound |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cell in sys.argv[2:]:
    name = cell.replace(":", "-")
    first = [json.loads(line) for line in open(f"search-{name}.jsonl")]
    greedy = json.load(open(f"search-{name}-best.json"))["greedy"]["total_cost"]
    marks = [min(greedy, min(r["bill"] for r in first[:k])) for k in (100, 200, 400)]
    best = marks[-1]
    cont = "–"
    if os.path.exists(f"search2-{name}.jsonl"):
        second = [json.loads(line) for line in open(f"search2-{name}.jsonl")]
        best = min(best, min(r["bill"] for r in second))
        cont = f"{best:,.2f}"
    lb = bounds[cell]
    print(f"| {cell} | {greedy:,.2f} | " + " | ".join(f"{m:,.2f}" for m in marks) +
          f" | {cont} | {best / greedy:.3f} | {lb:,.2f} | {greedy / lb:.2f} | {best / lb:.2f} |")
