"""The daemon: SIGTERM stops it cleanly (lock released, exit 0), the period timer
reschedules, --once does one pass, a second daemon refuses to run beside the first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from sqlalchemy import select

import pytest

from andreas.manager.daemon import run
from andreas.manager.lock import make_lock
from andreas.store import Decision, JobState
from tests.manager.fakes import FakeExecutor
from tests.manager.helpers import add_job, add_node, settings, state_of

ROOT = Path(__file__).resolve().parents[2]


def decisions(store) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(Decision.trigger).order_by(Decision.id)))


def wait_for(condition, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_sigterm_stops_the_daemon_cleanly(mstore, db_url):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j")
    p = subprocess.Popen([sys.executable, "-m", "tests.manager.daemon_worker", db_url],
                         cwd=ROOT, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert wait_for(lambda: state_of(mstore, "j") is JobState.RUNNING)
        # the period timer (0.2 s) reschedules while it runs
        assert wait_for(lambda: "period" in decisions(mstore))
        lock = make_lock(mstore.engine)
        assert not lock.try_acquire(0)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    assert "SIGTERM received" in err and "manager stopped" in err
    assert lock.try_acquire(5)            # released by the daemon (not only by its death)
    lock.release()
    assert state_of(mstore, "j") is JobState.RUNNING     # its container is left running


def test_once_and_second_daemon_refused(mstore, db_url):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j")
    base = settings(poll_s=0.05, lock="exit")
    cfg = type(base)(**{**base.__dict__, "db_url": db_url})
    ex = FakeExecutor()
    assert run(cfg, once=True, store=mstore, executor=ex, install_signals=False) == 0
    assert [t.split("+")[0] for t in decisions(mstore)] == ["start"] and ex.find("j").running
    stop = threading.Event()
    first = threading.Thread(target=run, args=(cfg,), kwargs=dict(
        store=mstore, executor=FakeExecutor(), stop=stop, install_signals=False))
    first.start()
    try:
        assert wait_for(lambda: len(decisions(mstore)) >= 2)
        from andreas.manager.lock import LockHeld
        try:
            run(cfg, store=mstore, executor=FakeExecutor(), install_signals=False)
        except LockHeld as e:
            assert "another manager holds the manager lease" in str(e)
        else:
            raise AssertionError("a second manager ran beside the first")
    finally:
        stop.set()
        first.join(30)
    assert not first.is_alive()
