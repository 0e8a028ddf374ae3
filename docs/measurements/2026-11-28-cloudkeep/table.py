"""python table.py keep.jsonl...: bill, late jobs, moves by kind, ratios (markdown)."""
import json
import sys

BOUND = {"cloud:10:1:mixed:1": 3744.75, "cloud:10:1:mixed:2": 3241.32,
         "cloud:10:1:exponential:1": 3882.20, "cloud:10:1:exponential:2": 3356.21,
         "cloud:20:1:mixed:1": 6148.96}
KINDS = ("relocation", "gpus", "type", "type+gpus", "preemption")
rows = [json.loads(line) for path in sys.argv[1:] for line in open(path)]
off = {(r["cell"], r["policy"]): r["total_cost"] for r in rows if r["variant"] == "off"}
print("| cell | policy | keep_node | bill | late | " + " | ".join(KINDS)
      + " | lost h | / without | / bound |")
print("|---" * (8 + len(KINDS)) + "|")
for r in rows:
    k = r["kinds"]
    bound = BOUND.get(r["cell"])
    print(f"| {r['cell'].removeprefix('cloud:10:1:')} | {r['policy']} | "
          f"{'on' if r['variant'] == 'keep' else 'off'} | {r['total_cost']:,.2f} | "
          f"{r['late_jobs']} | " + " | ".join(str(k.get(x, 0)) for x in KINDS)
          + f" | {r['lost_work_s'] / 3600:.1f} | "
          f"{r['total_cost'] / off[(r['cell'], r['policy'])]:.4f} | "
          + (f"{r['total_cost'] / bound:.4f} |" if bound else "– |"))
