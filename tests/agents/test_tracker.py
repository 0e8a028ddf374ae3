"""agents/tracker.py without Docker: the tracker against a scripted fake Docker client
(discovery, reconnects, bad labels, failing consumers, the die grace). The same tracker
against a real dockerd: tests/agents_docker/."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import docker.errors
import pytest

from agents.epochs import ContainerExit, ContainerInfo
from agents.records import EpochRecord
from agents.tracker import EpochTracker
from andreas.job import container_labels, format_progress

from tests.docker_fakes import END, FakeStream


# --- a scripted Docker ---------------------------------------------------------------

def stamp(t: float) -> str:
    whole = int(t)
    nanos = round((t - whole) * 1e9)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{nanos:09d}Z"


class FakeContainer:
    def __init__(self, docker: FakeDocker, cid: str, labels: dict, started: float) -> None:
        self.docker, self.id, self.name = docker, cid, f"name-{cid[:4]}"
        self.labels = labels
        self.lines: list[tuple[float, str]] = []
        self.streams: list[FakeStream] = []
        self.running = True
        self.exit_code = 0
        self.started = started
        self.finished: float | None = None
        self.logs_calls: list[dict] = []

    @property
    def attrs(self) -> dict:
        return {"Config": {"Labels": self.labels},
                "State": {"Running": self.running, "StartedAt": stamp(self.started),
                          "FinishedAt": stamp(self.finished) if self.finished
                          else "0001-01-01T00:00:00Z", "ExitCode": self.exit_code}}

    def reload(self) -> None:
        if self.id not in self.docker.containers.by_id:
            raise docker.errors.NotFound("gone")

    def print(self, text: str, t: float | None = None) -> None:
        t = time.time() if t is None else t
        self.lines.append((t, text))
        for s in self.streams:
            s.q.put(f"{stamp(t)} {text}\n".encode())

    def logs(self, *, stream: bool, follow: bool, timestamps: bool, since: Any = None) -> Any:
        self.reload()
        self.logs_calls.append(dict(stream=stream, follow=follow, since=since))
        chunks = [f"{stamp(t)} {text}\n".encode() for t, text in self.lines
                  if since is None or t >= since]
        if not stream:
            return b"".join(chunks)
        s = FakeStream(chunks, follow=follow and self.running)
        if follow and self.running:
            self.streams.append(s)
        return s

    def exit(self, code: int) -> None:
        self.running, self.exit_code, self.finished = False, code, time.time()
        for s in self.streams:
            s.q.put(END)
        self.streams = []
        self.docker.event("die", self, exitCode=str(code))


class FakeContainers:
    def __init__(self) -> None:
        self.by_id: dict[str, FakeContainer] = {}

    def list(self, filters: dict) -> list[FakeContainer]:
        assert filters == {"label": "andreas.job", "status": "running"}
        return [c for c in self.by_id.values() if c.running]

    def get(self, cid: str) -> FakeContainer:
        if cid not in self.by_id:
            raise docker.errors.NotFound("no such container")
        return self.by_id[cid]


class FakeDocker:
    def __init__(self) -> None:
        self.containers = FakeContainers()
        self.event_streams: list[FakeStream] = []
        self.events_calls = 0
        self.n = 0

    def events(self, *, decode: bool, since: int, filters: dict) -> FakeStream:
        assert decode and filters["label"] == ["andreas.job"]
        self.events_calls += 1
        s = FakeStream()
        self.event_streams.append(s)
        return s

    def event(self, action: str, c: FakeContainer, **attributes: str) -> None:
        e = {"Type": "container", "Action": action, "id": c.id, "timeNano": time.time_ns(),
             "Actor": {"ID": c.id, "Attributes": {**c.labels, **attributes}}}
        for s in self.event_streams:
            if not s.closed:
                s.q.put(e)

    def run(self, labels: dict, announce: bool = True) -> FakeContainer:
        self.n += 1
        c = FakeContainer(self, f"{self.n:04d}" + "f" * 60, labels, time.time())
        self.containers.by_id[c.id] = c
        if announce:
            self.event("start", c)
        return c

    def remove(self, c: FakeContainer) -> None:
        if c.running:
            c.exit(137)
        del self.containers.by_id[c.id]
        self.event("destroy", c)


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Collect:
    def __init__(self) -> None:
        self.records: list[EpochRecord] = []
        self.exits: list[ContainerExit] = []
        self.starts: list[ContainerInfo] = []

    def tracker(self, client: FakeDocker, **kw: Any) -> EpochTracker:
        return EpochTracker(self.records.append, client=client, on_exit=self.exits.append,
                            on_start=self.starts.append, **kw)


def progress(c: FakeContainer, job: str, epochs: range, t0: float) -> None:
    for e in epochs:
        c.print(format_progress(job, e, 9, "start", t=t0 + e))
        c.print("garbage ANDREAS-PROGRESS v1 job=x")
        c.print(format_progress(job, e, 9, "end", t=t0 + e + 0.5))


def test_tracker_follows_discovered_and_started_containers() -> None:
    d, got = FakeDocker(), Collect()
    old = d.run(container_labels("j1", 0, ["GPU-a"]), announce=False)
    progress(old, "j1", range(1, 3), 1000.0)            # printed before the tracker started
    d.run({"unrelated": "1"}, announce=False)
    tracker = got.tracker(d).start()
    try:
        assert tracker.wait_connected(5)
        wait_for(lambda: len(got.records) == 2)
        new = d.run(container_labels("j2", 1))
        wait_for(lambda: len(got.starts) == 2)
        progress(new, "j2", range(1, 4), 2000.0)
        progress(old, "j1", range(3, 4), 1000.0)
        wait_for(lambda: len(got.records) == 6)
        assert {(r.job_id, r.attempt, r.epoch, r.end_s - r.start_s) for r in got.records} == {
            ("j1", 0, 1, 0.5), ("j1", 0, 2, 0.5), ("j1", 0, 3, 0.5),
            ("j2", 1, 1, 0.5), ("j2", 1, 2, 0.5), ("j2", 1, 3, 0.5)}
        assert {r.gpu_uuids for r in got.records if r.job_id == "j1"} == {("GPU-a",)}
        new.exit(3)
        wait_for(lambda: len(got.exits) == 1)
        assert (got.exits[0].job_id, got.exits[0].exit_code, got.exits[0].epochs) == ("j2", 3, 3)
        assert [i.job_id for i in tracker.followed()] == ["j1"]
        assert old.logs_calls[0]["since"] == pytest.approx(old.started - 1.0, abs=1e-3)
    finally:
        tracker.stop()
    assert tracker.followed() == [] and tracker.errors == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("epochs-")]
    assert len(got.exits) == 1                          # still running at stop: no exit


def test_bad_labels_vanishing_containers_and_failing_consumers() -> None:
    d = FakeDocker()
    records: list[EpochRecord] = []

    def flaky(record: EpochRecord) -> None:
        if record.epoch == 1:
            raise RuntimeError("consumer bug")
        records.append(record)

    exits: list[ContainerExit] = []
    tracker = EpochTracker(flaky, client=d, on_exit=exits.append).start()
    try:
        assert tracker.wait_connected(5)
        d.run({"andreas.job": "j1", "andreas.attempt": "many"})          # not followable
        gone = d.run(container_labels("j3", 0))
        del d.containers.by_id[gone.id]                   # removed before it could be read
        d.event("destroy", gone)
        c = d.run(container_labels("j4", 0))
        wait_for(lambda: c.streams)
        progress(c, "j4", range(1, 3), 10.0)
        wait_for(lambda: len(records) == 1)
        d.remove(c)
        wait_for(lambda: len(exits) == 1)
        assert (exits[0].exit_code, exits[0].epochs, exits[0].removed) == (137, 2, True)
        assert tracker.errors == 1                        # the consumer's exception
    finally:
        tracker.stop()


def test_reconnects_after_the_daemon_drops_the_streams() -> None:
    d, got = FakeDocker(), Collect()
    tracker = got.tracker(d, reconnect_s=0.05).start()
    try:
        assert tracker.wait_connected(5)
        c = d.run(container_labels("j5", 0))
        wait_for(lambda: c.streams)
        progress(c, "j5", range(1, 2), time.time())
        wait_for(lambda: len(got.records) == 1)
        # The daemon restarts: every stream ends, the container keeps running.
        for s in d.event_streams + c.streams:
            s.q.put(OSError("connection reset"))
        c.streams = []
        wait_for(lambda: d.events_calls == 2 and len(c.logs_calls) == 2)
        assert c.logs_calls[1]["since"] >= c.lines[-1][0] - 1e-6     # resumes, not rereads
        progress(c, "j5", range(2, 3), time.time())
        late = d.run(container_labels("j6", 0))
        wait_for(lambda: len(got.records) == 2 and len(got.starts) == 2)
        assert [r.epoch for r in got.records] == [1, 2]
        late.exit(0)
        wait_for(lambda: len(got.exits) == 1)
    finally:
        tracker.stop()
    assert tracker.errors >= 1


def test_die_grace_closes_a_stream_that_does_not_end() -> None:
    d, got = FakeDocker(), Collect()
    tracker = got.tracker(d, die_grace_s=0.2).start()
    try:
        assert tracker.wait_connected(5)
        c = d.run(container_labels("j7", 0))
        wait_for(lambda: c.streams)
        stuck = c.streams
        c.streams = []                                    # the follow stream will not end
        c.running, c.finished = False, time.time()
        progress(c, "j7", range(1, 3), 50.0)              # only in the log, not the stream
        d.event("die", c, exitCode="143")
        wait_for(lambda: len(got.exits) == 1)
        assert stuck[0].closed and [r.epoch for r in got.records] == [1, 2]
        assert got.exits[0].exit_code == 143
        assert c.logs_calls[-1]["follow"] is False        # the rest read without follow
    finally:
        tracker.stop()


def test_queue_sinks_and_stop_before_start_of_streams() -> None:
    d = FakeDocker()
    q: queue.Queue = queue.Queue()
    with EpochTracker(q, client=d) as tracker:
        assert tracker.wait_connected(5)
        c = d.run(container_labels("j8", 0))
        wait_for(lambda: c.streams)
        progress(c, "j8", range(1, 2), 5.0)
        assert q.get(timeout=5).epoch == 1
    with pytest.raises(TypeError):
        EpochTracker(object(), client=d)
    with pytest.raises(RuntimeError):
        t = EpochTracker(q, client=d).start()
        try:
            t.start()
        finally:
            t.stop()


def test_a_restarted_container_is_read_from_its_new_start(monkeypatch: pytest.MonkeyPatch) -> None:
    d, got = FakeDocker(), Collect()
    c = d.run(container_labels("j9", 0), announce=False)
    c.finished = c.started - 0.3                    # the previous run ended 0.3 s before
    calls = []

    def flaky_client() -> FakeDocker:               # no daemon at first: retried
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("no daemon yet")
        return d

    monkeypatch.setattr("agents.tracker.default_client", flaky_client)
    tracker = EpochTracker(got.records.append, reconnect_s=0.05).start()
    try:
        assert tracker.wait_connected(5) and len(calls) == 2
        wait_for(lambda: c.logs_calls)
        assert c.logs_calls[0]["since"] == pytest.approx(c.finished, abs=1e-3)   # not its old lines
    finally:
        tracker.stop()
