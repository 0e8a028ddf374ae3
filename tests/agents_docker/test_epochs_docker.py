"""EpochTracker against a real dockerd: busybox containers print the job contract's
progress lines and the tracker must record every epoch once, with the durations the
container printed, and report how each container ended."""

from __future__ import annotations

import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest

from agents.epochs import ContainerExit
from agents.records import EpochRecord
from agents.tracker import EpochTracker
from andreas.job import ENV_JOB_ID, container_labels

# Shell helpers inside the busybox image: `now` sets $T to the wall clock with
# microseconds (busybox ts), `p EPOCH EVENT [METRICS]` prints one progress line.
PRELUDE = r"""
now() { set -- $(echo | ts %.s); T=$1; }
p() { now; echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID epoch=$1 of=$N event=$2 t=$T $3"; }
"""
PRINTED = re.compile(r"job=(\S+) epoch=(\d+) of=\d+ event=(start|end) t=([0-9.]+)")


def job_id() -> str:
    return f"jd-{uuid.uuid4().hex[:10]}"


class Collected:
    def __init__(self) -> None:
        self.records: queue.Queue[EpochRecord] = queue.Queue()
        self.exits: queue.Queue[ContainerExit] = queue.Queue()
        self._records: list[EpochRecord] = []
        self._exits: list[ContainerExit] = []

    def records_of(self, job: str) -> list[EpochRecord]:
        while not self.records.empty():
            self._records.append(self.records.get())
        return [r for r in self._records if r.job_id == job]

    def exit_of(self, container_id: str, timeout: float = 20.0) -> ContainerExit:
        deadline = time.monotonic() + timeout
        while True:
            for e in self._exits:
                if e.container_id == container_id:
                    return e
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no exit reported for container {container_id[:12]}"
            try:
                self._exits.append(self.exits.get(timeout=remaining))
            except queue.Empty:
                pass


@pytest.fixture
def tracked(docker_client: docker.DockerClient) -> Iterator[tuple[EpochTracker, Collected]]:
    got = Collected()
    tracker = EpochTracker(got.records, client=docker_client, on_exit=got.exits,
                           die_grace_s=3.0)
    tracker.start()
    assert tracker.wait_connected(15), "the tracker did not connect to Docker"
    try:
        yield tracker, got
    finally:
        tracker.stop(timeout=10)
    assert not [t for t in threading.enumerate()
                if t.name.startswith("epochs-") and t.is_alive()], "tracker threads left"


def printed_durations(container: Any, job: str) -> dict[int, float]:
    """Epoch -> end t - start t, read from the container's own log (not with the parser
    under test)."""
    starts, durations = {}, {}
    for j, epoch, event, t in PRINTED.findall(container.logs().decode()):
        if j != job:
            continue
        if event == "start":
            starts[int(epoch)] = float(t)
        else:
            durations[int(epoch)] = float(t) - starts[int(epoch)]
    return durations


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_epoch_durations_match_what_the_container_printed(tracked, run_container) -> None:
    tracker, got = tracked
    job = job_id()
    sleeps = {1: 0.3, 2: 0.6, 3: 0.9, 4: 0.4}
    script = PRELUDE + f"""
echo "starting job $ANDREAS_JOB_ID"
p 1 start
echo "garbage line"; echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID epoch=x of=4 event=end t=1"
sleep {sleeps[1]}; p 1 end "loss=0.9 acc=0.1"
p 2 start
echo "ANDREAS-PROGRESS v2 job=$ANDREAS_JOB_ID epoch=2 of=4 event=end t=1 extra=thing"
echo "ANDREAS-PROGRESS v1 job=someone-else epoch=2 of=4 event=end t=1.0"
sleep {sleeps[2]}; p 2 end "loss=0.5" >&2
p 3 start
printf 'progress bar 10%%\\rprogress bar 100%%\\r'
sleep {sleeps[3]}; p 3 end
p 4 start; sleep {sleeps[4]}; p 4 end "loss=nan"
echo "done"
"""
    env = {ENV_JOB_ID: job, "N": "4"}
    # The same lines from a container andreas does not manage: not ours to record.
    stranger = run_container(script, env=env)
    container = run_container(script, labels=container_labels(job, 1, ["GPU-x", "GPU-y"]),
                              env=env)
    ended = got.exit_of(container.id)
    assert (ended.exit_code, ended.epochs, ended.open_epoch, ended.job_id, ended.attempt) == \
        (0, 4, None, job, 1)
    records = got.records_of(job)
    assert sorted(r.epoch for r in records) == [1, 2, 3, 4]          # each exactly once
    printed = printed_durations(container, job)
    assert sorted(printed) == [1, 2, 3, 4]
    for r in records:
        assert r.end_s - r.start_s == pytest.approx(printed[r.epoch], abs=1e-5)
        assert r.end_s - r.start_s >= sleeps[r.epoch]            # the sleep is inside it
        assert (r.attempt, r.container_id, r.gpu_uuids) == (1, container.id, ("GPU-x", "GPU-y"))
    stranger.wait(timeout=20)
    time.sleep(0.2)
    assert len(got.records_of(job)) == 4 and tracker.errors == 0


