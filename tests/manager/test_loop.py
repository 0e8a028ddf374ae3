"""The loop's wake-ups: a wake (container event, ``Manager.request``) makes the next tick
come long before ``poll_s``; a burst makes few ticks; failing ticks keep their back-off;
the daemon hands the executor the polled nodes and a wake that works."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from sqlalchemy import select

import pytest

from andreas.executor.base import NodeRef
from andreas.manager.daemon import run
from andreas.manager.loop import run_loop
from andreas.store import Decision, JobState, NodeState
from tests.manager.fakes import FakeExecutor
from tests.manager.helpers import add_job, add_node, make, settings, state_of, wait_for

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop


class LoopManager:
    """What run_loop uses of a Manager: settings, wakeup, start, tick (counted)."""

    def __init__(self, poll_s: float = 30.0, fail: bool = False) -> None:
        self.settings = SimpleNamespace(manager=SimpleNamespace(poll_s=poll_s,
                                                                period_s=3600.0))
        self.wakeup = threading.Event()
        self.prompt = threading.Event()
        self.started = threading.Event()
        self.fail = fail
        self.ticks = 0

    def start(self) -> None:
        self.started.set()

    def tick(self) -> None:
        self.ticks += 1
        if self.fail:
            raise RuntimeError("database away (test)")

    def wake(self, why: str = "") -> None:
        self.wakeup.set()

    def wake_now(self, why: str = "") -> None:
        self.prompt.set()
        self.wakeup.set()


def no_scheduler(manager, period_s):
    return SimpleNamespace(shutdown=lambda wait: None)


class Running:
    """run_loop in a thread; stopping it is asserted to be quick."""

    def __init__(self, manager, **kwargs) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=run_loop, args=(manager, self.stop),
                                       kwargs={"scheduler_factory": no_scheduler, **kwargs},
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)          # poll_s is 30 s: a stop must not wait for it
        assert not self.thread.is_alive()


def test_a_wake_makes_the_tick_come_long_before_the_poll():
    m = LoopManager(poll_s=30.0)
    with Running(m):
        assert m.started.wait(5)
        time.sleep(0.3)
        assert m.ticks == 0                  # nothing but the poll would tick now
        m.wake("a")
        assert wait_for(lambda: m.ticks == 1, 5)
        m.wake("b")
        assert wait_for(lambda: m.ticks == 2, 5)
        time.sleep(0.3)
        assert m.ticks == 2                  # each wake one tick, then quiet again


def test_a_burst_of_wakes_makes_few_ticks():
    m = LoopManager(poll_s=30.0)
    with Running(m):
        assert m.started.wait(5)
        for _ in range(100):                 # all at once: one tick (settle_s)
            m.wake("a")
        assert wait_for(lambda: m.ticks >= 1, 5)
        time.sleep(0.3)
        assert 1 <= m.ticks <= 2
        before, t0 = m.ticks, time.monotonic()
        for _ in range(100):                 # spread out: at most one per min_tick_s
            m.wake("a")
            time.sleep(0.005)
        time.sleep(0.3)
        elapsed = time.monotonic() - t0
        spread = m.ticks - before
        assert 1 <= spread <= elapsed / 0.1 + 2 and spread < 100


def test_a_submission_ticks_without_waiting_for_the_settle():
    m = LoopManager(poll_s=30.0)
    with Running(m, settle_s=30.0):          # an event's wake would wait 30 s
        assert m.started.wait(5)
        m.wake("container event")
        time.sleep(0.3)
        assert m.ticks == 0
        m.wake_now("submit")                 # what a submission's datagram does
        assert wait_for(lambda: m.ticks == 1, 5)
        assert not m.prompt.is_set()         # cleared by the tick: the next wake settles
        m.wake("container event")
        time.sleep(0.3)
        assert m.ticks == 1


def test_wakes_do_not_shorten_the_back_off_of_failing_ticks():
    m = LoopManager(poll_s=30.0, fail=True)
    with Running(m):
        assert m.started.wait(5)
        m.wake("a")
        assert wait_for(lambda: m.ticks == 1, 5)
        for _ in range(20):
            m.wake("a")
            time.sleep(0.02)
        time.sleep(0.3)
        assert m.ticks == 1                  # the back-off (60 s) holds


def test_request_wakes_the_loop_but_ticks_do_not_wake_themselves(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j")
    m, ex, _ = make(mstore, poll_s=30.0)
    m.start()                                # its own "start" trigger wakes nothing
    assert not m.wakeup.is_set()
    ticks = []
    real_tick = m.tick
    m.tick = lambda: ticks.append(real_tick())
    with Running(m):                         # run_loop's own start: one tick
        assert wait_for(lambda: len(ticks) == 1, 10)
        time.sleep(0.3)
        assert len(ticks) == 1
        m.request("period")                  # what the period timer does
        assert wait_for(lambda: len(ticks) == 2, 10)
        assert "period" in ticks[1].triggers and ticks[1].decision_id is not None
        time.sleep(0.3)
        assert len(ticks) == 2
    with mstore.session() as s:
        assert any("period" in t for t in s.scalars(select(Decision.trigger)))


class WatchingExecutor(FakeExecutor):
    """A fake engine that keeps what the daemon passed to ``watch``."""

    def __init__(self) -> None:
        super().__init__()
        self.watched = threading.Event()
        self.nodes_fn = self.wake_fn = self.stop_event = None

    def watch(self, nodes, wake, stop) -> None:
        self.nodes_fn, self.wake_fn, self.stop_event = nodes, wake, stop
        self.watched.set()


def settled(ex: FakeExecutor, *, quiet_s: float, timeout_s: float) -> bool:
    """No tick observed the engine for ``quiet_s``: whatever woke the manager has been
    handled, so the next tick comes from the next wake (or the poll)."""
    end = time.monotonic() + timeout_s
    seen, since = len(ex.calls_of("containers")), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.05)
        now = len(ex.calls_of("containers"))
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return True
    return False


def test_the_daemon_watches_the_polled_nodes_and_a_wake_notices_an_exit(mstore, db_url):
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "off", gpus=2, state=NodeState.DOWN)     # not polled, not watched
    add_job(mstore, "j")
    base = settings(poll_s=30.0, lock="exit")
    cfg = type(base)(**{**base.__dict__, "db_url": db_url})
    ex = WatchingExecutor()
    stop = threading.Event()
    daemon = threading.Thread(target=run, args=(cfg,), kwargs=dict(
        store=mstore, executor=ex, stop=stop, install_signals=False), daemon=True)
    daemon.start()
    try:
        assert ex.watched.wait(10)
        assert wait_for(lambda: state_of(mstore, "j") is JobState.RUNNING, 10)
        assert ex.nodes_fn() == [NodeRef(name="a", docker_endpoint="ssh://a")]
        assert settled(ex, quiet_s=1.0, timeout_s=20)   # the ticks the start caused are over
        ex.exit("j", 0)
        time.sleep(0.3)
        assert state_of(mstore, "j") is JobState.RUNNING     # the poll is 30 s away
        ex.wake_fn("a")
        assert wait_for(lambda: state_of(mstore, "j") is JobState.COMPLETED, 10)
        assert not ex.stop_event.is_set()
    finally:
        stop.set()
        daemon.join(10)
    assert not daemon.is_alive()
    assert ex.stop_event.is_set()                    # the watchers are told to stop
