"""Restart overhead of the example job: process start -> its next epoch's start line after
a resume from its checkpoint (run from the repository root)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

here = os.getcwd()
out = []
for _ in range(7):
    d = tempfile.mkdtemp()
    env = dict(os.environ, ANDREAS_JOB_ID="ovh", ANDREAS_CHECKPOINT_DIR=d, ANDREAS_EPOCHS="2",
               EXAMPLE_STEPS="200", PYTHONPATH=here, ANDREAS_RESTART_COUNT="0")
    subprocess.run([sys.executable, f"{here}/examples/train/train.py"], env=env, check=True,
                   capture_output=True)
    env.update(ANDREAS_EPOCHS="3", ANDREAS_RESTART_COUNT="1")
    t0 = time.time()
    p = subprocess.Popen([sys.executable, f"{here}/examples/train/train.py"], env=env,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    for line in p.stdout:
        if "epoch=3" in line and "event=start" in line:
            out.append(time.time() - t0)
            p.stdout.read()
            break
    p.wait()
print(json.dumps(out))
print("median", statistics.median(out), "max", max(out), "min", min(out))
