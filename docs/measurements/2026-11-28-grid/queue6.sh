#!/bin/bash
# The papers' mode at N = 20 (seed 1), the remaining on-premise N = 50 cells (greedy;
# rg and pr keep greedy's plan there) and the cloud at N = 50 (exponential first).
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 900 "$PY" "$@"; echo "## rc $?"; }
run $H/run-traces.py paper.jsonl greedy,rg,pr op:20:1:exponential:1:paper \
    op:20:1:mixed:1:paper op:20:2:exponential:1:paper op:20:2:mixed:1:paper \
    cloud:20:1:exponential:1:paper cloud:20:1:mixed:1:paper
run $H/run-traces.py default.jsonl greedy op:50:2:mixed:1 op:50:2:high:1
run $H/bounds.py bounds.jsonl op:50:2:mixed:1 op:50:2:high:1
run $H/run-traces.py default.jsonl greedy,rg,pr cloud:50:1:exponential:1
run $H/run-traces.py paper.jsonl greedy,rg,pr op:20:1:high:1:paper op:20:2:high:1:paper \
    cloud:20:1:high:1:paper
run $H/run-traces.py default.jsonl greedy,rg,pr cloud:50:1:mixed:1
echo "## $(date -u +%H:%M:%S) done"
