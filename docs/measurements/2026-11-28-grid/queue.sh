#!/bin/bash
# The grid of 2026-11-28, one process at a time (nice 10), each command under 15 min;
# rows are appended as each (trace, policy) ends, so a stop keeps what finished.
# Run from this folder: bash queue.sh > queue.log 2>&1
set -u
H=../2026-11-27-longrun/horizon
PY=${PY:-../../../.venv/bin/python}
run() { echo "## $(date -u +%H:%M:%S) $*"; nice -n 10 timeout 900 "$PY" "$@"; echo "## rc $?"; }
# 1. N = 10, default mode, seed 2 (scenario 1 high, scenario 2, cloud): greedy, bounds
run $H/run-traces.py default.jsonl greedy op:10:1:high:2 op:10:2:exponential:2 \
    op:10:2:mixed:2 op:10:2:high:2 cloud:10:1:exponential:2 cloud:10:1:mixed:2 cloud:10:1:high:2
run $H/bounds.py bounds.jsonl op:10:1:high:2 op:10:2:exponential:2 op:10:2:mixed:2 \
    op:10:2:high:2 cloud:10:1:exponential:2 cloud:10:1:mixed:2 cloud:10:1:high:2
run $H/run-traces.py default.jsonl rg,pr cloud:10:1:exponential:2 cloud:10:1:mixed:2 \
    cloud:10:1:high:2
# 2. the papers' mode, N = 10 seed 1
run $H/run-traces.py paper.jsonl greedy,rg,pr op:10:1:exponential:1:paper \
    cloud:10:1:exponential:1:paper cloud:10:1:mixed:1:paper op:10:1:mixed:1:paper \
    op:10:2:exponential:1:paper cloud:10:1:high:1:paper op:10:2:mixed:1:paper \
    op:10:1:high:1:paper op:10:2:high:1:paper
# 3. N = 20, default mode, seed 1: greedy and bounds of the cells not run
run $H/run-traces.py default.jsonl greedy op:20:1:high:1 op:20:2:mixed:1 op:20:2:high:1 \
    cloud:20:1:exponential:1 cloud:20:1:mixed:1 cloud:20:1:high:1
run $H/bounds.py bounds.jsonl op:20:2:mixed:1 op:20:2:high:1
# 4. N = 50, default mode, seed 1, on premise (rg = pr = greedy there)
run $H/run-traces.py default.jsonl greedy op:50:1:exponential:1 op:50:1:mixed:1
run $H/bounds.py bounds.jsonl op:50:1:exponential:1 op:50:1:mixed:1
# 5. cloud N = 20 search policies, horizon where it finishes
run $H/run-traces.py default.jsonl rg,pr cloud:20:1:exponential:1 cloud:20:1:mixed:1
run $H/run-traces.py default.jsonl horizon op:10:2:exponential:2 op:10:1:high:2
run $H/bounds.py bounds.jsonl cloud:20:1:exponential:1 cloud:20:1:mixed:1 cloud:20:1:high:1
echo "## $(date -u +%H:%M:%S) done"
