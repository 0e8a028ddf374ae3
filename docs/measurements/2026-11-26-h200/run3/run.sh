#!/usr/bin/env bash
# Device checks of DEVELOPERS.md, one run: NVML sampler (bench_nvml.py), the real agent
# daemon against SQLite (device_agent.sh), call costs, and whether a Docker engine is here.
export PYTHONUNBUFFERED=1
echo "== machine"; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,power.limit,power.draw --format=csv
uname -r; python3 -c 'import pynvml, torch; print("torch", torch.__version__)'
echo "== docker"; command -v docker dockerd containerd nvidia-container-runtime || echo "no docker binaries"; ls -la /var/run/docker.sock 2>&1
echo "== bench_nvml"; timeout 200 python3 tests/benchmarks/bench_nvml.py --json $OUT/bench_nvml.json 2>&1 | tee $OUT/bench_nvml.log
echo "== device_agent"; OUT=/tmp/agent DB=.devrun/store.db timeout 120 bash tests/benchmarks/device_agent.sh 2>&1 | tee $OUT/device_agent.txt
cp /tmp/agent/agent.log $OUT/agent.log 2>/dev/null
echo "== calls"; timeout 90 python3 tests/benchmarks/bench_nvml.py --calls-only --json $OUT/calls.json 2>&1 | tee $OUT/calls.log
echo "== done"
