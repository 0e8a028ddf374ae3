"""DockerExecutor against a real dockerd with the busybox test image."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from andreas.executor.base import ContainerState, NodeRef
from andreas.executor.docker import DockerExecutor, pull_error_is_permanent
from andreas.executor.errors import ContainerConflict, ExecutorError, ImagePullFailed
from andreas.job import container_labels

# Waits for the file "go" in its checkpoint directory, then exits with $CODE.
GATED = 'while [ ! -e "$ANDREAS_CHECKPOINT_DIR/go" ]; do sleep 0.05; done; exit ${CODE:-0}'
LOOP = "while :; do sleep 0.1; done"


def wait_for(fn: Callable[[], object], timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def state_of(ex: DockerExecutor, node: NodeRef, cid: str) -> ContainerState | None:
    return next((c for c in ex.containers(node) if c.container_id == cid), None)


def exited(ex: DockerExecutor, node: NodeRef, cid: str) -> ContainerState:
    return wait_for(lambda: (s := state_of(ex, node, cid)) is not None and not s.running
                    and s, what=f"container {cid[:12]} to exit")


def test_start_follows_the_contract(executor, node, new_job, request_for, settings,
                                    docker_client):
    job = new_job()
    cid = executor.start(node, request_for(
        job, 'echo "$ANDREAS_JOB_ID $ANDREAS_EPOCHS" > "$ANDREAS_CHECKPOINT_DIR/hello"; '
        + LOOP, restart_count=4))
    info = docker_client.api.inspect_container(cid)
    assert info["Name"] == f"/andreas-{job}-1"
    assert info["Config"]["Labels"] == container_labels(
        job, 1, ("GPU-fake-local-0", "GPU-fake-local-1"), grace_s=120.0)
    env = dict(e.split("=", 1) for e in info["Config"]["Env"])
    assert env["LR"] == "0.1" and env["ANDREAS_JOB_ID"] == job
    assert env["ANDREAS_CHECKPOINT_DIR"] == settings.checkpoint_mount
    assert env["ANDREAS_EPOCHS"] == "7" and env["ANDREAS_RESTART_COUNT"] == "4"
    host = info["HostConfig"]
    assert host["Privileged"] is False and host["AutoRemove"] is False
    assert host["NetworkMode"] == "none"
    assert host["RestartPolicy"]["Name"] in ("", "no")
    assert not host.get("DeviceRequests")                       # fake GPUs: none
    assert any("no-new-privileges" in o for o in host["SecurityOpt"])
    (mount,) = [m for m in info["Mounts"] if m["Destination"] == settings.checkpoint_mount]
    assert mount["Type"] == "bind" and mount["RW"] is True
    assert mount["Source"] == f"{settings.checkpoint_root}/{job}"
    # the mount is the job's checkpoint directory, writable from inside
    hello = Path(settings.checkpoint_root) / job / "hello"
    assert wait_for(hello.exists, what="the file written through the bind mount")
    assert wait_for(lambda: hello.read_text().strip() == f"{job} 7", what="its content")


def test_the_container_runs_with_the_security_profile(settings, node, new_job, request_for,
                                                     docker_client):
    """Issue 16: every capability dropped, no new privileges, a non-root user, memory and
    process limits, as `docker inspect` shows them; the checkpoint directory stays
    writable for that user."""
    from dataclasses import replace

    ex = DockerExecutor(replace(settings, user="65534:65534", memory_limit_mib=256,
                                pids_limit=64))
    job = new_job()
    try:
        cid = ex.start(node, request_for(job, 'id -u > "$ANDREAS_CHECKPOINT_DIR/uid"; ' + LOOP))
        host = docker_client.api.inspect_container(cid)["HostConfig"]
        info = docker_client.api.inspect_container(cid)
    finally:
        ex.close()
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
    assert info["Config"]["User"] == "65534:65534"
    assert host["Memory"] == 256 << 20 and host["MemorySwap"] == 256 << 20
    assert host["PidsLimit"] == 64
    assert any("no-new-privileges" in o for o in host["SecurityOpt"])
    uid = Path(settings.checkpoint_root) / job / "uid"
    assert wait_for(lambda: uid.exists() and uid.read_text().strip() == "65534",
                    what="the job writing its checkpoint directory as uid 65534")


def test_containers_reports_running_then_exit_code_and_times(executor, node, new_job,
                                                            request_for, settings):
    job = new_job()
    before = time.time()
    cid = executor.start(node, request_for(job, GATED, env={"CODE": "3"}))
    running = state_of(executor, node, cid)
    assert running is not None and running.running and running.exit_code is None
    assert (running.job_id, running.attempt, running.name) == (job, 1, f"andreas-{job}-1")
    assert running.gpu_uuids == ("GPU-fake-local-0", "GPU-fake-local-1")
    assert running.started_s is not None and running.finished_s is None
    assert before - 5 <= running.started_s <= time.time() + 5      # UTC seconds
    (Path(settings.checkpoint_root) / job / "go").touch()
    done = exited(executor, node, cid)
    assert done.exit_code == 3 and not done.oom_killed
    assert done.started_s == running.started_s
    assert done.finished_s is not None and done.finished_s >= done.started_s


def test_containers_ignores_unlabelled_containers(executor, node, run_container):
    other = run_container("sleep 30")
    assert other.id not in {c.container_id for c in executor.containers(node)}


def counting_clients(calls: list[str]) -> Callable[[str], docker.DockerClient]:
    """A client factory whose clients append every engine request ("METHOD /path") to
    ``calls``."""
    def factory(endpoint: str) -> docker.DockerClient:
        client = docker.DockerClient(base_url=endpoint, version="auto")
        send = client.api.send

        def counted(req, **kw):
            calls.append(f"{req.method} {req.path_url.split('?')[0]}")
            return send(req, **kw)

        client.api.send = counted
        return client
    return factory


def test_containers_costs_one_list_call_when_nothing_changed(settings, node, new_job,
                                                             request_for):
    calls: list[str] = []
    factory = counting_clients(calls)

    ex = DockerExecutor(settings, client_factory=factory)
    try:
        job = new_job()
        cid = ex.start(node, request_for(job, GATED))
        ex.containers(node)                  # first sight: inspected once
        calls.clear()
        ex.containers(node)
        assert len(calls) == 1 and calls[0].endswith("/containers/json"), calls
        calls.clear()
        (Path(settings.checkpoint_root) / job / "go").touch()
        exited(ex, node, cid)                # the change: one more inspect
        calls.clear()
        assert state_of(ex, node, cid).exit_code == 0
        assert len(calls) == 1, calls        # exited containers are not inspected again
    finally:
        ex.close()


def test_a_start_after_the_image_check_is_create_and_start_only(settings, node, new_job,
                                                                request_for, docker_client):
    """The manager checks the image, records the attempt, then starts: the start asks the
    engine twice (create, start), and the container is the one the SDK's
    ``containers.run`` makes from the same options."""
    from dataclasses import replace

    from andreas.executor.run_options import run_options

    calls: list[str] = []
    factory = counting_clients(calls)

    settings = replace(settings, user="65534:65534", memory_limit_mib=256, pids_limit=64)
    ex = DockerExecutor(settings, client_factory=factory)
    try:
        job, twin = new_job(), new_job()
        request = request_for(job, LOOP)
        ex.ensure_image(node, request.image)
        calls.clear()
        cid = ex.start(node, request)
        assert [c.split(" ")[0] for c in calls] == ["POST", "POST"], calls
        assert calls[0].endswith("/containers/create") and calls[1].endswith("/start")
        options = run_options(replace(request, job_id=twin), settings)
        options["volumes"] = [v.replace(twin, job) for v in options["volumes"]]
        options["environment"]["ANDREAS_JOB_ID"] = job
        options["labels"] = docker_client.api.inspect_container(cid)["Config"]["Labels"]
        made = docker_client.containers.run(**options)
        ours, theirs = (docker_client.api.inspect_container(c) for c in (cid, made.id))
        assert ours["HostConfig"] == theirs["HostConfig"]
        for key in ("Hostname",):
            ours["Config"].pop(key), theirs["Config"].pop(key)
        assert ours["Config"] == theirs["Config"]
        assert ours["State"]["Running"] and theirs["State"]["Running"]
    finally:
        ex.close()


def test_sigterm_lets_the_job_exit_143(executor, node, new_job, request_for):
    job = new_job()
    cid = executor.start(node, request_for(job, 'trap "exit 143" TERM; ' + LOOP))
    wait_for(lambda: state_of(executor, node, cid).running, what="running")
    time.sleep(0.3)                          # let sh install its trap
    executor.signal(node, cid, "SIGTERM")
    assert exited(executor, node, cid).exit_code == 143
    executor.signal(node, cid, "SIGTERM")    # exited already: not an error
    executor.kill(node, cid)


def test_kill_exits_137_even_when_sigterm_is_ignored(executor, node, new_job, request_for):
    job = new_job()
    cid = executor.start(node, request_for(job, "trap '' TERM; " + LOOP))
    time.sleep(0.3)
    executor.signal(node, cid, "SIGTERM")
    time.sleep(0.3)
    assert state_of(executor, node, cid).running          # it ignored SIGTERM
    executor.kill(node, cid)
    assert exited(executor, node, cid).exit_code == 137


def test_second_start_of_an_attempt_is_a_conflict(executor, node, new_job, request_for):
    job = new_job()
    req = request_for(job, LOOP)
    cid = executor.start(node, req)
    with pytest.raises(ContainerConflict, match=f"andreas-{job}-1.*node local"):
        executor.start(node, req)
    assert state_of(executor, node, cid).running           # the first one is untouched
    other = executor.start(node, request_for(job, LOOP, attempt=2))
    assert other != cid


def test_an_image_no_registry_can_deliver_is_a_pull_that_may_pass(executor, node, new_job,
                                                                   request_for):
    """This machine reaches no image registry: the pull fails on the network (DNS), which
    may pass, so it is ImagePullFailed (the manager lets the job wait), and the same pull
    is not tried again for PULL_RETRY_S."""
    job = new_job()
    image = f"andreas-test/missing-{job}:1"
    with pytest.raises(ImagePullFailed, match=f"image {image}: not on node local") as first:
        executor.start(node, request_for(job, LOOP, image=image))
    assert not pull_error_is_permanent(str(first.value))
    assert not [c for c in executor.containers(node) if c.job_id == job]
    with pytest.raises(ImagePullFailed, match="next pull in"):
        executor.ensure_image(node, image)


@pytest.mark.parametrize(("message", "permanent"), [
    ("manifest for reg.example/ml/x:1 not found: manifest unknown", True),
    ("pull access denied for ml/x, repository does not exist or may require 'docker login'",
     True),
    ("invalid reference format: repository name must be lowercase", True),
    ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: '
     "no such host", False),
    ("Get https://reg.example/v2/: net/http: TLS handshake timeout", False),
    ("received unexpected HTTP status: 503 Service Unavailable", False),
    ("dial tcp 10.0.0.5:443: connect: connection refused", False),
])
def test_pull_errors_are_classified(message, permanent):
    assert pull_error_is_permanent(message) is permanent


def test_failed_start_leaves_no_container(executor, node, new_job, request_for):
    job = new_job()
    req = request_for(job, "", command=("/no/such/program",))
    with pytest.raises(ExecutorError, match=f"node local: start container andreas-{job}-1"):
        executor.start(node, req)
    assert not [c for c in executor.containers(node) if c.job_id == job]


def test_remove_of_a_gone_container_is_fine(executor, node, new_job, request_for):
    job = new_job()
    cid = executor.start(node, request_for(job, "exit 0"))
    exited(executor, node, cid)
    executor.remove(node, cid)
    assert state_of(executor, node, cid) is None
    executor.remove(node, cid)
    executor.signal(node, cid)
    executor.kill(node, cid)


def test_logs_tail_and_follow(executor, node, new_job, request_for, settings):
    job = new_job()
    cid = executor.start(node, request_for(job, "echo oops >&2; sleep 0.3; "
                                           "for i in 1 2 3 4 5; do echo line$i; done"))
    exited(executor, node, cid)
    assert b"".join(executor.logs(node, cid, tail=2)) == b"line4\nline5\n"
    # stdout and stderr both (Docker orders the two streams only by time)
    assert b"".join(executor.logs(node, cid)).split() == [b"oops", b"line1", b"line2",
                                                          b"line3", b"line4", b"line5"]
    assert "line5" in executor.log_tail(node, cid, 3)

    job2 = new_job()
    cid2 = executor.start(node, request_for(
        job2, f'echo first; {GATED.replace("exit", "echo last; exit")}'))
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(executor.logs(node, cid2,
                                                                      follow=True)))
    reader.start()
    wait_for(lambda: b"first" in b"".join(got), what="the first followed line")
    assert reader.is_alive()                 # following: still waiting for more
    (Path(settings.checkpoint_root) / job2 / "go").touch()
    reader.join(30)
    assert not reader.is_alive()             # the stream ends with the container
    assert b"".join(got) == b"first\nlast\n"


def test_logs_of_an_unknown_container_is_an_executor_error(executor, node):
    with pytest.raises(ExecutorError, match="node local: logs of container"):
        list(executor.logs(node, "0123456789abcdef"))
    assert executor.log_tail(node, "0123456789abcdef") == ""


def test_one_client_per_endpoint_shared_by_threads(settings, node):
    made: list[str] = []
    lock = threading.Lock()

    def factory(endpoint: str) -> docker.DockerClient:
        with lock:
            made.append(endpoint)
        time.sleep(0.2)                      # a slow connect: the others must wait for it
        return docker.DockerClient(base_url=endpoint, version="auto")

    ex = DockerExecutor(settings, client_factory=factory)
    errors: list[BaseException] = []

    def poll() -> None:
        try:
            for _ in range(3):
                ex.containers(node)
            ex.ping(node)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ex.close()
    assert not errors and made == [node.docker_endpoint]


def test_ping_answers(executor, node):
    executor.ping(node)                      # no exception: the engine answers
