"""python table.py [--mode paper] ROWS.jsonl... : the results table (markdown) of
run-traces.py and bounds.py rows of one mode (default: the default mode; rows without a
mode are of it; bounds hold for both), with the bounds recorded by the sweeps of ../onprem-default,
../cloud-default, ../onprem20 (deterministic LP optima; bounds.py unchanged since
11f912f) where bounds.py did not run."""
import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
BOUND: dict[tuple, float] = {}
for sweep, setting in (("onprem-default", "op"), ("cloud-default", "cloud"),
                       ("onprem20", "op"), ("cloud20", "cloud")):
    for r in json.loads((HERE.parent / sweep / "sweep.json").read_text())["runs"]:
        if r["policy"] == "bound":
            key = (setting, r["nodes"], r["scenario"] if setting == "op" else 1, r["arrival"],
                   r["seed"])
            BOUND[key] = r["total_cost"]

# the cloud capacity LP (docs/results.md, 11f912f), where it is above the per-job bound
for arrival, lp in (("exponential", 3882.20), ("mixed", 3744.74), ("high", 6962.56)):
    key = ("cloud", 10, 1, arrival, 1)
    BOUND[key] = max(BOUND.get(key, 0.0), lp)

args = sys.argv[1:]
mode = "default"
if args[:1] == ["--mode"]:
    mode, args = args[1], args[2:]
cells: dict[tuple, dict[str, dict]] = defaultdict(dict)
for path in args:
    for line in open(path):
        r = json.loads(line)
        if r["policy"] != "bound" and r.get("mode", "default") != mode:
            continue
        key = (r["setting"], r["nodes"], r["scenario"], r["arrival"], r["seed"])
        if r["policy"] == "bound":          # bounds.py rows
            BOUND[key] = r["total_cost"]
        else:
            cells[key][r["policy"]] = r
policies = ("greedy", "rg", "pr", "horizon")
print("| setting | N | sc | arrival | seed | " + " | ".join(policies) + " | bound | "
      + " | ".join(f"{p} / greedy" for p in policies[1:]) + " | "
      + " | ".join(f"{p} / bound" for p in policies) + " | best / greedy | best / bound |")
print("|" + "---|" * (6 + 2 * len(policies) + len(policies) - 1 + 2))
for key in sorted(cells):
    c, b = cells[key], BOUND.get(key)
    if key[0] == "op" and "greedy" in c and mode == "default":    # rg = pr = greedy there
        c = {"rg": c["greedy"], "pr": c["greedy"], **c}
    cost = {p: c[p]["total_cost"] for p in policies if p in c}
    g = cost.get("greedy")
    best = min(cost.values()) if cost else None
    fmt = lambda x: f"{x:,.2f}".replace(",", " ") if x is not None else "–"  # noqa: E731
    ratio = lambda x, y: f"{x / y:.4f}" if x is not None and y else "–"  # noqa: E731
    print("| " + " | ".join([
        "on premise" if key[0] == "op" else "cloud", str(key[1]),
        str(key[2]) if key[0] == "op" else "–", key[3], str(key[4]),
        *(fmt(cost.get(p)) + (f" ({c[p]['late_jobs']})" if p in c else "") for p in policies),
        fmt(b), *(ratio(cost.get(p), g) for p in policies[1:]),
        *(ratio(cost.get(p), b) for p in policies), ratio(best, g), ratio(best, b)]) + " |")
