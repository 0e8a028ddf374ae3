#!/bin/bash
# After queue.sh (its N = 20 group ran out of its 1 200 s at op:20:2:high:1, and the
# N = 50 group was stopped so that the overloaded cells, the ones the cuts move, go
# first): one cell per process, each within 1 500 s.
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 1500 "$PY" "$@"; echo "## rc $?"; }
for cell in op:20:2:high:1 op:50:2:mixed:1 op:50:1:high:1 op:50:2:high:1 \
    op:50:1:exponential:1 op:50:1:mixed:1 op:50:2:exponential:1 cloud:10:1:high:1 \
    cloud:10:1:high:2; do
  run $H/bounds.py bounds.jsonl $cell
done
echo "## $(date -u +%H:%M:%S) done"
