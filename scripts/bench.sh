#!/usr/bin/env bash
# Runs the optimizer benchmark (left out of scripts/test.sh): 100 nodes, 50/200/450 jobs,
# both ANDREAS scenarios; prints times, ratios to greedy measured in the same run, and
# objectives; writes out/bench_optimizer.json. Extra arguments go to the benchmark
# (see --help). Sets up .venv like scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
.venv/bin/python -m pip install -q -e '.[test]'
exec .venv/bin/python tests/benchmarks/bench_optimizer.py --json out/bench_optimizer.json "$@"
