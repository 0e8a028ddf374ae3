"""Job rows written for people, on both backends: ids unique ignoring case, cancellation
from any live state, lookup exact first."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from andreas.errors import InputError
from andreas.store import Job, JobState
from andreas.store.lookup import find_job_id, resolve_job_id
from andreas.store.submissions import (JobIdTaken, NewJob, add_job, cancel_job, insert_job,
                                       job_exists, record_run_end)

from .helpers import unique


def new(job_id: str, **kw) -> NewJob:
    values = dict(id=job_id, image="registry.example/train:1", epochs=5, submit_s=10.0,
                  due_s=3600.0, weight=1.0, application="resnet50", grace_s=60.0)
    values.update(kw)
    return NewJob(**values)


def test_a_job_is_stored_queued_and_its_id_is_unique_ignoring_case(store):
    job_id = unique("Job")
    add_job(store, new(job_id, command=("python", "t.py"), env={"A": "1"}, max_gpus=2))
    with store.session() as s:
        row = s.execute(select(Job).where(Job.id == job_id)).scalar_one()
        assert (row.state, row.state_changed_s, row.epochs_done, row.failures) == (
            JobState.QUEUED, 10.0, 0, 0)
        assert (row.command, row.env, row.max_gpus) == (["python", "t.py"], {"A": "1"}, 2)
        assert find_job_id(s, job_id.upper()) == job_id and job_exists(s, job_id)
        assert not job_exists(s, unique("other"))
    with pytest.raises(JobIdTaken) as err:
        add_job(store, new(job_id.lower()))
    assert err.value.existing == job_id


def test_the_database_itself_refuses_an_id_that_differs_only_in_case(store):
    """The unique key decides, not the read before the insert (issue 16: on SQLite two
    racing submissions of RACE2 and race2 were both stored)."""
    job_id = unique("Race")
    with store.session() as s:
        insert_job(s, new(job_id))
    with pytest.raises(IntegrityError), store.session() as s:
        insert_job(s, new(job_id.swapcase()))          # no read first: only the index
    with store.session() as s:
        assert s.execute(select(func.count()).select_from(Job)
                         .where(func.lower(Job.id) == job_id.lower())).scalar_one() == 1


def test_parallel_submissions_differing_in_case_store_one_job(store):
    job_id = unique("RACE")
    names = [job_id.upper() if i % 2 else job_id.lower() for i in range(20)]

    def submit(name: str) -> str:
        try:
            add_job(store, new(name))
            return "stored"
        except JobIdTaken:
            return "taken"

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(submit, names))
    assert outcomes.count("stored") == 1 and outcomes.count("taken") == 19
    with store.session() as s:
        assert s.execute(select(func.count()).select_from(Job)
                         .where(func.lower(Job.id) == job_id.lower())).scalar_one() == 1


def test_resolve_names_a_missing_job(store):
    with pytest.raises(InputError, match="^job nope-x: no such job"):
        with store.session() as s:
            resolve_job_id(s, "nope-x")


def test_cancel_from_a_live_state_and_not_from_a_final_one(store):
    job_id = unique("c")
    add_job(store, new(job_id))
    with store.session() as s:
        assert cancel_job(s, job_id.upper(), reason="not needed", now_s=20.0) == (
            job_id, JobState.QUEUED)
    with store.session() as s:
        row = s.execute(select(Job.state, Job.reason).where(Job.id == job_id)).one()
    assert tuple(row) == (JobState.CANCELLED, "not needed")
    with pytest.raises(InputError, match=f"^job {job_id}: already cancelled"):
        with store.session() as s:
            cancel_job(s, job_id, reason="again", now_s=30.0)


def test_a_profiling_run_records_its_end(store):
    job_id = unique("p")
    add_job(store, new(job_id, state=JobState.COMPLETED, weight=0.0, reason="profiling"))
    with store.session() as s:
        record_run_end(s, job_id, now_s=99.0, epochs_done=3)
    with store.session() as s:
        row = s.execute(select(Job.state, Job.state_changed_s, Job.epochs_done)
                        .where(Job.id == job_id)).one()
    assert tuple(row) == (JobState.COMPLETED, 99.0, 3)
