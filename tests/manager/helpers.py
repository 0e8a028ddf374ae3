"""Rows, settings, a manual clock and checks shared by the manager tests."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
from sqlalchemy import select

from andreas.config import ExecutorSettings, ManagerSettings, Settings
from andreas.manager import Manager
from andreas.store import Job, JobAttempt, JobState, Node, NodeState, Store
from tests.manager.fakes import FakeExecutor
from tests.store import helpers as store_rows


class Clock:
    """A manual clock: ``clock()`` reads it, ``clock.advance(s)`` moves it."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


def settings(**manager) -> Settings:
    values = dict(policy="greedy", period_s=3600.0, poll_s=0.01, max_retries=2, seed=0,
                  restart_overhead_s=0.0, min_power_samples=3)
    values.update(manager)
    return Settings(db_url="sqlite://", db_url_source="test",
                    manager=ManagerSettings(**values),
                    executor=ExecutorSettings(stop_grace_s=30.0))


def add_node(store: Store, name: str, gpus: int = 2, gpu_type: str = "V100", *,
             state: NodeState = NodeState.UP, profiling: bool = False, fake: bool = True,
             unhealthy: tuple[int, ...] = ()) -> int:
    """The store helpers' node with the manager tests' defaults; returns its id."""
    return store_rows.add_node(store, gpus, gpu_type, name=name, state=state,
                               profiling=profiling, fake=fake, unhealthy=unhealthy,
                               power_limit_w=250.0)[1]


def add_job(store: Store, job_id: str, *, epochs: int = 10, due_s: float = 1e7,
            submit_s: float = 0.0, application: str = "resnet50", weight: float = 1.0,
            image: str = "registry.example/train:1", max_gpus: int | None = None,
            grace_s: float = 60.0, state: JobState = JobState.QUEUED,
            gpu_milli: int | None = None, gpu_memory_mib: int | None = None) -> str:
    """The store helpers' job with the manager tests' defaults."""
    return store_rows.add_job(store, id=job_id, epochs=epochs, due_s=due_s, submit_s=submit_s,
                              application=application, weight=weight, image=image,
                              max_gpus=max_gpus, grace_s=grace_s, state=state,
                              gpu_milli=gpu_milli, gpu_memory_mib=gpu_memory_mib)


def job(store: Store, job_id: str) -> Job:
    with store.session() as s:
        return s.get(Job, job_id)


def state_of(store: Store, job_id: str) -> JobState:
    return job(store, job_id).state


def attempts(store: Store, job_id: str) -> list[JobAttempt]:
    with store.session() as s:
        return list(s.scalars(select(JobAttempt).where(JobAttempt.job_id == job_id)
                              .order_by(JobAttempt.attempt)))


def node_state(store: Store, name: str) -> NodeState:
    with store.session() as s:
        return s.scalars(select(Node.state).where(Node.name == name)).one()


def make(store: Store, *, clock: Clock | None = None, executor: FakeExecutor | None = None,
         **manager) -> tuple[Manager, FakeExecutor, Clock]:
    clock = clock or Clock()
    executor = executor or FakeExecutor(clock)
    m = Manager(store, executor, settings(**manager), clock=clock,
                rng=np.random.default_rng(0))
    m.reconciler.observer.probe_backoff_s = 0.0
    return m, executor, clock


def dump(store: Store) -> tuple:
    """Everything the manager writes, for 'nothing changed' checks."""
    with store.session() as s:
        jobs = sorted((j.id, j.state.value, j.failures, j.reason, j.epochs_done,
                       j.predicted_cost) for j in s.scalars(select(Job)))
        att = sorted((a.job_id, a.attempt, a.node_id, tuple(a.gpu_ids), a.container_id,
                      a.start_s, a.end_s, a.exit_code, a.reason, a.stop_requested_s)
                     for a in s.scalars(select(JobAttempt)))
        nodes = sorted((n.name, n.state.value) for n in s.scalars(select(Node)))
    return jobs, att, nodes


def check_capacity(store: Store, executor: FakeExecutor) -> None:
    """No GPU is held beyond its whole (1000 milli-GPU: one whole-GPU job, or shares that
    add up to at most 1000), by open attempts or by running containers, on any node."""
    with store.session() as s:
        open_attempts = s.execute(select(JobAttempt.node_id, JobAttempt.gpu_ids,
                                         JobAttempt.gpu_milli)
                                  .where(JobAttempt.end_s.is_(None))).all()
        usable = {n: c for n, c in s.execute(select(Node.id, Node.gpu_count))}
    held: Counter = Counter()
    for node_id, ids, milli in open_attempts:
        for i in ids:
            held[(node_id, i)] += 1000 if milli is None else milli
    assert all(n <= 1000 for n in held.values()), held
    for node_id, i in held:
        assert 0 <= i < usable[node_id]
    for name in executor.nodes:
        uuids: Counter = Counter()
        for c in executor.running(name):
            for u in c.gpu_uuids:
                share = c.request.gpu_milli if c.request is not None else None
                uuids[u] += 1000 if share is None else share
        assert all(n <= 1000 for n in uuids.values()), uuids


__all__ = ["Clock", "add_job", "add_node", "attempts", "check_capacity", "dump", "job",
           "make", "node_state", "settings", "state_of"]


def wait_for(condition, timeout_s: float = 10.0, interval_s: float = 0.01) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return condition()
