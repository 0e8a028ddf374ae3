"""andreas/executor/events.py without Docker: Docker's times, typed events, and the one
event follower (back-off, resume, refresh, on_open, release, stop) against a scripted
client. The follower against a real dockerd: test_docker_events.py (the executor) and
tests/agents_docker/ (the agent's tracker)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from andreas.executor.events import ContainerEvent, EventFollower, docker_time

from ..docker_fakes import FakeStream



# --- times ---------------------------------------------------------------------------

def test_docker_times() -> None:
    assert docker_time("2026-11-22T13:50:17.372208480Z") == pytest.approx(
        1795355417.372208480, abs=1e-6)
    assert docker_time("2026-11-22T13:50:17Z") == 1795355417.0
    assert docker_time("2026-11-22T14:50:17.5+01:00") == 1795355417.5
    for bad in ("0001-01-01T00:00:00Z", "", "yesterday", None, 5):
        assert docker_time(bad) is None


def test_nanoseconds_are_kept_where_fromisoformat_would_cut_them() -> None:
    """Python 3.11's fromisoformat reads Docker's 9 digits and "Z" but keeps 6 digits."""
    cut = datetime.fromisoformat("2026-11-22T13:50:17.999999999Z").timestamp()
    assert cut == pytest.approx(1795355417.999999, abs=1e-7)
    assert docker_time("2026-11-22T13:50:17.999999999Z") == pytest.approx(
        1795355418.0, abs=1e-7)
    assert docker_time(" 2026-11-22T13:50:17.000000500Z\n") == pytest.approx(
        1795355417.0000005, abs=1e-7)


@pytest.mark.parametrize("text", [
    "2026-11-22T13:50:17",             # no zone: fromisoformat would take local time
    "2026-11-22 13:50:17Z",            # not RFC 3339's T
    "20261122T135017Z",                # ISO basic format
    "2026-13-22T13:50:17Z",            # no month 13
    "2026-11-22T13:50:17z",
    "1969-12-31T23:59:59Z",            # before 1970: never a container's time
    "2026-11-22T13:50:17Z trailing",
])
def test_what_is_not_a_docker_time_is_none(text: str) -> None:
    assert docker_time(text) is None


def test_events_are_typed() -> None:
    raw = {"Type": "container", "Action": "die", "id": "c1", "timeNano": 1795355417500000000,
           "Actor": {"ID": "c1", "Attributes": {"andreas.job": "j1", "exitCode": "143"}}}
    event = ContainerEvent.from_raw(raw)
    assert event == ContainerEvent(action="die", container_id="c1", time_s=1795355417.5,
                                   attributes={"andreas.job": "j1", "exitCode": "143"})
    assert event.exit_code == 143
    old = ContainerEvent.from_raw({"status": "start", "Actor": {"ID": "c2"}, "time": 7})
    assert (old.action, old.container_id, old.time_s, old.exit_code) == ("start", "c2", 7, None)
    assert ContainerEvent.from_raw({"Action": "start"}) is None       # no container
    assert ContainerEvent.from_raw("garbage") is None


# --- the follower --------------------------------------------------------------------

class Engine:
    """A client whose ``events`` calls are recorded; ``fail`` makes the next ones raise."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.streams: list[FakeStream] = []
        self.fail = 0
        self.closed = 0

    def events(self, *, decode: bool, filters: dict, since: int) -> FakeStream:
        self.calls.append(dict(decode=decode, filters=filters, since=since))
        if self.fail:
            self.fail -= 1
            raise ConnectionError("engine down")
        self.streams.append(FakeStream())
        return self.streams[-1]

    def close(self) -> None:
        self.closed += 1

    def send(self, action: str, cid: str, t: float) -> None:
        self.streams[-1].q.put({"Action": action, "id": cid, "timeNano": int(t * 1e9),
                                "Actor": {"ID": cid, "Attributes": {}}})


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def follower(engine: Engine, got: list[ContainerEvent], **kw: Any) -> EventFollower:
    options: dict[str, Any] = dict(name="test engine", thread_name="test-events",
                                   events=("start", "die"), backoff_s=(0.05, 0.2),
                                   healthy_s=0.0)
    options.update(kw)
    return EventFollower(lambda: engine, got.append, **options)


