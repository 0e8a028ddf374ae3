"""Restart overhead of the example job: process start -> first epoch start after a resume."""
import os, subprocess, sys, time, tempfile, statistics, json
here = "/work/wt/brain"
out = []
for trial in range(7):
    d = tempfile.mkdtemp(dir="/tmp/brain/ovh")
    env = dict(os.environ, ANDREAS_JOB_ID="ovh", ANDREAS_CHECKPOINT_DIR=d, ANDREAS_EPOCHS="2",
               EXAMPLE_STEPS="200", PYTHONPATH=here, ANDREAS_RESTART_COUNT="0")
    subprocess.run([sys.executable, f"{here}/examples/train/train.py"], env=env, check=True,
                   capture_output=True)
    env.update(ANDREAS_EPOCHS="3", ANDREAS_RESTART_COUNT="1")
    t0 = time.time()
    p = subprocess.Popen([sys.executable, f"{here}/examples/train/train.py"], env=env,
                         stdout=subprocess.PIPE, text=True)
    start = None
    for line in p.stdout:
        if "epoch=3" in line and "event=start" in line:
            start = time.time() - t0
            # the line's own t= field
            t_line = float(line.split(" t=")[1].split()[0])
            p.stdout.read(); break
    p.wait()
    out.append({"resume_to_epoch_start_s": start, "by_line_s": t_line - t0})
print(json.dumps(out))
print("median", statistics.median(o["resume_to_epoch_start_s"] for o in out),
      "max", max(o["resume_to_epoch_start_s"] for o in out))
