"""The manager lease on both backends: take, renew, expiry by the server's clock, and the
fence that makes every write of a manager check its token in its own transaction."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from andreas.store import JobState, open_store, transition
from andreas.store import lease
from andreas.store.lease import LeaseLost, install_fence

from .helpers import add_job


def fresh(store):
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE manager_lease SET holder = '', token = 0, expires_s = 0"))


def take(store, holder: str, ttl_s: float = 30.0) -> int | None:
    with store.engine.begin() as conn:
        return lease.take(conn, holder=holder, seen=lease.read(conn), ttl_s=ttl_s)


def test_take_renew_expire(store):
    fresh(store)
    first = take(store, "a")
    assert first == 1
    with store.engine.begin() as conn:
        state = lease.read(conn)
        assert state.holder == "a" and not state.expired and 25 < state.remaining_s <= 30
        assert lease.renew(conn, holder="a", token=first, ttl_s=0.0)
        assert lease.read(conn).expired            # renewed with no time left
        assert not lease.renew(conn, holder="b", token=first + 1, ttl_s=30)
    assert take(store, "b") == 2                   # expired: the caller may take it
    with store.engine.begin() as conn:
        assert not lease.renew(conn, holder="a", token=first, ttl_s=30)   # lost for good
        assert lease.give_up(conn, token=2)
        assert lease.read(conn).expires_s == 0


def test_of_two_takers_that_saw_the_same_lease_one_wins(store):
    fresh(store)
    with store.engine.connect() as conn:
        seen = lease.read(conn)
    got = []
    for holder in ("a", "b"):
        with store.engine.begin() as conn:
            got.append(lease.take(conn, holder=holder, seen=seen, ttl_s=30))
    assert got == [1, None]


def test_a_missing_row_is_inserted_by_the_first_taker(store):
    with store.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM manager_lease"))
    assert take(store, "a") == 1
    with store.engine.begin() as conn:
        assert lease.read(conn).holder == "a"


def test_fenced_writes_pass_with_the_token_and_roll_back_without(store, db_url):
    fresh(store)
    job = add_job(store, state=JobState.QUEUED)
    mine = take(store, "b", ttl_s=0.0)
    stale = open_store(db_url)           # manager B's own engine, fenced with its token
    remove = install_fence(stale.engine, lambda: mine)
    try:
        with stale.session() as s:
            transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)
        assert take(store, "a") == mine + 1           # A took the expired lease
        with pytest.raises(LeaseLost, match="held by a now"), stale.session() as s:
            s.execute(sa.text("SELECT 1"))            # reads are not fenced ...
            transition(s, job, JobState.PREEMPTING, expected=JobState.RUNNING)
        with stale.session() as s:
            assert s.execute(sa.text("SELECT state FROM jobs WHERE id = :j"),
                             {"j": job}).scalar() == "running"     # nothing written
    finally:
        remove()
        stale.dispose()


def test_each_transaction_is_fenced_once_before_its_first_write(store, db_url):
    """The fence's write holds the lease row to the transaction's end, so later writes of
    that transaction need no second check; every new transaction checks again, and so
    does a write after a savepoint that fenced (its rollback would undo the fence)."""
    from andreas.store.tables import jobs

    fresh(store)
    job = add_job(store, state=JobState.QUEUED)
    mine = take(store, "b")
    fenced = open_store(db_url)
    remove = install_fence(fenced.engine, lambda: mine)
    fences: list[str] = []

    @sa.event.listens_for(fenced.engine, "before_cursor_execute")
    def count(_conn, _cursor, statement, *_args):
        if statement.lstrip().upper().startswith("UPDATE MANAGER_LEASE"):
            fences.append(statement)

    def write(s, weight: float) -> None:
        s.execute(sa.update(jobs).where(jobs.c.id == job).values(weight=weight))

    try:
        with fenced.session() as s:
            write(s, 0.1)
            write(s, 0.2)
            s.execute(sa.text("SELECT 1"))
            write(s, 0.3)
        assert len(fences) == 1
        with fenced.session() as s:
            write(s, 0.4)
        assert len(fences) == 2
        with fenced.session() as s:
            with s.begin_nested():
                write(s, 0.5)
            write(s, 0.6)
        assert len(fences) == 4
    finally:
        remove()
        fenced.dispose()


def test_a_take_over_waits_for_a_fenced_transaction_in_flight(store, db_url):
    """Check and write are one transaction: a manager taking the lease over while the
    old holder's fenced transaction is open commits only after it, so the old holder's
    write is either entirely before the take-over or refused."""
    fresh(store)
    job = add_job(store, state=JobState.QUEUED)
    mine = take(store, "b", ttl_s=0.0)
    old = open_store(db_url)
    remove = install_fence(old.engine, lambda: mine)
    taken = threading.Event()
    order = []
    try:
        with old.session() as s:
            transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)   # fence, write

            def take_over():
                other = open_store(db_url)
                try:
                    take(other, "a")
                    order.append("taken")
                    taken.set()
                finally:
                    other.dispose()

            t = threading.Thread(target=take_over)
            t.start()
            assert not taken.wait(1.0)           # blocked by the open fenced transaction
            transition(s, job, JobState.PREEMPTING, expected=JobState.RUNNING)  # no 2nd fence
            assert not taken.wait(0.2)
            order.append("committed")
        t.join(30)
        assert order == ["committed", "taken"]
        with store.engine.begin() as conn:
            assert lease.read(conn).token == mine + 1
    finally:
        remove()
        old.dispose()


def test_expiry_follows_the_database_clock(store):
    fresh(store)
    # MariaDB's clock counts whole seconds: a 1 s lease taken at x.9 s read 0.1 s later
    # was already expired; 3 s leave the read 2 s, however loaded the machine.
    token = take(store, "a", ttl_s=3.0)
    with store.engine.connect() as conn:
        before = lease.read(conn)
    assert not before.expired and before.now_s == pytest.approx(time.time(), abs=5)
    time.sleep(4.1)
    with store.engine.connect() as conn:
        assert lease.read(conn).expired
    assert token == 1
