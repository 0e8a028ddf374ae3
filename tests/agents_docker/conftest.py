"""Fixtures of the tests that run real containers.

``scripts/test.sh`` provides the daemon and the image: it exports ``DOCKER_HOST`` (an
answering daemon, a private dockerd when the machine has none running) and
``ANDREAS_TEST_DOCKER_IMAGE`` (a busybox image made with ``docker import``). Without
them these tests FAIL, never skip: a skipped Docker test would hide that epoch tracking
was not checked against a real daemon.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import docker
import docker.errors
import pytest

IMAGE_ENV = "ANDREAS_TEST_DOCKER_IMAGE"
DEFAULT_IMAGE = "andreas-test/busybox:latest"
TEST_LABEL = "andreas.test"


def _fail(message: str) -> None:
    ci = " (CI=true: the test command must provide it)" if os.environ.get("CI") else ""
    pytest.fail(f"{message}{ci}; run `bash scripts/test.sh`, which starts a private dockerd "
                "and builds the test image", pytrace=False)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    host = os.environ.get("DOCKER_HOST")
    if not host:
        _fail("DOCKER_HOST is not set: the epoch tracking tests need a Docker daemon")
    try:
        client = docker.DockerClient(base_url=host, version="auto")
        client.ping()
    except Exception as e:  # noqa: BLE001
        _fail(f"the Docker daemon at {host} does not answer: {e}")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def image(docker_client: docker.DockerClient) -> str:
    name = os.environ.get(IMAGE_ENV, DEFAULT_IMAGE)
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        _fail(f"the test image {name} ({IMAGE_ENV}) is missing")
    return name


@pytest.fixture
def run_container(docker_client: docker.DockerClient,
                  image: str) -> Iterator[Callable[..., Any]]:
    """``run_container(script, labels=..., env=...)``: a detached busybox container
    running ``sh -c script`` with no network; removed (with its log) at teardown."""
    tag = uuid.uuid4().hex

    def run(script: str, *, labels: dict[str, str] | None = None,
            env: dict[str, str] | None = None) -> Any:
        container = docker_client.containers.run(
            image, ["sh", "-c", script], detach=True, network_mode="none",
            labels={**(labels or {}), TEST_LABEL: tag}, environment=env or {})
        return container

    yield run
    mine = {"label": f"{TEST_LABEL}={tag}"}
    for container in docker_client.containers.list(all=True, filters=mine):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
