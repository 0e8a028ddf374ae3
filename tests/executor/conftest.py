"""Fixtures of the executor tests: a real dockerd and the busybox test image.

The daemon and image fixtures are the real-container tests' own
(``tests/agents_docker/conftest.py``): without ``DOCKER_HOST`` and
``ANDREAS_TEST_DOCKER_IMAGE`` these tests FAIL, never skip. The private test daemon has
no bridge, so containers run with ``network = "none"``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import docker
import docker.errors
import pytest

from andreas.config import ExecutorSettings
from andreas.executor.base import NodeRef, StartRequest
from andreas.executor.docker import DockerExecutor
from andreas.job import LABEL_JOB
from andreas.store import Store, migrate, open_store
from tests.agents_docker.conftest import (docker_client, image,  # noqa: F401
                                          run_container)


@pytest.fixture
def settings(tmp_path: Path) -> ExecutorSettings:
    root = tmp_path / "checkpoints"
    root.mkdir()
    return ExecutorSettings(checkpoint_root=str(root), network="none", stop_grace_s=5.0,
                            docker_timeout_s=10.0)


@pytest.fixture
def node(docker_client: docker.DockerClient) -> NodeRef:
    return NodeRef(name="local", docker_endpoint=os.environ["DOCKER_HOST"])


@pytest.fixture
def executor(settings: ExecutorSettings) -> Iterator[DockerExecutor]:
    ex = DockerExecutor(settings)
    try:
        yield ex
    finally:
        ex.close()


@pytest.fixture
def new_job(docker_client: docker.DockerClient) -> Iterator[Callable[[], str]]:
    """``new_job()``: a unique job id; its containers are removed at teardown."""
    made: list[str] = []

    def make() -> str:
        made.append(f"ex-{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield make
    for job_id in made:
        for c in docker_client.containers.list(all=True,
                                               filters={"label": f"{LABEL_JOB}={job_id}"}):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass


@pytest.fixture
def request_for(image: str) -> Callable[..., StartRequest]:
    """``request_for(job_id, script, **fields)``: a StartRequest running ``sh -c script``
    in the test image on two fake GPUs."""

    def make(job_id: str, script: str, **fields) -> StartRequest:
        base = StartRequest(job_id=job_id, attempt=1, image=image,
                            command=("sh", "-c", script), env={"LR": "0.1"}, epochs=7,
                            gpu_uuids=("GPU-fake-local-0", "GPU-fake-local-1"),
                            fake_gpus=True, restart_count=0)
        return replace(base, **fields)

    return make


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store (the manager tests here are about the executor, not the
    backend)."""
    url = migrate.upgrade_url(f"sqlite:///{tmp_path / 'andreas.db'}")
    store = open_store(url)
    try:
        yield store
    finally:
        store.dispose()
