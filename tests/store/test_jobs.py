"""The job state machine on both backends: allowed and forbidden moves, and races."""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import threading
from collections import Counter

import pytest
import sqlalchemy as sa
from sqlalchemy import select

from andreas.errors import InputError
from andreas.store import (ALLOWED, TERMINAL, InvalidTransition, Job, JobAttempt, JobState,
                           PowerRow, TransitionConflict, insert_power_samples,
                           mean_node_power, transition)

from .helpers import add_job, add_node
from .race_worker import race

PAIRS = list(itertools.product(JobState, JobState))


def state_of(store, job_id: str) -> JobState:
    with store.session() as s:
        return s.execute(select(Job.state).where(Job.id == job_id)).scalar_one()


def test_the_table_is_the_documented_machine():
    assert ALLOWED[JobState.QUEUED] == {JobState.RUNNING, JobState.PROFILING, JobState.FAILED,
                                        JobState.CANCELLED}
    assert ALLOWED[JobState.PROFILING] == {JobState.PREEMPTED, JobState.COMPLETED,
                                           JobState.FAILED, JobState.CANCELLED}
    assert TERMINAL == {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED}
    for old, targets in ALLOWED.items():
        assert old not in targets, f"{old} -> itself must not be a transition"


def test_every_pair_is_allowed_or_refused_as_the_table_says(store):
    """Walk the job to each old state by allowed moves, then try the new one."""
    path_to = {JobState.QUEUED: [], JobState.RUNNING: [JobState.RUNNING],
               JobState.PREEMPTING: [JobState.RUNNING, JobState.PREEMPTING],
               JobState.PREEMPTED: [JobState.RUNNING, JobState.PREEMPTED],
               JobState.COMPLETED: [JobState.RUNNING, JobState.COMPLETED],
               JobState.FAILED: [JobState.RUNNING, JobState.FAILED],
               JobState.CANCELLED: [JobState.CANCELLED],
               JobState.PROFILING: [JobState.PROFILING]}
    for old, new in PAIRS:
        job = add_job(store)
        with store.session() as s:
            for step in path_to[old]:
                transition(s, job, step)
        assert state_of(store, job) is old
        if new in ALLOWED[old]:
            with store.session() as s:
                assert transition(s, job, new, now_s=123.0) is old
            assert state_of(store, job) is new
        else:
            with pytest.raises(InvalidTransition) as err, store.session() as s:
                transition(s, job, new)
            assert str(err.value).startswith(f"job {job}: cannot go from {old.value} to "
                                             f"{new.value}")
            assert state_of(store, job) is old


def test_state_change_is_stamped_and_commits_with_the_callers_work(store):
    name, node_id, _ = add_node(store, gpus=2)
    job = add_job(store)
    with pytest.raises(RuntimeError), store.session() as s:
        transition(s, job, "running", now_s=50.0)
        s.add(JobAttempt(job_id=job, attempt=1, node_id=node_id, gpu_ids=[0, 1]))
        raise RuntimeError("executor failed to start the container")
    assert state_of(store, job) is JobState.QUEUED       # rolled back together
    with store.session() as s:
        transition(s, job, JobState.RUNNING, now_s=60.0)
        s.add(JobAttempt(job_id=job, attempt=1, node_id=node_id, gpu_ids=[0, 1]))
    with store.session() as s:
        row = s.get(Job, job)
        assert (row.state, row.state_changed_s) == (JobState.RUNNING, 60.0)
        assert [a.gpu_ids for a in row.attempts] == [[0, 1]]


def test_orm_object_in_the_session_sees_the_new_state(store):
    job = add_job(store)
    with store.session() as s:
        obj = s.get(Job, job)
        assert obj.state is JobState.QUEUED
        transition(s, job, JobState.CANCELLED)
        assert obj.state is JobState.CANCELLED


def test_unknown_job_and_unknown_state_are_input_errors(store):
    with pytest.raises(InputError, match="job nope: no such job"), store.session() as s:
        transition(s, "nope", JobState.RUNNING)
    job = add_job(store)
    with pytest.raises(InputError, match="unknown job state 'sleeping'"), store.session() as s:
        transition(s, job, "sleeping")


def test_expected_state_mismatch_is_a_conflict_naming_both_states(store):
    job = add_job(store)
    with store.session() as s:
        transition(s, job, JobState.CANCELLED)
    with pytest.raises(TransitionConflict, match=f"job {job}: expected queued, found cancelled; "
                                                 "not moved to running"), store.session() as s:
        transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)


