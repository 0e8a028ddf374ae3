"""python summary.py ROWS.jsonl...: per margin, the bill against no margin over every
(cell, policy): geometric mean, least and largest ratio, and how many got dearer."""
import collections
import json
import math
import sys

rows = [json.loads(line) for path in sys.argv[1:] for line in open(path)]
key = lambda r: (r["setting"], r["nodes"], r["arrival"], r["seed"], r["mode"], r["policy"])  # noqa: E731
base = {key(r): r["total_cost"] for r in rows if r["variant"] in ("m-", "m0")}
by = collections.defaultdict(list)
for r in rows:
    if r["variant"] not in ("m-", "m0") and key(r) in base:
        by[(r["arrival"], r["variant"])].append(r["total_cost"] / base[key(r)])
        by[("all", r["variant"])].append(r["total_cost"] / base[key(r)])
print("| arrivals | margin | runs | geometric mean | least | largest | dearer |")
print("|---|---|---|---|---|---|---|")
for (arrival, variant), v in sorted(by.items()):
    g = math.exp(sum(map(math.log, v)) / len(v))
    print(f"| {arrival} | {variant[1:]} | {len(v)} | {g:.4f} | {min(v):.4f} | {max(v):.4f} "
          f"| {sum(x > 1 for x in v)} |")
