"""The executor contract (andreas/executor/base.py), one suite over every implementation:
the Docker executor on the test daemon, the Slurm executor on the real Slurm test cluster
(tests/slurm_cluster.py), the dry run, and the in-memory engine the manager, job and
profiler tests drive (tests/manager/fakes.py; tests/jobs and tests/profiler subclass it).
What the manager relies on must hold for all of them, or a test that passes on a fake
proves nothing about Docker or Slurm. Where engines differ, the test asks the executor's
capabilities (an engine that queues may report a start as pending first; one that picks
GPUs reports the ones it chose)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pytest

from andreas.config import ExecutorSettings, SlurmSettings
from andreas.executor.base import (Capability, ContainerState, Executor, NodeRef,
                                   StartRequest, container_name)
from andreas.executor.dryrun import DryRunExecutor
from andreas.executor.errors import ContainerConflict, ImageNotAllowed
from tests.manager.fakes import FakeExecutor

# Runs until SIGTERM, then exits 143 (the job contract's "stopped on request").
WELL_BEHAVED = 'trap "exit 143" TERM; while :; do sleep 0.1; done'
FORBIDDEN = "registry.example.org/not-allowed:1"


@dataclass
class Engine:
    executor: Executor
    node: NodeRef
    request: Callable[..., StartRequest]     # request(job_id, attempt=1, image=None)
    new_job: Callable[[], str]
    settle_s: float = 0.0                    # a real process needs time to install its trap

    def state(self, cid: str) -> ContainerState | None:
        return next((c for c in self.executor.containers(self.node) if c.container_id == cid),
                    None)

    def running(self, cid: str, timeout_s: float = 60.0) -> ContainerState:
        """The state once the engine runs it (an engine that queues: after pending)."""
        deadline = time.monotonic() + timeout_s
        while True:
            s = self.state(cid)
            if s is not None and not s.pending:
                assert s.running, s
                time.sleep(self.settle_s)
                return s
            assert s is not None and s.pending_reason, s
            assert time.monotonic() < deadline, f"{cid} pending too long: {s.pending_reason}"
            time.sleep(0.1)

    def exited(self, cid: str, timeout_s: float = 30.0) -> ContainerState:
        deadline = time.monotonic() + timeout_s
        while True:
            s = self.state(cid)
            if s is not None and not s.running and not s.pending:
                return s
            assert time.monotonic() < deadline, f"container {cid} did not exit"
            time.sleep(0.05)


def _in_memory(executor: Executor) -> Engine:
    def request(job_id: str, attempt: int = 1, image: str | None = None) -> StartRequest:
        return StartRequest(job_id=job_id, attempt=attempt, image=image or "img:1",
                            command=("sh", "-c", WELL_BEHAVED), epochs=3,
                            gpu_uuids=("GPU-a", "GPU-b"), fake_gpus=True)

    return Engine(executor=executor, node=NodeRef(name="n1", docker_endpoint="unix:///x"),
                  request=request, new_job=lambda: f"j-{uuid.uuid4().hex[:8]}")


def _slurm(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The Slurm executor on node sn3 of the test cluster; its jobs cancelled at the end."""
    import subprocess

    from andreas.executor.slurm import SlurmExecutor

    cluster = request.getfixturevalue("slurm_cluster")
    tmp = request.getfixturevalue("tmp_path")
    (tmp / "out").mkdir()
    (tmp / "checkpoints").mkdir()
    name = cluster.nodes[-1]
    node = NodeRef(name=name, docker_endpoint="", gpus=((0, f"GPU-fake-{name}-0"),
                                                       (1, f"GPU-fake-{name}-1")))
    settings = ExecutorSettings(checkpoint_root=str(tmp / "checkpoints"), kind="slurm",
                                slurm=SlurmSettings(partition=cluster.partition,
                                                    output_dir=str(tmp / "out")))
    executor = SlurmExecutor(settings)
    made: list[str] = []

    def new_job() -> str:
        made.append(f"ex-{uuid.uuid4().hex[:10]}")
        return made[-1]

    def slurm_request(job_id: str, attempt: int = 1, image: str | None = None
                      ) -> StartRequest:
        return StartRequest(job_id=job_id, attempt=attempt, image=image or "",
                            command=("sh", "-c", WELL_BEHAVED), env={"LR": "0.1"}, epochs=3,
                            gpu_uuids=(node.gpus[0][1],), fake_gpus=True)

    try:
        yield Engine(executor=executor, node=node, request=slurm_request, new_job=new_job,
                     settle_s=0.5)
    finally:
        ids = [r.job_id for r in executor._queue(fresh=True)
               if any(r.name.startswith(f"andreas-{j}-") for j in made)]
        if ids:
            subprocess.run(["scancel", "--signal=KILL", "--full", *ids], env=cluster.env,
                           capture_output=True, timeout=30)
            subprocess.run(["scancel", *ids], env=cluster.env, capture_output=True, timeout=30)
        executor.close()


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("slurm", marks=pytest.mark.slurm), "dryrun", "fake"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    if request.param == "dryrun":
        yield _in_memory(DryRunExecutor(settings=ExecutorSettings(image_allowlist=("img:*",))))
        return
    if request.param == "slurm":
        yield from _slurm(request)
        return
    if request.param == "fake":
        fake = FakeExecutor(clock=time.time)
        fake.forbidden_images = {FORBIDDEN}
        yield _in_memory(fake)
        return
    settings: ExecutorSettings = request.getfixturevalue("settings")
    image: str = request.getfixturevalue("image")
    request_for = request.getfixturevalue("request_for")
    from andreas.executor.docker import DockerExecutor

    executor = DockerExecutor(replace(settings, image_allowlist=(image,)))

    def docker_request(job_id: str, attempt: int = 1, image: str | None = None
                       ) -> StartRequest:
        base = request_for(job_id, WELL_BEHAVED, attempt=attempt)
        return base if image is None else replace(base, image=image)

    try:
        yield Engine(executor=executor, node=request.getfixturevalue("node"),
                     request=docker_request, new_job=request.getfixturevalue("new_job"),
                     settle_s=0.3)
    finally:
        executor.close()