def test_short_containers_are_not_lost(tracked, run_container) -> None:
    _, got = tracked
    script = PRELUDE + "p 1 start; p 1 end; p 2 start; p 2 end; exit 143"
    jobs = [job_id() for _ in range(3)]
    containers = [run_container(script, labels=container_labels(j, 0), env={ENV_JOB_ID: j,
                                                                             "N": "2"})
                  for j in jobs]
    for job, container in zip(jobs, containers, strict=True):
        ended = got.exit_of(container.id)
        assert (ended.exit_code, ended.epochs) == (143, 2)
        records = got.records_of(job)
        assert sorted(r.epoch for r in records) == [1, 2]
        printed = printed_durations(container, job)
        for r in records:
            assert r.end_s - r.start_s == pytest.approx(printed[r.epoch], abs=1e-5)


def test_a_running_container_is_found_at_start(docker_client, run_container) -> None:
    job = job_id()
    script = PRELUDE + "p 1 start; sleep 0.2; p 1 end; sleep 1.5; p 2 start; sleep 0.3; p 2 end"
    container = run_container(script, labels=container_labels(job, 2), env={ENV_JOB_ID: job,
                                                                            "N": "2"})
    wait_for(lambda: b"epoch=1 of=2 event=end" in container.logs())
    got = Collected()
    with EpochTracker(got.records, client=docker_client, on_exit=got.exits) as tracker:
        assert tracker.wait_connected(15)
        ended = got.exit_of(container.id)
        assert ended.exit_code == 0 and ended.epochs == 2
    printed = printed_durations(container, job)
    records = got.records_of(job)
    assert sorted(r.epoch for r in records) == [1, 2]
    for r in records:
        assert r.end_s - r.start_s == pytest.approx(printed[r.epoch], abs=1e-5)


def test_a_container_removed_while_followed(tracked, run_container) -> None:
    tracker, got = tracked
    job = job_id()
    script = PRELUDE + "i=1; while true; do p $i start; sleep 0.3; p $i end; i=$((i+1)); done"
    container = run_container(script, labels=container_labels(job, 0), env={ENV_JOB_ID: job,
                                                                            "N": "1000"})
    wait_for(lambda: len(got.records_of(job)) >= 2)
    container.remove(force=True)
    ended = got.exit_of(container.id)
    assert ended.exit_code == 137               # SIGKILL; ``removed`` races the destroy event
    records = got.records_of(job)
    assert sorted(r.epoch for r in records) == list(range(1, len(records) + 1))
    assert ended.epochs == len(records)
    assert all(r.end_s - r.start_s >= 0.3 for r in records)
    # The tracker goes on with the next container.
    job2 = job_id()
    again = run_container(PRELUDE + "p 1 start; p 1 end",
                          labels=container_labels(job2, 0), env={ENV_JOB_ID: job2, "N": "1"})
    assert got.exit_of(again.id).epochs == 1
    assert [r.epoch for r in got.records_of(job2)] == [1]
    assert tracker.errors == 0


def test_stop_while_following(docker_client, run_container) -> None:
    job = job_id()
    container = run_container(PRELUDE + "p 1 start; sleep 60",
                              labels=container_labels(job, 0), env={ENV_JOB_ID: job, "N": "1"})
    tracker = EpochTracker(lambda r: None, client=docker_client).start()
    assert tracker.wait_connected(15)
    wait_for(lambda: any(i.container_id == container.id for i in tracker.followed()))
    started = time.monotonic()
    tracker.stop(timeout=10)
    assert time.monotonic() - started < 5
    assert tracker.followed() == []
    assert not [t for t in threading.enumerate()
                if t.name.startswith("epochs-") and t.is_alive()]
