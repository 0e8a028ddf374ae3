#!/bin/bash
# After queue2.sh: the bound of the cloud N = 20 high cell (its capacity LP), as time allows.
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 900 "$PY" "$@"; echo "## rc $?"; }
run $H/bounds.py bounds.jsonl cloud:20:1:high:1
echo "## $(date -u +%H:%M:%S) done"
