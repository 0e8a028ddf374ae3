"""A profiling run against a real Docker daemon: busybox containers print ANDREAS-PROGRESS
lines (epoch times from an Amdahl law, derived from the g in the job id) with sleeps, on
fake GPUs; the profiler follows their logs through the Docker executor. Needs DOCKER_HOST
and ANDREAS_TEST_DOCKER_IMAGE (``scripts/docker-test-daemon.sh``): FAILS without them.
SQLite only: the store half is covered on both backends by test_run.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import docker
import numpy as np
import pytest
from sqlalchemy import select

from andreas.config import ExecutorSettings
from andreas.executor.docker import DockerExecutor
from andreas.job import LABEL_JOB
from andreas.profiler.run import ProfileRequest, profile_application
from andreas.store import AppModel, AppProfile, Job, JobState, Node, migrate, open_store
from andreas.store.engine import make_engine
from tests.agents_docker.conftest import docker_client, image  # noqa: F401  (fixtures)
from tests.manager.helpers import add_node

T1, S = 100.0, 0.2
SCRIPT = r"""
g=$(echo "$ANDREAS_JOB_ID" | sed 's/.*-g\([0-9]*\)-[0-9a-f]*$/\1/')
t=1800000000
e=1
echo "starting on $g GPUs"
while [ "$e" -le "$ANDREAS_EPOCHS" ]; do
  echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID epoch=$e of=$ANDREAS_EPOCHS event=start t=$t"
  sleep 0.2
  t=$(awk -v t="$t" -v g="$g" -v e="$e" 'BEGIN { d = %(t1)s * (%(s)s + (1 - %(s)s) / g);
      if (e == 1) d = d * 1.5; printf "%%.3f", t + d }')
  echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID epoch=$e of=$ANDREAS_EPOCHS event=end t=$t loss=0.5"
  e=$((e + 1))
done
""" % {"t1": T1, "s": S}  # noqa: UP031 - a shell script full of braces


@pytest.fixture
def sqlite_store(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'andreas.db'}"
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine)
    engine.dispose()
    store = open_store(url)
    yield store
    store.dispose()


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[DockerExecutor]:
    root = tmp_path / "checkpoints"
    root.mkdir()
    ex = DockerExecutor(ExecutorSettings(checkpoint_root=str(root), network="none",
                                         stop_grace_s=5.0, docker_timeout_s=20.0))
    yield ex
    ex.close()


def _leftovers(client: docker.DockerClient) -> list:
    return [c for c in client.containers.list(all=True)
            if c.labels.get(LABEL_JOB, "").startswith("profile-dockerapp-")]


def test_profile_on_a_real_docker_daemon(sqlite_store, executor, docker_client,
                                         image):
    add_node(sqlite_store, "local", gpus=3)
    with sqlite_store.session() as s:
        s.get(Node, 1).docker_endpoint = os.environ["DOCKER_HOST"]
    try:
        [result] = profile_application(
            sqlite_store, executor,
            ProfileRequest(image=image, app="dockerapp", epochs=3, nodes=("local",),
                           timeout_s=60.0, command=("sh", "-c", SCRIPT)),
            clock=lambda: 1_800_000_100.0, rng=np.random.default_rng(3))
    finally:
        leftovers = _leftovers(docker_client)
        for c in leftovers:
            c.remove(force=True)
    assert leftovers == []                                   # the profiler removed them
    assert [(r.g, r.status) for r in result.runs] == [(1, "ok"), (2, "ok"), (3, "ok")], \
        [r.error for r in result.runs]
    for r in result.runs:
        expected = T1 * (S + (1 - S) / r.g)
        assert r.median_s == pytest.approx(expected, abs=0.002)
        assert r.epoch_s[0] == pytest.approx(1.5 * expected, abs=0.002)
    with sqlite_store.session() as s:
        assert not s.get(Node, 1).profiling                  # restored
        rows = dict(s.execute(select(AppProfile.gpus, AppProfile.source)
                              .where(AppProfile.application == "dockerapp")).all())
        model = s.get(AppModel, ("dockerapp", "V100"))
        jobs = {j.id: (j.state, j.weight, j.epochs_done, j.max_gpus)
                for j in s.scalars(select(Job))}
    assert jobs == {r.job_id: (JobState.COMPLETED, 0.0, 3, r.g) for r in result.runs}
    assert rows == {1: "profiler", 2: "profiler", 3: "profiler"}
    assert model.t1_s == pytest.approx(T1, rel=1e-3)
    assert model.serial_fraction == pytest.approx(S, abs=1e-3)
