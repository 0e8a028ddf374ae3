"""The loop through a database outage: a cheap probe (the lease's renewal) instead of an
ever longer back-off, one line when the database goes and one when it is back, the first
tick as soon as it answers, and a lease lost meanwhile ends the loop."""

from __future__ import annotations

import logging
import threading
import time

import pymysql
from sqlalchemy.exc import OperationalError

import pytest

from andreas.manager.loop import PROBE, run_loop
from andreas.store.lease import LeaseLost
from tests.manager.helpers import wait_for
from tests.manager.test_loop import LoopManager, no_scheduler


def away() -> OperationalError:
    return OperationalError("SELECT 1", {}, pymysql.err.OperationalError(
        2003, "Can't connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused)"))


class Database:
    """Up or down; the manager's ticks and the lease's checks see the same one."""

    def __init__(self) -> None:
        self.down = False
        self.lost = False
        self.checks = 0

    def use(self) -> None:
        if self.down:
            raise away()


class Manager(LoopManager):
    def __init__(self, db: Database) -> None:
        super().__init__(poll_s=0.05)
        self.db = db

    def tick(self) -> None:
        self.ticks += 1
        self.db.use()


class Lock:
    def __init__(self, db: Database) -> None:
        self.db = db

    def check(self) -> None:
        self.db.checks += 1
        self.db.use()
        if self.db.lost:
            raise LeaseLost("the manager lease is held by pid 7 on b now (test)")


def loop(m, lock, stop, errors):
    try:
        run_loop(m, stop, lock=lock, scheduler_factory=no_scheduler)
    except BaseException as e:   # noqa: BLE001 - the test looks at it
        errors.append(e)


@pytest.mark.slow
def test_an_outage_is_probed_and_left_as_soon_as_the_database_answers(caplog):
    caplog.set_level(logging.INFO, logger="andreas.manager")
    db = Database()
    m, lock, stop, errors = Manager(db), Lock(db), threading.Event(), []
    t = threading.Thread(target=loop, args=(m, lock, stop, errors), daemon=True)
    t.start()
    try:
        assert wait_for(lambda: m.ticks >= 3, 5)
        db.down = True
        assert wait_for(lambda: db.checks >= 3, 10)           # probing, not ticking
        ticks_while_down = m.ticks
        time.sleep(PROBE.max_s)
        assert m.ticks == ticks_while_down                    # no tick until it answers
        probes = db.checks
        db.down = False
        assert wait_for(lambda: m.ticks > ticks_while_down + 2, PROBE.max_s + 3)
        assert db.checks > probes                              # the lease was renewed first
    finally:
        stop.set()
        t.join(5)
    assert not errors and not t.is_alive()
    lines = [r for r in caplog.records if r.name == "andreas.manager"]
    assert [r.getMessage().split(" (")[0] for r in lines if r.levelno >= logging.WARNING] \
        == ["database unreachable"]                           # one line for the outage
    assert sum("database answers again" in r.getMessage() for r in lines) == 1
    assert not any(r.exc_info for r in lines)                 # and no traceback


def test_a_lease_lost_during_the_outage_ends_the_loop_before_any_tick():
    db = Database()
    m, lock, stop, errors = Manager(db), Lock(db), threading.Event(), []
    t = threading.Thread(target=loop, args=(m, lock, stop, errors), daemon=True)
    t.start()
    try:
        assert wait_for(lambda: m.ticks >= 2, 5)
        db.down = True
        assert wait_for(lambda: db.checks >= 2, 10)
        ticks = m.ticks
        db.lost = True                    # another manager took it while we were away
        db.down = False
        t.join(10)
    finally:
        stop.set()
        t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], LeaseLost)
    assert m.ticks == ticks


def test_other_tick_errors_log_one_traceback_then_one_line_each(caplog):
    caplog.set_level(logging.INFO, logger="andreas.manager")
    m = LoopManager(poll_s=0.01, fail=True)
    stop, errors = threading.Event(), []
    t = threading.Thread(target=loop, args=(m, None, stop, errors), daemon=True)
    t.start()
    try:
        assert wait_for(lambda: m.ticks >= 4, 10)
    finally:
        stop.set()
        t.join(5)
    failed = [r for r in caplog.records if "tick failed" in r.getMessage()]
    assert len(failed) >= 3
    assert failed[0].exc_info and not any(r.exc_info for r in failed[1:])
    assert "database away (test)" in failed[1].getMessage()


def test_the_probe_without_a_lease_is_a_select(monkeypatch):
    """No lease (an in-memory store): the probe is ``SELECT 1`` through the store."""
    import andreas.manager.loop as loop_module

    calls = []
    db = Database()
    db.down = True

    def connect(engine):
        calls.append(engine)
        if len(calls) >= 2:
            db.down = False
        db.use()

    monkeypatch.setattr(loop_module, "connect", connect)
    m = Manager(db)
    m.store = type("S", (), {"engine": "the engine"})()
    stop = threading.Event()
    assert loop_module.wait_for_database(m, stop, None, "down") is True
    assert calls == ["the engine", "the engine"]
