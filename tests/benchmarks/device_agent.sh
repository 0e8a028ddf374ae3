#!/usr/bin/env bash
# The real agent daemon on a GPU machine for about 40 s against a SQLite store, while a
# PyTorch worker loads the GPU (idle 8 s, full 20 s, idle): what reaches the store
# (power_samples rows, energy source, summed energy) against the raw NVML counter read
# before and after. Then `andreas-agent --check`. Writes to $OUT (or ./out/device-agent).
#   DB=path/to/store.db  (a schema at head: `andreas db upgrade` on ANDREAS_DB_URL)
#   AGENT_ARGS="--fake-gpus 1xH100" to try it without a GPU (no load worker then).
set -euo pipefail
out=${OUT:-out/device-agent}
mkdir -p "$out"; out=$(cd "$out" && pwd)
db=${DB:?set DB to a SQLite store at schema head}
cp "$db" "$out/store.db"
export ANDREAS_DB_URL="sqlite:///$out/store.db" ANDREAS_SPOOL_DIR="$out/spool"
export ANDREAS_NODE_NAME=${ANDREAS_NODE_NAME:-device-node} PYTHONUNBUFFERED=1
agent() { exec python3 -c 'import sys; from andreas.entry import agent; sys.argv[0] = "andreas-agent"; agent()' "$@"; }
counter() { python3 -c 'import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); print(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))' 2>/dev/null || echo 0; }

c0=$(counter); t0=$(date +%s.%N)
(agent ${AGENT_ARGS:-} --log-level info >"$out/agent.log" 2>&1) &
pid=$!
if [ -z "${AGENT_ARGS:-}" ]; then
  sleep 8
  python3 -c '
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = a.clone()
end = time.monotonic() + 20
while time.monotonic() < end:
    for _ in range(20): c = a @ b
    torch.cuda.synchronize()
' &
  wait $!
  sleep 10
else
  sleep 20
fi
kill -TERM $pid; rc=0; wait $pid || rc=$?
c1=$(counter); t1=$(date +%s.%N)
echo "agent exit code after SIGTERM: $rc"
tail -n 15 "$out/agent.log"
python3 - "$out/store.db" "$c0" "$c1" "$t0" "$t1" <<'EOF'
import sqlite3, sys
db, c0, c1, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
con = sqlite3.connect(db)
print("nodes:", con.execute("select name, gpu_type, gpu_count, state from nodes").fetchall())
print("gpus:", con.execute("select uuid, model, memory_mib, power_limit_w, has_energy_counter from gpus").fetchall())
n, e, ps, es, tmin, tmax, pmax = con.execute(
    "select count(*), sum(energy_mj), group_concat(distinct power_source), "
    "group_concat(distinct energy_source), min(t), max(t), max(power_w) from power_samples").fetchone()
print(f"power_samples: {n} rows over {(tmax or 0) - (tmin or 0):.1f} s, power {ps}, energy {es}, "
      f"max {pmax} W, energy {(e or 0) / 1000:.1f} J")
if c1 > c0:
    print(f"raw NVML counter over the agent's whole life ({t1 - t0:.1f} s): {(c1 - c0) / 1000:.1f} J; "
          f"stored / raw = {(e or 0) / (c1 - c0):.4f} (the stored rows miss the first interval "
          "and the time before the first and after the last sample)")
print("host_samples:", con.execute("select count(*), group_concat(distinct power_source) from host_samples").fetchone())
EOF
(agent --check) 2>&1 | tee "$out/check.txt" || true
