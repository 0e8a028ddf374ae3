"""python pivot.py VARIANT[,VARIANT...] ROWS.jsonl... : bills (late jobs) per cell, one
column per variant, and each variant's ratio to the plain greedy of the same cell."""
import json
import sys

variants = sys.argv[1].split(",")
rows = {}
for f in sys.argv[2:]:
    for line in open(f):
        r = json.loads(line)
        rows.setdefault((r["cell"], r["variant"]), r)
cells = list(dict.fromkeys(c for c, _ in rows))
print("| cell | " + " | ".join(variants) + " |")
print("|---|" + "---|" * len(variants))
for cell in cells:
    base = rows.get((cell, "greedy"))
    out = []
    for v in variants:
        r = rows.get((cell, v))
        if r is None:
            out.append("–")
            continue
        ratio = f" {r['total_cost'] / base['total_cost']:.3f}x" if base and v != "greedy" else ""
        out.append(f"{r['total_cost']:,.2f} ({r['late_jobs']}){ratio}")
    print(f"| {cell} | " + " | ".join(out) + " |")