def test_events_arrive_typed_and_resume_from_the_last_seen(caplog) -> None:
    engine, got, opened = Engine(), [], []
    now = [1000.0]
    f = follower(engine, got, resume=True, replay_s=1.0, clock=lambda: now[0],
                 on_open=lambda: opened.append(len(engine.calls))).start()
    try:
        wait_for(lambda: opened == [1])
        assert engine.calls[0] == dict(decode=True, since=999, filters={
            "type": "container", "label": ["andreas.job"], "event": ["start", "die"]})
        engine.send("start", "c1", 1500.25)
        engine.send("die", "c1", 1501.5)
        wait_for(lambda: len(got) == 2)
        assert [(e.action, e.time_s) for e in got] == [("start", 1500.25), ("die", 1501.5)]
        now[0] = 2000.0
        caplog.set_level(logging.INFO, logger="andreas.executor")
        engine.streams[-1].q.put(OSError("connection reset"))
        wait_for(lambda: opened == [1, 2])
        assert engine.calls[1]["since"] == 1500            # the last event seen, less 1 s
        assert f.failures == 1 and f.streaming
        assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO]
        assert "test engine: no container events: connection reset" in caplog.messages[0]
    finally:
        f.stop()
        f.thread.join(2)
    assert not f.thread.is_alive() and engine.streams[-1].closed
    assert f.failures == 1                                  # a stop is not a failure


def test_back_off_without_resume_one_warning_per_outage(caplog) -> None:
    engine, got, released = Engine(), [], []
    engine.fail = 4
    now = [1000.0]
    caplog.set_level(logging.DEBUG, logger="andreas.executor")
    f = follower(engine, got, replay_s=2.0, clock=lambda: now[0], healthy_s=60.0,
                 release=released.append).start()
    try:
        t0 = time.monotonic()
        wait_for(lambda: f.streaming)
        elapsed = time.monotonic() - t0
        assert 0.05 + 0.1 + 0.2 + 0.2 <= elapsed < 2.0         # doubled, capped at 0.2
        assert (f.attempts, f.failures, len(released)) == (5, 4, 4)
        assert {c["since"] for c in engine.calls} == {998}      # always now - replay_s
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "engine down" in warnings[0].getMessage()
    finally:
        f.stop()
        f.thread.join(2)
    assert len(released) == 5                               # every stream's client


def test_refresh_reopens_at_once_and_on_open_failures_retry() -> None:
    engine, got = Engine(), []
    calls = []

    def on_open() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("listing failed")

    f = follower(engine, got, on_open=on_open, backoff_s=(0.05, 0.05)).start()
    try:
        wait_for(lambda: len(calls) == 2 and f.streaming)
        assert f.failures == 1 and engine.streams[0].closed
        first = engine.streams[-1]
        assert f.age() >= 0.0
        f.interrupt(refresh=True)
        wait_for(lambda: len(engine.streams) == 3 and f.streaming)
        assert first.closed and f.failures == 1
        engine.send("start", "c9", 5.0)
        wait_for(lambda: got)
        assert got[0].container_id == "c9"
    finally:
        f.stop()
        f.thread.join(2)
    assert not f.streaming and f.age() == 0.0


def test_a_failing_consumer_does_not_end_the_stream() -> None:
    engine, seen = Engine(), []

    def consumer(event: ContainerEvent) -> None:
        seen.append(event.container_id)
        if event.container_id == "bad":
            raise ValueError("consumer bug")

    f = EventFollower(lambda: engine, consumer, name="x", thread_name="test-events",
                      events=("start",)).start()
    try:
        wait_for(lambda: f.streaming)
        engine.send("start", "bad", 1.0)
        engine.send("start", "good", 2.0)
        wait_for(lambda: seen == ["bad", "good"])
        assert f.failures == 0 and len(engine.calls) == 1
    finally:
        f.stop()
        f.thread.join(2)
    assert not [t for t in threading.enumerate() if t.name == "test-events"]
