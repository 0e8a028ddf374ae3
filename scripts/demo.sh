#!/usr/bin/env bash
# Sets up andreas in .venv and runs every optimizer policy on the embedded example
# snapshot (10 nodes, 40 jobs): the full table for ANDREAS' randomized greedy, then one
# comparison line per policy. Usage: bash scripts/demo.sh [snapshot.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
SNAPSHOT=${1:-examples/example-snapshot-n10.json}
POLICIES=(greedy rg pr fifo edf priority)

# --- Python environment --------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv"
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q -e .
ANDREAS=.venv/bin/andreas

# --- One policy in full --------------------------------------------------------------
echo "== andreas optimize $SNAPSHOT --policy rg --seed 0"
"$ANDREAS" optimize "$SNAPSHOT" --policy rg --seed 0

# --- Every policy, one line each -----------------------------------------------------
# Each --json plan is re-scored with andreas.costs.evaluate so that all policies are
# compared on the same proxies: f_obj (minimised by greedy, rg and the baselines; lower is
# better) and f_bar (maximised by pr; higher is better), plus f_obj's parts.
SUMMARY=$(cat <<'PY'
import json, sys
from andreas.costs import evaluate
from andreas.model import Assignment, Plan
from andreas.snapshot import load_snapshot

policy, path = sys.argv[1], sys.argv[2]
doc = json.load(sys.stdin)
plan = Plan(policy=policy, objective=0.0, objective_name="",
            assignments=tuple(Assignment(job=a["job"], node=a["node"], gpus=a["gpus"])
                              for a in doc["assignments"]),
            postponed=tuple(doc["postponed"]), node_configs=doc.get("node_configs", {}))
ev = evaluate(load_snapshot(path), plan)
print(f"{policy:<9} {ev.f_obj:>12.2f} {ev.f_bar:>12.1f} {ev.tardiness_cost:>11.2f} "
      f"{ev.postponement_cost:>12.2f} {ev.node_cost:>8.3f} {len(plan.assignments):>5} "
      f"{len(plan.postponed):>5} {doc['seconds'] * 1000:>9.1f}")
PY
)
echo
echo "== every policy on $SNAPSHOT (seed 0), scored by andreas.costs.evaluate"
printf '%-9s %12s %12s %11s %12s %8s %5s %5s %9s\n' policy f_obj f_bar tardiness postponement energy run wait ms
for policy in "${POLICIES[@]}"; do
    "$ANDREAS" optimize "$SNAPSHOT" --policy "$policy" --seed 0 --json \
        | .venv/bin/python -c "$SUMMARY" "$policy" "$SNAPSHOT"
done
