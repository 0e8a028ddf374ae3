#!/bin/bash
# The last minutes: rg and pr on cloud N = 20 high, then the papers' mode on cloud seed 2.
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 600 "$PY" "$@"; echo "## rc $?"; }
run $H/run-traces.py default.jsonl rg,pr cloud:20:1:high:1
run $H/run-traces.py paper.jsonl greedy,rg,pr cloud:10:1:exponential:2:paper \
    cloud:10:1:mixed:2:paper
echo "## $(date -u +%H:%M:%S) done"
