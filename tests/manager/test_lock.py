"""One manager at a time, on both backends; a killed holder frees the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from andreas.manager.lock import LockHeld, acquire, make_lock
from andreas.store.engine import make_engine

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

ROOT = Path(__file__).resolve().parents[2]


def holder(db_url):
    p = subprocess.Popen([sys.executable, "-m", "tests.manager.lock_worker", db_url],
                         cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "locked"
    return p


def test_second_manager_cannot_lock_until_the_holder_is_killed(db_url):
    p = holder(db_url)
    engine = make_engine(db_url)
    lock = make_lock(engine)
    try:
        assert not lock.try_acquire(0)
        with pytest.raises(LockHeld, match="another manager holds the manager lease"):
            acquire(lock, "exit")
        stop = threading.Event()
        stop.set()
        assert acquire(lock, "wait", stop=stop) is False       # gave up when asked
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        assert lock.try_acquire(10)                            # freed by the holder's death
        lock.check()
        other = make_lock(make_engine(db_url))
        assert not other.try_acquire(0)
        lock.release()
        assert other.try_acquire(5)
        other.release()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        engine.dispose()


def test_holder_is_named(db_url):
    p = holder(db_url)
    engine = make_engine(db_url)
    try:
        text = make_lock(engine).holder()
        assert ("pid" in text and str(p.pid) in text) or "database connection" in text
    finally:
        p.kill()
        p.wait()
        engine.dispose()
