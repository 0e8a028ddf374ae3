#!/bin/bash
# The papers' mode on the on-premise seed 2 cells (N = 10) and cloud high seed 2.
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 480 "$PY" "$@"; echo "## rc $?"; }
run $H/run-traces.py paper.jsonl greedy,rg,pr op:10:1:exponential:2:paper \
    op:10:1:mixed:2:paper op:10:2:exponential:2:paper op:10:2:mixed:2:paper \
    op:10:1:high:2:paper op:10:2:high:2:paper cloud:10:1:high:2:paper
echo "## $(date -u +%H:%M:%S) done"
