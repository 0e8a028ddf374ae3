"""Two managers, one lease: a manager that lost the lease acts on nothing it observed.

The race of the issue: manager B holds the lease and reads the store; its lease runs out
(a database outage) and manager A takes it and starts a job; B then lists the containers,
sees A's fresh container that its store read did not know, and would stop it as an
orphan. Both managers have their own engine (fenced with their own token) and share the
nodes' containers (one fake engine), as two manager hosts share a cluster. On both
backends.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import sqlalchemy as sa

from andreas.manager import Manager
from andreas.manager.lock import Lease, LeaseLost, acquire
from andreas.store import JobState, open_store
from andreas.store.lease import install_fence
from tests.manager.fakes import FakeExecutor
from tests.manager.helpers import Clock, add_job, add_node, dump, settings, state_of


class Racing:
    """B's view of the shared engine: ``hook`` runs once, before its first listing (every
    listing of that tick waits for it), so A acts between B's store read and B's look at
    the containers."""

    def __init__(self, inner: FakeExecutor) -> None:
        self.inner = inner
        self.hook = None
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def containers(self, node):
        with self._lock:
            hook, self.hook = self.hook, None
            if hook is not None:
                hook()
        return self.inner.containers(node)


def manager(db_url: str, executor, clock: Clock, *, fenced: bool):
    store = open_store(db_url)
    lease = Lease(store.engine, ttl_s=30.0)
    assert acquire(lease, "exit")
    remove = install_fence(store.engine, lease.fence_token) if fenced else (lambda: None)
    m = Manager(store, executor, settings(), clock=clock, rng=np.random.default_rng(0),
                fence=lease.check if fenced else None)
    return m, store, lease, remove


def expire(mstore) -> None:
    """B's lease ran out while the database was away (nobody renewed it)."""
    with mstore.engine.begin() as conn:
        conn.execute(sa.text("UPDATE manager_lease SET expires_s = 0"))


@pytest.mark.parametrize("fenced", [True, False], ids=["lease", "no-lease"])
def test_a_manager_that_lost_the_lease_stops_nothing_the_new_one_started(mstore, db_url,
                                                                          fenced):
    add_node(mstore, "a", gpus=1)
    add_node(mstore, "b", gpus=1)
    add_job(mstore, "first")
    engines = FakeExecutor()
    clock = Clock()
    racing = Racing(engines)
    b, b_store, b_lease, b_unfence = manager(db_url, racing, clock, fenced=True)
    opened = [b_store]
    try:
        b.start()
        assert state_of(mstore, "first") is JobState.RUNNING
        b.tick()
        add_job(mstore, "second")
        expire(mstore)
        a_executor = FakeExecutor()
        a_executor.nodes = engines.nodes          # the same engines, seen by A
        a, a_store, a_lease, a_unfence = manager(db_url, a_executor, clock, fenced=True)
        opened.append(a_store)
        if not fenced:                            # the old behaviour: nothing to check
            b.fence = None
            b_unfence()
        racing.hook = a.start                     # A starts "second" during B's tick
        before = None
        if fenced:
            with pytest.raises(LeaseLost, match="the manager lease is held by"):
                b.tick()
            before = dump(mstore)
        else:
            b.tick()
        second = engines.find("second")
        assert second is not None and second.request is not None     # A started it
        if fenced:
            assert second.running and second.signals == []
            assert state_of(mstore, "second") is JobState.RUNNING
            with pytest.raises(LeaseLost):                          # and it stays out
                b.tick()
            with pytest.raises(LeaseLost), b_store.session() as s:  # every write fenced
                s.execute(sa.text("SELECT 1"))
                from andreas.store.decisions import add_decision
                add_decision(s, t=0.0, trigger="period", policy="greedy", objective=None,
                             objective_name="none", seconds=0.0, plan={})
            assert dump(mstore) == before
            a.tick()                                                # A goes on
            assert engines.find("second").running
        else:                      # without a lease B stops what A just started: the bug
            assert second.signals == ["SIGTERM"]
        a_unfence()
        a_lease.release()
        a.close()
    finally:
        b.close()
        b_unfence()
        b_lease.release()
        for s in opened:
            s.dispose()
