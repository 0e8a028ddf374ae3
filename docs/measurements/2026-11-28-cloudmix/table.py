"""python table.py ROWS.jsonl...: the markdown tables of README.md from run-margin.py's rows.

Bill (late jobs), energy, moves (migrations + resizes + preemptions), lost job-hours, the
bill against the same policy without a margin, and against the bound where
docs/results.md has one (the cloud cells' --bound entries)."""
import json
import sys

BOUNDS = {("cloud", 10, "mixed", 1): 3744.75, ("cloud", 10, "mixed", 2): 3241.32,
          ("cloud", 10, "exponential", 1): 3882.20, ("cloud", 10, "exponential", 2): 3356.21,
          ("cloud", 20, "mixed", 1): 6148.96, ("cloud", 20, "exponential", 1): 6183.60,
          ("cloud", 10, "high", 1): 7051.85, ("cloud", 10, "high", 2): 5972.20}
rows = [json.loads(line) for path in sys.argv[1:] for line in open(path)]
base = {(r["setting"], r["nodes"], r["arrival"], r["seed"], r["mode"], r["policy"]):
        r["total_cost"] for r in rows if r["variant"] in ("m-", "m0")}
print("| setting | N | arrival | seed | policy | margin | bill (late) | energy | moves "
      "| lost h | / no margin | / bound |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
seen = set()
for r in rows:
    key = (r["setting"], r["nodes"], r["arrival"], r["seed"], r["mode"], r["policy"])
    if key + (r["variant"],) in seen:
        continue
    seen.add(key + (r["variant"],))
    moves = r["migrations"] + r["resizes"] + r["preemptions"]
    b = BOUNDS.get(key[:4]) if r["mode"] == "default" else None
    rel = f"{r['total_cost'] / base[key]:.4f}" if key in base else "–"
    margin = "0" if r["variant"] in ("m-", "m0") else r["variant"][1:]   # unset: 0 at c0b4681
    to_bound = f"{r['total_cost'] / b:.4f}" if b else "–"
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[5]} | {margin} | "
          f"{r['total_cost']:,.2f} ({r['late_jobs']}) | {r['energy_cost']:,.2f} | {moves} | "
          f"{r['lost_work_s'] / 3600:.1f} | {rel} | {to_bound} |")
