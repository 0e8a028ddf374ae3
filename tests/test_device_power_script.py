"""The prepared real-GPU power-limit check (tests/benchmarks/device_power.sh) runs end to
end on the fake NVML: every limit set and read back, the default restored, the fit
compared (it has not run on hardware here: see docs/power-limits.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_device_power_script_on_the_fake_nvml(tmp_path):
    out = tmp_path / "device.json"
    p = subprocess.run([sys.executable, str(ROOT / "tests/benchmarks/device_power.py"),
                        "--fake", "--levels", "3", "--epochs", "2", "--steps", "100",
                        "--out", str(out)], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["fake"] is True and doc["gpu"]["min_w"] == 100.0
    assert [r["read_back_w"] for r in doc["rows"]] == [250.0, 225.0, 200.0]
    # energy counter over wall-clock windows of ~0.07 s: within 1 % of the cap, never
    # the uncapped draw (the fake caps power at the limit read back)
    assert all(r["power_w"] <= r["read_back_w"] * 1.01 for r in doc["rows"])
    assert doc["restored_w"] == 250.0
    assert [c["limit_w"] for c in doc["comparison"]] == [225.0, 200.0]
