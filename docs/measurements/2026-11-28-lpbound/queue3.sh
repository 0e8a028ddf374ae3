#!/bin/bash
# After queue2.sh, while time was left: the cloud cells whose bound was the per-job one
# (the capacity LP with its cuts may now exceed it) and cloud N = 20 high.
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 600 "$PY" "$@"; echo "## rc $?"; }
for cell in cloud:10:1:mixed:1 cloud:10:1:exponential:1 cloud:20:1:high:1; do
  run $H/bounds.py bounds.jsonl $cell
done
echo "## $(date -u +%H:%M:%S) done"
