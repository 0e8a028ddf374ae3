#!/bin/bash
# The bound of every grid cell whose bills docs/measurements/2026-11-28-grid holds,
# re-solved with the LP's cuts (one process, one cell at a time), smallest first.
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 1200 "$PY" "$@"; echo "## rc $?"; }
OP10=""
for seed in 1 2; do for sc in 1 2; do for a in exponential mixed high; do
  OP10="$OP10 op:10:$sc:$a:$seed"; done; done; done
run $H/bounds.py bounds.jsonl $OP10
run $H/bounds.py bounds.jsonl op:20:1:exponential:1 op:20:1:exponential:2 op:20:1:mixed:1 \
    op:20:2:exponential:1 op:20:2:mixed:1 op:20:1:high:1 op:20:2:high:1
run $H/bounds.py bounds.jsonl op:50:1:exponential:1 op:50:1:mixed:1 op:50:2:exponential:1 \
    op:50:2:mixed:1 op:50:1:high:1 op:50:2:high:1
run $H/bounds.py bounds.jsonl cloud:10:1:high:1 cloud:10:1:high:2 cloud:10:1:exponential:1 \
    cloud:10:1:mixed:1 cloud:10:1:exponential:2 cloud:10:1:mixed:2 cloud:20:1:high:1
echo "## $(date -u +%H:%M:%S) done"
