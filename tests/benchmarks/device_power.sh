#!/usr/bin/env bash
# GPU power limits on a real GPU (issue 30): train a real model (PyTorch) at several
# power limits through NVML, record epoch time, the energy counter and the limit read
# back, compare with andreas' fit; a refused limit is recorded as such. Restores the
# default limit at the end. Prepared for the device machine (needs root to set limits):
#   bash tests/benchmarks/device_power.sh            # results under $OUT (or out/device-power)
#   bash tests/benchmarks/device_power.sh --fake     # the plumbing on the fake NVML, no GPU
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/device-power}
mkdir -p "$OUT"
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
nvidia-smi -q -d POWER > "$OUT/nvidia-smi-power-before.txt" 2>&1 || true
status=0
timeout 420 "$PY" tests/benchmarks/device_power.py --out "$OUT/device-power.json" "$@" \
    2>&1 | tee "$OUT/device-power.log" || status=$?
nvidia-smi -q -d POWER > "$OUT/nvidia-smi-power-after.txt" 2>&1 || true
exit "$status"
