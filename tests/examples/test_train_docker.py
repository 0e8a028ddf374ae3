"""The example image (scripts/build-example-image.sh, host-runtime mode) in a real
container: the job contract through Docker, including `docker stop` -> exit 143 and a
resumed second container, the way the manager preempts and moves a job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from andreas import job
from tests.examples.conftest import CONTAINER_CHECKPOINT, epochs_of, job_env, load_train


def _env(epochs: int, restart: int, epoch_s: float, job_id: str) -> dict[str, str]:
    env = job_env(CONTAINER_CHECKPOINT, epochs, restart, epoch_s=epoch_s, job_id=job_id)
    return {k: v for k, v in env.items()
            if k.startswith("ANDREAS_")}                    # not the host's PATH etc.


def _events(container: Any) -> list[job.ProgressEvent]:
    logs = container.logs(stdout=True, stderr=True).decode("utf-8", errors="replace")
    return [ev for ev in map(job.parse_progress, logs.splitlines()) if ev is not None]


def test_container_runs_two_epochs(tmp_path: Path, run_example: Any) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    container = run_example(ckpt, _env(2, 0, 0.2, "ex-docker"))
    status = container.wait(timeout=120)
    logs = container.logs().decode("utf-8", errors="replace")
    assert status["StatusCode"] == 0, logs
    events = _events(container)
    assert [(e.epoch, e.event) for e in events] == [
        (1, "start"), (1, "end"), (2, "start"), (2, "end")], logs
    assert all(e.job_id == "ex-docker" and e.of == 2 for e in events)
    assert epochs_of(load_train().read_history(ckpt)) == [1, 2]
    assert job.read_manifest(ckpt).epoch == 2


def test_docker_stop_exits_143_and_next_container_resumes(tmp_path: Path,
                                                          run_example: Any) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    container = run_example(ckpt, _env(50, 0, 1.0, "ex-preempt"))
    deadline = time.monotonic() + 60
    while not any(e.epoch == 2 and e.is_start for e in _events(container)):
        assert time.monotonic() < deadline, container.logs().decode()
        time.sleep(0.1)
    time.sleep(0.2)                                         # inside epoch 2 (1 s)
    signalled = time.monotonic()
    container.stop(timeout=10)                              # SIGTERM, SIGKILL after 10 s
    stopped_in = time.monotonic() - signalled
    container.reload()
    assert container.attrs["State"]["ExitCode"] == 143, container.logs().decode()
    assert stopped_in < 5.0, stopped_in                     # not the 10 s SIGKILL
    done = [e.epoch for e in _events(container) if e.is_end]
    kept = job.read_manifest(ckpt)
    assert kept is not None and kept.epoch == done[-1] >= 1

    target = kept.epoch + 1
    resumed = run_example(ckpt, _env(target, 1, 0.2, "ex-preempt"))
    assert resumed.wait(timeout=120)["StatusCode"] == 0, resumed.logs().decode()
    assert [(e.epoch, e.event) for e in _events(resumed)] == [(target, "start"),
                                                              (target, "end")]
    history = load_train().read_history(ckpt)
    assert epochs_of(history) == list(range(1, target + 1))
    assert [h["restart_count"] for h in history] == [0] * kept.epoch + [1]
