"""examples/train/train.py as a plain process: the job contract end to end (progress
lines, checkpoints with the manifest, SIGTERM -> 143 keeping the last complete epoch,
resume on restart) and an epoch history that shows every epoch exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from andreas import job
from tests.examples.conftest import (HISTORY_PY, TRAIN_PY, Running, epochs_of, job_env,
                                     load_train)

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop


def _events(stdout: str) -> list[job.ProgressEvent]:
    return [ev for ev in map(job.parse_progress, stdout.splitlines()) if ev is not None]


def test_three_epochs_report_checkpoint_and_learn(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    env = job_env(ckpt, 3, job_id="ex-three")
    done = subprocess.run([sys.executable, str(TRAIN_PY)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    events = _events(done.stdout)
    assert [(e.epoch, e.event) for e in events] == [
        (1, "start"), (1, "end"), (2, "start"), (2, "end"), (3, "start"), (3, "end")]
    assert all(e.job_id == "ex-three" and e.of == 3 for e in events)
    losses = [e.metrics["loss"] for e in events if e.is_end]
    assert losses[0] > losses[1] > losses[2], losses
    assert all(e.metrics["steps"] >= 1 for e in events if e.is_end)

    manifest = job.read_manifest(ckpt)
    assert manifest is not None and manifest.epoch == 3
    assert manifest.path.name == "epoch-000003.npz"
    history = load_train().read_history(ckpt)
    assert epochs_of(history) == [1, 2, 3]
    assert [h["restart_count"] for h in history] == [0, 0, 0]
    ends = [e.t for e in events if e.is_end]
    assert all(e0 >= h["t"] >= s0 for h, s0, e0 in
               zip(history, [e.t for e in events if e.is_start], ends))

    printed = subprocess.run([sys.executable, str(HISTORY_PY), "--json", str(ckpt)],
                             env=env, capture_output=True, text=True, timeout=60, check=True)
    assert '"epoch": 3' in printed.stdout

    again = subprocess.run([sys.executable, str(TRAIN_PY)], env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and _events(again.stdout) == []   # nothing left to do


def test_sigterm_keeps_last_complete_epoch_and_restart_finishes(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    first = Running(job_env(ckpt, 5, 0, epoch_s=1.0, job_id="ex-stop"), tmp_path / "err0")
    try:
        first.wait_for(2, "end")
        first.wait_for(3, "start")
        time.sleep(0.2)                                 # well inside epoch 3 (1 s)
        signalled = time.monotonic()
        first.proc.send_signal(signal.SIGTERM)
        rc = first.finish(timeout=10)
        stopped_in = time.monotonic() - signalled
    finally:
        first.kill()
    assert rc == job.EXIT_PREEMPTED == 143
    assert stopped_in < 2.0, stopped_in
    assert not any((ev := job.parse_progress(line)) and ev.epoch == 3 and ev.is_end
                   for line in first.lines)
    assert "stopped during epoch 3" in (tmp_path / "err0").read_text()
    manifest = job.read_manifest(ckpt)
    assert manifest is not None and manifest.epoch == 2
    assert job.latest_checkpoint(ckpt).epoch == 2          # the partial epoch left nothing

    second = subprocess.run([sys.executable, str(TRAIN_PY)],
                            env=job_env(ckpt, 5, 1, job_id="ex-stop"),
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    events = _events(second.stdout)
    assert [(e.epoch, e.event) for e in events][0] == (3, "start")
    assert [e.epoch for e in events if e.is_end] == [3, 4, 5]
    history = load_train().read_history(ckpt)
    assert epochs_of(history) == [1, 2, 3, 4, 5]
    assert [h["restart_count"] for h in history] == [0, 0, 1, 1, 1]
    times = [h["t"] for h in history]
    assert times == sorted(times)
    assert job.read_manifest(ckpt).epoch == 5


def test_jobs_marking_the_same_fake_gpu_slow_each_other_down(tmp_path, monkeypatch):
    from tests.examples.conftest import load_train
    train = load_train()
    monkeypatch.setenv("ANDREAS_FAKE_GPU_DIR", str(tmp_path))
    monkeypatch.setenv("ANDREAS_FAKE_GPUS", "GPU-fake-n-0")
    a = train.FakeContention("a", 0.5, window_s=10.0)
    b = train.FakeContention("b", 0.5, window_s=10.0)
    assert a.factor() == 1.0                 # alone so far
    assert b.factor() == 1.5 and a.factor() == 1.5
    monkeypatch.setenv("ANDREAS_FAKE_GPUS", "GPU-fake-n-1")
    assert train.FakeContention("c", 0.5, window_s=10.0).factor() == 1.0   # another GPU
    b.leave()
    assert a.factor() == 1.0
    assert train.FakeContention("d", 0.0, window_s=10.0).factor() == 1.0   # no contention
