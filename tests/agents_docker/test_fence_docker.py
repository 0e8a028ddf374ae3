"""The agent's fence against a real Docker daemon and a real store (SQLite, migrated).

What is real: the engine, the containers (busybox ``sh`` trapping SIGTERM, or ignoring it),
their labels (the andreas.grace_s one too), the store's verdict query (:func:`andreas.store.fence.verdicts`
through the agent's engine) and an unreachable MariaDB (a closed port, through the agent's
own engine factory). What is not: the manager (attempts are written here as it would).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import docker
import pytest

from agents.daemon import store_verdicts
from agents.fence import Fence
from andreas.job import container_labels
from andreas.store import migrate
from andreas.store.attempts import end_attempt, open_attempt
from andreas.store.engine import Store
from andreas.store.opener import open_store
from andreas.store.registry import agent_engine
from tests.agents_docker.conftest import TEST_LABEL
from tests.store.helpers import add_job, add_node

# Exits 143 on SIGTERM (as a job saving its checkpoint does); the other ignores it.
GRACEFUL = "trap 'echo saved; exit 143' TERM; echo started; while true; do sleep 0.1; done"
STUBBORN = "trap '' TERM; echo started; while true; do sleep 0.1; done"


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    url = migrate.upgrade_url(f"sqlite:///{tmp_path / 'fence.db'}")
    s = open_store(url)
    try:
        yield s
    finally:
        s.dispose()


@pytest.fixture
def start(docker_client: docker.DockerClient, image: str) -> Iterator[Callable[..., str]]:
    tag = uuid.uuid4().hex

    def run(job_id: str, attempt: int, script: str, grace_s: float) -> str:
        c = docker_client.containers.run(
            image, ["sh", "-c", script], detach=True, network_mode="none",
            name=f"fence-{job_id}-{attempt}-{tag[:6]}",
            labels={**container_labels(job_id, attempt, (), grace_s=grace_s), TEST_LABEL: tag})
        return c.id

    yield run
    for c in docker_client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={tag}"}):
        c.remove(force=True)


def state(client: docker.DockerClient, cid: str) -> tuple[bool, int]:
    s = client.api.inspect_container(cid)["State"]
    return bool(s["Running"]), int(s["ExitCode"])


def wait_for(what: str, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def run_fence(fence: Fence) -> Callable[[], None]:
    stop = threading.Event()
    thread = threading.Thread(target=fence.run, args=(stop,), daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive()
    return halt


def test_stale_attempts_are_stopped_current_ones_run_on(store, start, docker_client):
    """The store says: j1 attempt 1 is current here; j2 attempt 1 ended (its node was
    declared unreachable); j3 attempt 1 was superseded by attempt 2 (on another node);
    j4 is unknown (an `andreas profile` run). Only j2 and j3 stop: j2 by SIGTERM (143),
    j3, which ignores SIGTERM, by SIGKILL after its grace_s of 2 s (137)."""
    here, here_id, _ = add_node(store, gpus=2)
    _, other_id, _ = add_node(store, gpus=1)
    jobs = [add_job(store) for _ in range(3)]
    with store.session() as s:
        open_attempt(s, job_id=jobs[0], attempt=1, node_id=here_id, gpu_ids=[0],
                     decision_id=None)
        ended = open_attempt(s, job_id=jobs[1], attempt=1, node_id=here_id, gpu_ids=[1],
                             decision_id=None)
        end_attempt(s, ended, time.time(), exit_code=None, reason="node unreachable")
        old = open_attempt(s, job_id=jobs[2], attempt=1, node_id=here_id, gpu_ids=[1],
                           decision_id=None)
        end_attempt(s, old, time.time(), exit_code=None, reason="node unreachable")
        open_attempt(s, job_id=jobs[2], attempt=2, node_id=other_id, gpu_ids=[0],
                     decision_id=None)
    current = start(jobs[0], 1, GRACEFUL, 30)
    stale = start(jobs[1], 1, GRACEFUL, 30)
    stubborn = start(jobs[2], 1, STUBBORN, 2)
    unknown = start("profile-x", 1, GRACEFUL, 30)
    wait_for("the containers' traps", lambda: all(
        b"started" in docker_client.api.logs(c) for c in (current, stale, stubborn, unknown)))
    engine = agent_engine(str(store.engine.url))
    fence = Fence(docker=lambda: docker_client, check_s=0.3, after_s=0,
                  verdicts=lambda keys: store_verdicts(engine, here, keys))
    halt = run_fence(fence)
    try:
        wait_for("the stale container to exit", lambda: not state(docker_client, stale)[0])
        sigterm_at = time.monotonic()
        assert state(docker_client, stale) == (False, 143)
        assert b"saved" in docker_client.api.logs(stale)       # it had its checkpoint
        wait_for("the stubborn one to be killed",
                 lambda: not state(docker_client, stubborn)[0])
        assert state(docker_client, stubborn) == (False, 137)
        assert time.monotonic() - sigterm_at >= 1.0              # its 2 s grace, not at once
        time.sleep(1.0)                                          # more checks: still running
        assert state(docker_client, current) == (True, 0)
        assert state(docker_client, unknown) == (True, 0)
        assert fence.stats.checks >= 3 and fence.stats.failed_checks == 0
        assert (fence.stats.stopped, fence.stats.killed, fence.stats.self_fenced) == (2, 1, 0)
    finally:
        halt()
        engine.dispose()


def test_no_answer_from_the_store_stops_every_andreas_container(store, start, docker_client):
    """The store cannot be reached (MariaDB on a closed port, through the agent's engine):
    after fence_after_s (1.5 s) every andreas container here gets SIGTERM, not before."""
    add_node(store, gpus=1)
    job = add_job(store)
    cid = start(job, 1, GRACEFUL, 5)
    wait_for("the trap", lambda: b"started" in docker_client.api.logs(cid))
    dead = agent_engine("mysql+pymysql://andreas_agent:x@127.0.0.1:9/andreas")
    began = time.monotonic()
    fence = Fence(docker=lambda: docker_client, check_s=0.2, after_s=1.5,
                  verdicts=lambda keys: store_verdicts(dead, "node", keys))
    halt = run_fence(fence)
    try:
        time.sleep(1.0)
        assert state(docker_client, cid) == (True, 0)            # not yet
        wait_for("the self-fence", lambda: not state(docker_client, cid)[0])
        assert time.monotonic() - began >= 1.5
        assert state(docker_client, cid) == (False, 143)
        assert fence.stats.self_fenced == 1 and fence.stats.checks == 0
        assert fence.stats.failed_checks >= 3
    finally:
        halt()
        dead.dispose()
