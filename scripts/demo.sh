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
.venv/bin/python -m pip install -q -e '.[manager,agent,plots]'
ANDREAS=.venv/bin/andreas

# --- A whole workload under every policy ---------------------------------------------------
echo "== andreas simulate --trace $TRACE --out out/demo"
"$ANDREAS" simulate --trace "$TRACE" --out out/demo

# --- One rescheduling point in detail ------------------------------------------------------
echo
echo "== andreas compare examples/example-snapshot-n10.json (one rescheduling point)"
"$ANDREAS" compare examples/example-snapshot-n10.json --seed 0

# --- The Job Manager on a laptop: embedded SQLite, a fake-GPU node, a dry run ---------------
# Same loop as on a cluster (snapshot, policy, decision, actions), but no container is
# touched: the dry-run executor logs what it would do. Throw-away store under out/demo/.
echo
echo "== the Job Manager's dry run: SQLite store, one node with 2 fake V100s, three jobs"
CLUSTER=$PWD/out/demo/laptop
rm -rf "$CLUSTER"
mkdir -p "$CLUSTER"
printf '[agent]\nnode_name = "laptop-gpu"\ndocker_url = ""\ndocker_endpoint = "%s"\nfake_gpus = "2xV100"\n[spool]\npath = "%s"\n' \
    "unix:///var/run/docker.sock" "$CLUSTER/spool" >"$CLUSTER/agent.toml"
printf '[manager]\nseed = 0\n' >"$CLUSTER/andreas.toml"
export ANDREAS_DB_URL="sqlite:///$CLUSTER/andreas.db" ANDREAS_CONFIG="$CLUSTER/andreas.toml"
"$ANDREAS" db upgrade
.venv/bin/andreas-agent --config "$CLUSTER/agent.toml" --register
"$ANDREAS" submit ml/resnet50:1 --name resnet-a --epochs 30 --due +12h --weight 0.01
"$ANDREAS" submit ml/vgg19:1 --name vgg-b --epochs 20 --due +6h --weight 0.02
"$ANDREAS" submit ml/alexnet:1 --name alex-c --epochs 50 --due +2d --weight 0.001
"$ANDREAS" manager run --dry-run --once
"$ANDREAS" queue
echo
echo "Plots: out/demo/cost.png, out/demo/cumulative-cost.png, out/demo/occupancy-*.png"
