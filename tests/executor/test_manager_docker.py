"""The Job Manager with the Docker executor on a real dockerd: a job on a fake-GPU node
is started with the planned GPUs in its labels and completes; a cancelled one exits 143
on the manager's SIGTERM."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update

from andreas.config import ExecutorSettings, Settings
from andreas.executor.docker import DockerExecutor
from andreas.manager import Manager
from andreas.store import Job, JobState, Node, Store
from andreas.service.submit import cancel
from tests.manager.helpers import add_job, add_node, attempts, settings, state_of


@pytest.fixture
def manager(sqlite_store: Store, docker_client, image: str,
            tmp_path: Path) -> Iterator[tuple[Manager, Path, list[str]]]:
    root = tmp_path / "ckpt"
    root.mkdir()
    base = settings()
    s = Settings(db_url="sqlite://", db_url_source="test", manager=base.manager,
                 executor=ExecutorSettings(checkpoint_root=str(root), network="none",
                                           stop_grace_s=10.0))
    add_node(sqlite_store, "local", gpus=2)
    with sqlite_store.session() as ses:
        ses.execute(update(Node).where(Node.name == "local")
                    .values(docker_endpoint=os.environ["DOCKER_HOST"]))
    m = Manager(sqlite_store, DockerExecutor(s.executor), s, rng=np.random.default_rng(0))
    m.reconciler.observer.probe_backoff_s = 0.0
    made: list[str] = []
    try:
        yield m, root, made
    finally:
        m.close()
        for c in docker_client.containers.list(all=True, filters={"label": "andreas.job"}):
            if c.labels.get("andreas.job") in made:
                c.remove(force=True)


def tick_until(m: Manager, store: Store, job_id: str, state: JobState,
               timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while state_of(store, job_id) is not state:
        assert time.monotonic() < deadline, (f"job {job_id} is {state_of(store, job_id)}, "
                                             f"not {state.value}")
        m.tick()
        time.sleep(0.1)


def add(store: Store, made: list[str], image: str, script: str, **kw) -> str:
    job_id = f"mgr-{os.urandom(4).hex()}"
    made.append(job_id)
    add_job(store, job_id, image=image, **kw)
    with store.session() as s:
        s.execute(update(Job).where(Job.id == job_id).values(command=["sh", "-c", script]))
    return job_id


def test_manager_runs_a_job_to_completion(manager, sqlite_store, image, docker_client):
    m, root, made = manager
    job_id = add(sqlite_store, made, image, 'echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID '
                 'epoch=1 of=1 event=end t=1"; touch "$ANDREAS_CHECKPOINT_DIR/done"; exit 0',
                 epochs=1)
    m.start()
    (a,) = attempts(sqlite_store, job_id)
    assert a.container_id is not None
    c = docker_client.containers.get(a.container_id)
    assert c.labels["andreas.gpus"] == ",".join(f"GPU-fake-local-{i}" for i in a.gpu_ids)
    tick_until(m, sqlite_store, job_id, JobState.COMPLETED)
    (a,) = attempts(sqlite_store, job_id)
    assert a.exit_code == 0 and a.reason == "completed"
    assert (root / job_id / "done").exists()


def test_manager_stops_a_cancelled_job_with_sigterm(manager, sqlite_store, image):
    m, root, made = manager
    job_id = add(sqlite_store, made, image,
                 'echo "restart=$ANDREAS_RESTART_COUNT" >> "$ANDREAS_CHECKPOINT_DIR/log"; '
                 'trap "exit 143" TERM; while :; do sleep 0.1; done', grace_s=20.0)
    m.start()
    (first,) = attempts(sqlite_store, job_id)
    time.sleep(0.5)                            # the trap is installed
    cancel(sqlite_store, job_id, reason="test", now_s=time.time())
    deadline = time.monotonic() + 30
    while attempts(sqlite_store, job_id)[0].end_s is None:
        assert time.monotonic() < deadline, "the cancelled job's container did not stop"
        m.tick()
        time.sleep(0.1)
    (first,) = attempts(sqlite_store, job_id)
    assert first.exit_code == 143 and state_of(sqlite_store, job_id) is JobState.CANCELLED
    assert (root / job_id / "log").read_text() == "restart=0\n"
