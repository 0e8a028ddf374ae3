"""Helpers and fixtures for the example training job (examples/train).

The container tests need a Docker daemon on this machine (the checkpoint directory is a
bind mount of a local path): ``DOCKER_HOST`` must name one, as ``scripts/test.sh`` and
``scripts/docker-test-daemon.sh`` arrange. Without it they FAIL, never skip: a skipped
test would hide that the image was not checked in a real container.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

import docker
import docker.errors
import pytest

from andreas import job
from tests.agents_docker.conftest import docker_client  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]
TRAIN_DIR = REPO / "examples" / "train"
TRAIN_PY = TRAIN_DIR / "train.py"
HISTORY_PY = TRAIN_DIR / "history.py"
BUILD_SCRIPT = REPO / "scripts" / "build-example-image.sh"
TEST_IMAGE = "andreas-test/example-train:latest"
TEST_LABEL = "andreas.test"
CONTAINER_CHECKPOINT = "/andreas/checkpoint"


def load_train() -> ModuleType:
    """examples/train/train.py as a module (it is not a package; a unique name keeps it
    apart from anything else called ``train``)."""
    name = "andreas_example_train"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TRAIN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def epochs_of(history: list[dict[str, object]]) -> list[int]:
    return [int(h["epoch"]) for h in history]  # type: ignore[call-overload]


def job_env(checkpoint_dir: Path | str, epochs: int, restart: int = 0, *,
            epoch_s: float = 0.2, job_id: str | None = None) -> dict[str, str]:
    """The contract's environment plus the example's epoch length, on top of a copy of
    ours without any ANDREAS_* variable of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREAS_")}
    env["PYTHONPATH"] = str(REPO)          # the repo fallback: ``from andreas import job``
    env.update(job.job_environment(job_id or f"ex-{uuid.uuid4().hex[:8]}", checkpoint_dir,
                                   epochs, restart))
    env["EXAMPLE_EPOCH_S"] = str(epoch_s)
    return env


class Running:
    """train.py as a subprocess whose stdout lines arrive on a queue, so a test can act
    on a progress line with a timeout instead of blocking on readline()."""

    def __init__(self, env: Mapping[str, str], stderr: Path) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stderr = open(stderr, "wb")
        self.proc = subprocess.Popen([sys.executable, str(TRAIN_PY)], env=dict(env),
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, epoch: int, event: str, timeout: float = 30.0) -> job.ProgressEvent:
        """Block until the progress line (epoch, event) is printed."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {event} line for epoch {epoch}: {self.lines}"
            line = self._queue.get(timeout=remaining)
            assert line is not None, f"exited before epoch {epoch} {event}: {self.lines}"
            self.lines.append(line)
            ev = job.parse_progress(line)
            if ev is not None and ev.epoch == epoch and ev.event == event:
                return ev

    def finish(self, timeout: float = 60.0) -> int:
        rc = self.proc.wait(timeout=timeout)
        while True:
            line = self._queue.get(timeout=5)
            if line is None:
                break
            self.lines.append(line)
        self._stderr.close()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="session")
def example_image(docker_client: docker.DockerClient) -> tuple[str, list[str]]:
    """Build the example image with scripts/build-example-image.sh on the test daemon;
    returns (tag, the read-only bind mounts the script says it needs)."""
    env = dict(os.environ)
    done = subprocess.run(["bash", str(BUILD_SCRIPT), "--tag", TEST_IMAGE], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"build-example-image.sh failed ({done.returncode}):\n{done.stdout}\n"
                    f"{done.stderr}", pytrace=False)
    listed = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-volumes"], env=env,
                            capture_output=True, text=True, timeout=60, check=True)
    volumes = listed.stdout.split()
    assert volumes and volumes[0] == "/usr:/usr:ro", volumes
    image = docker_client.images.get(TEST_IMAGE)
    assert image.labels.get("andreas-example.volumes") == ",".join(volumes)
    return TEST_IMAGE, volumes


@pytest.fixture
def run_example(docker_client: docker.DockerClient, example_image: tuple[str, list[str]],
                ) -> Iterator[object]:
    """``run_example(checkpoint_dir, environment)``: a detached example container with no
    network, the runtime mounts and ``checkpoint_dir`` at /andreas/checkpoint; removed
    (with its log) at teardown."""
    tag = uuid.uuid4().hex
    image, volumes = example_image

    def run(checkpoint_dir: Path, environment: Mapping[str, str]) -> object:
        return docker_client.containers.run(
            image, detach=True, network_mode="none",
            volumes=[*volumes, f"{checkpoint_dir}:{CONTAINER_CHECKPOINT}:rw"],
            environment=dict(environment), labels={TEST_LABEL: tag})

    yield run
    for container in docker_client.containers.list(
            all=True, filters={"label": f"{TEST_LABEL}={tag}"}):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