def test_a_started_attempt_is_listed_running_with_its_name_and_gpus(engine: Engine):
    job = engine.new_job()
    engine.executor.ping(engine.node)
    cid = engine.executor.start(engine.node, engine.request(job))
    first = engine.state(cid)
    assert first is not None and (first.running or first.pending)
    s = engine.running(cid)
    assert s is not None and s.running and s.exit_code is None and not s.pending
    assert (s.name, s.job_id, s.attempt) == (container_name(job, 1), job, 1)
    wanted = engine.request(job).gpu_uuids
    if Capability.PICKS_GPUS in engine.executor.capabilities:
        assert len(s.gpu_uuids) == len(wanted)
        assert set(s.gpu_uuids) <= {u for _, u in engine.node.gpus}
    else:
        assert s.gpu_uuids == wanted
    assert s.started_s is not None


def test_a_second_start_of_an_attempt_conflicts_and_leaves_the_first(engine: Engine):
    job = engine.new_job()
    cid = engine.executor.start(engine.node, engine.request(job))
    with pytest.raises(ContainerConflict):
        engine.executor.start(engine.node, engine.request(job))
    assert engine.running(cid).running
    assert engine.executor.start(engine.node, engine.request(job, attempt=2)) != cid


def test_sigterm_stops_a_well_behaved_job_with_143(engine: Engine):
    cid = engine.executor.start(engine.node, engine.request(engine.new_job()))
    engine.running(cid)
    engine.executor.signal(engine.node, cid, "SIGTERM")
    s = engine.exited(cid)
    assert s.exit_code == 143 and s.finished_s is not None
    engine.executor.signal(engine.node, cid, "SIGTERM")     # exited already: not an error
    engine.executor.kill(engine.node, cid)
    assert engine.state(cid).exit_code == 143


def test_kill_ends_a_job_with_137(engine: Engine):
    cid = engine.executor.start(engine.node, engine.request(engine.new_job()))
    engine.running(cid)
    engine.executor.kill(engine.node, cid)
    # Slurm's kill is its cancel: SIGTERM, SIGKILL after KillWait; this job handles SIGTERM
    # (143) before the SIGKILL comes (one that does not: 137, tests/executor/test_slurm.py)
    queued = Capability.PENDING in engine.executor.capabilities
    assert engine.exited(cid).exit_code in ((137, 143) if queued else (137,))


def test_remove_forgets_an_exited_container_and_a_gone_one_is_fine(engine: Engine):
    cid = engine.executor.start(engine.node, engine.request(engine.new_job()))
    engine.executor.kill(engine.node, cid)
    engine.exited(cid)
    engine.executor.remove(engine.node, cid)
    assert engine.state(cid) is None
    engine.executor.remove(engine.node, cid)
    engine.executor.signal(engine.node, cid, "SIGTERM")
    engine.executor.kill(engine.node, cid)


def test_an_image_outside_the_allowlist_starts_nothing(engine: Engine):
    job = engine.new_job()
    with pytest.raises(ImageNotAllowed):
        engine.executor.start(engine.node, engine.request(job, image=FORBIDDEN))
    assert all(c.job_id != job for c in engine.executor.containers(engine.node))


def test_logs_are_bytes_and_a_tail_is_text(engine: Engine):
    cid = engine.executor.start(engine.node, engine.request(engine.new_job()))
    assert all(isinstance(chunk, bytes) for chunk in engine.executor.logs(engine.node, cid))
    assert isinstance(engine.executor.log_tail(engine.node, cid, lines=5), str)
