#!/bin/bash
# After queue.sh (stopped before its cloud N = 20 capacity LPs): horizon on the cells it
# missed, two more N = 50 cells. Run from this folder: bash queue2.sh > queue2.log 2>&1
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 900 "$PY" "$@"; echo "## rc $?"; }
run $H/run-traces.py default.jsonl horizon op:20:2:mixed:1
run $H/run-traces.py default.jsonl greedy op:50:2:exponential:1 op:50:1:high:1
run $H/bounds.py bounds.jsonl op:50:2:exponential:1 op:50:1:high:1
run $H/run-traces.py default.jsonl horizon op:10:2:mixed:2 op:20:2:high:1
echo "## $(date -u +%H:%M:%S) done"
