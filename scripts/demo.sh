#!/usr/bin/env bash
# The README's first command: sets up andreas in .venv and shows what it saves.
# It simulates the embedded 10-node, 100-job workload (examples/example-exp-n10.json)
# under FIFO, EDF, priority, greedy, ANDREAS' randomized greedy (rg) and path relinking
# (pr), prints the cost table and the percentage reductions, and writes CSV, JSON and PNG
# plots to out/demo/. Then it shows one rescheduling decision in detail.
# Usage: bash scripts/demo.sh [trace.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
TRACE=${1:-examples/example-exp-n10.json}

# --- Python environment --------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv"
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q -e .
ANDREAS=.venv/bin/andreas

# --- A whole workload under every policy ---------------------------------------------------
echo "== andreas simulate --trace $TRACE --out out/demo"
"$ANDREAS" simulate --trace "$TRACE" --out out/demo

# --- One rescheduling point in detail ------------------------------------------------------
echo
echo "== andreas compare examples/example-snapshot-n10.json (one rescheduling point)"
"$ANDREAS" compare examples/example-snapshot-n10.json --seed 0
echo
echo "Plots: out/demo/cost.png, out/demo/cumulative-cost.png, out/demo/occupancy-*.png"
