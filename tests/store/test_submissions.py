"""Job rows written for people, on both backends: ids unique ignoring case, cancellation
from any live state, lookup exact first."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from andreas.errors import InputError
from andreas.store import Job, JobState
from andreas.store.lookup import find_job_id, resolve_job_id
from andreas.store.submissions import (JobIdTaken, NewJob, add_job, cancel_job, job_exists,
                                       record_run_end)

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