def test_the_state_column_refuses_values_outside_the_machine(store):
    job = add_job(store)
    with pytest.raises(sa.exc.DBAPIError) as err, store.session() as s:
        s.connection().exec_driver_sql(
            f"UPDATE jobs SET state = 'sleeping' WHERE id = '{job}'")
    assert "job_state" in str(err.value.orig)         # the CHECK constraint ck_jobs_job_state
    assert state_of(store, job) is JobState.QUEUED


def test_a_writer_that_read_the_old_state_loses_to_the_one_that_committed(store):
    """B reads queued while A's move is still uncommitted; A commits; B's conditional
    UPDATE then matches no row, and B is told who won."""
    job = add_job(store)
    a_moved, a_may_commit = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []

    def writer_a():
        with store.session() as s:
            transition(s, job, JobState.RUNNING)
            a_moved.set()
            a_may_commit.wait(30)

    def writer_b():
        try:
            with store.session() as s:
                transition(s, job, JobState.CANCELLED)   # allowed from queued, not decided yet
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001
            outcome.append(e)

    a = threading.Thread(target=writer_a)
    a.start()
    assert a_moved.wait(30)
    b = threading.Thread(target=writer_b)
    b.start()
    b.join(1.0)                # B has read "queued" and now waits for A's lock
    assert b.is_alive()
    a_may_commit.set()
    a.join()
    b.join()
    assert isinstance(outcome[0], TransitionConflict), outcome
    assert str(outcome[0]) == (f"job {job}: another writer moved it from queued to running "
                               "first; not moved to cancelled")
    assert state_of(store, job) is JobState.RUNNING


def test_threads_race_queued_to_running_exactly_one_wins(store):
    workers, jobs = 8, [add_job(store) for _ in range(10)]
    barrier = threading.Barrier(workers)
    outcomes: list[tuple[str, str]] = []
    lock = threading.Lock()

    def worker():
        for job in jobs:
            barrier.wait(timeout=60)
            try:
                with store.session() as s:
                    transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)
                result = "won"
            except TransitionConflict:
                result = "conflict"
            except Exception as e:  # noqa: BLE001
                result = f"error: {type(e).__name__}: {e}"
            with lock:
                outcomes.append((job, result))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    per_job = {job: Counter(r for j, r in outcomes if j == job) for job in jobs}
    for job, counts in per_job.items():
        assert counts == Counter({"won": 1, "conflict": workers - 1}), (job, counts)
        assert state_of(store, job) is JobState.RUNNING


@pytest.mark.slow
def test_processes_race_queued_to_running_exactly_one_wins(store, db_url):
    workers, jobs = 6, [add_job(store) for _ in range(5)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=race, args=(db_url, jobs, barrier, results))
             for _ in range(workers)]
    for p in procs:
        p.start()
    outcomes = []
    try:
        for _ in range(workers * len(jobs)):
            outcomes.append(results.get(timeout=120))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    for job in jobs:
        counts = Counter(r for j, r in outcomes if j == job)
        assert counts == Counter({"won": 1, "conflict": workers - 1}), (job, counts)
        assert state_of(store, job) is JobState.RUNNING


def test_agents_insert_while_the_manager_moves_jobs(store):
    """Sample writers and a job-state writer at once: no lost rows, no deadlock errors."""
    name, node_id, gpu_ids = add_node(store, gpus=4)
    jobs = [add_job(store) for _ in range(20)]
    errors: queue.Queue = queue.Queue()
    per_writer, batches = 200, 10

    def agent(k: int):
        try:
            for b in range(batches):
                rows = [PowerRow(gpu_ids[i % 4], 1e6 + k * 1e5 + b * 1e3 + i // 4, node_id, 4,
                                 200.0, 1000) for i in range(per_writer)]
                with store.session() as s:
                    insert_power_samples(s, rows)
        except Exception as e:  # noqa: BLE001
            errors.put(e)

    def manager():
        try:
            for job in jobs:
                with store.session() as s:
                    transition(s, job, JobState.RUNNING, expected=JobState.QUEUED)
                    mean_node_power(s, name, 4, 0, 2e6)
                with store.session() as s:
                    transition(s, job, JobState.COMPLETED)
        except Exception as e:  # noqa: BLE001
            errors.put(e)

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(3)]
    threads.append(threading.Thread(target=manager))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors.empty(), errors.get()
    with store.session() as s:
        power = mean_node_power(s, name, 4, 0, 2e6)
    assert power.samples == 3 * batches * per_writer
    assert all(state_of(store, j) is JobState.COMPLETED for j in jobs)
