#!/usr/bin/env bash
# Sets up andreas in .venv and runs every optimizer policy on the embedded example
# snapshot (10 nodes, 40 jobs): the full plan of ANDREAS' randomized greedy, then all
# policies side by side. Usage: bash scripts/demo.sh [snapshot.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
SNAPSHOT=${1:-examples/example-snapshot-n10.json}

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

# --- Every policy on the same snapshot --------------------------------------------------
# Each plan is scored on both proxies by andreas.costs.evaluate: f_obj (minimised by
# greedy, rg and the baselines; lower is better) and f_bar (maximised by pr).
echo
echo "== andreas compare $SNAPSHOT --seed 0"
"$ANDREAS" compare "$SNAPSHOT" --seed 0
