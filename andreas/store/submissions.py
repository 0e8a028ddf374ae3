"""Job rows written on behalf of people: a user's submission and cancellation, and the
profiler's record of one profiling run (a finished job with weight 0 and no attempt).

The checks of what a user typed live in :mod:`andreas.service.submit`; here are only the writes,
each in one transaction, so a refused submission stores nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy import insert, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from andreas.errors import AndreasError, InputError
from andreas.store.engine import Store
from andreas.store.lookup import find_job_id, resolve_job_id
from andreas.store.nodes import Db
from andreas.store.owners import access, require, signalled
from andreas.store.tables import JobState
from andreas.store.tables import jobs as Job


@dataclass(frozen=True, kw_only=True)
class NewJob:
    """A ``jobs`` row as it is first stored (no epoch done, no failure yet)."""

    id: str
    image: str
    epochs: int
    submit_s: float
    due_s: float
    weight: float
    application: str
    grace_s: float
    state: JobState = JobState.QUEUED
    command: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    max_gpus: int | None = None
    reason: str | None = None
    gpu_milli: int | None = None          # a share of one GPU (1-999); None: whole GPUs
    gpu_memory_mib: int | None = None
    owner: str | None = None              # add_job fills in the caller (store.owners)


class JobIdTaken(AndreasError):
    """A job with the same id (ignoring case) exists; ``existing`` is its stored id."""

    def __init__(self, job_id: str, existing: str) -> None:
        super().__init__(f"job id {job_id!r}: taken by {existing!r}")
        self.job_id = job_id
        self.existing = existing


def insert_job(s: Db, job: NewJob) -> None:
    """Add the row in the caller's transaction (no check of the id)."""
    s.execute(insert(Job).values(
        id=job.id, image=job.image, command=list(job.command), env=dict(job.env),
        epochs=job.epochs, epochs_done=0, submit_s=job.submit_s, due_s=job.due_s,
        weight=job.weight, application=job.application, grace_s=job.grace_s,
        state=job.state, state_changed_s=job.submit_s, max_gpus=job.max_gpus,
        failures=0, reason=job.reason, gpu_milli=job.gpu_milli,
        gpu_memory_mib=job.gpu_memory_mib,
        owner=job.owner if job.owner is not None else access(s).user))


def add_job(store: Store, job: NewJob) -> str:
    """Store ``job`` in its own transaction, owned by the caller; returns the owner.
    JobIdTaken when the id (ignoring case) is used, also when two submissions race (the
    unique key decides). A MariaDB submitter's job goes through ``andreas_submit``, which
    checks every value again and stores the submission time of the server. Core only:
    a submission does not import the ORM."""
    try:
        with store.begin() as s:
            who = access(s)
            if who.restricted:
                _call_submit(s, job)
                return who.user
            existing = find_job_id(s, job.id)
            if existing is not None:
                raise JobIdTaken(job.id, existing)
            insert_job(s, replace(job, owner=who.user))
            return who.user
    except IntegrityError:
        raise JobIdTaken(job.id, job.id) from None


def _call_submit(s: Db, job: NewJob) -> None:
    if job.state is not JobState.QUEUED or job.reason is not None:
        raise InputError(f"job {job.id}: a submitter's job starts queued, without a reason")
    params = dict(id=job.id, image=job.image, command=json.dumps(list(job.command)),
                  env=json.dumps(dict(job.env)), epochs=job.epochs, due_s=job.due_s,
                  weight=job.weight, application=job.application, grace_s=job.grace_s,
                  max_gpus=job.max_gpus, gpu_milli=job.gpu_milli,
                  gpu_memory_mib=job.gpu_memory_mib)
    try:
        s.execute(text("CALL andreas_submit(:id, :image, :command, :env, :epochs, :due_s, "
                       ":weight, :application, :grace_s, :max_gpus, :gpu_milli, "
                       ":gpu_memory_mib)"), params)
    except IntegrityError:
        raise
    except DBAPIError as e:
        refusal = signalled(e)
        if refusal is None:
            raise
        raise refusal from None


def cancel_job(db: Db, job_id: str, *, reason: str, now_s: float) -> tuple[str, JobState]:
    """Move the job to ``cancelled`` with ``reason`` in the caller's transaction; returns
    (stored id, the state it left). NotPermitted unless the caller owns the job or is an
    operator (a MariaDB submitter: checked by ``andreas_cancel``); a finished job is an
    InputError; TransitionConflict when another writer moved it first (the caller may try
    again)."""
    from andreas.store.jobs import TERMINAL, transition

    who = access(db)
    if who.restricted:
        return _call_cancel(db, job_id, reason)
    stored = resolve_job_id(db, job_id)
    state, owner = db.execute(select(Job.c.state, Job.c.owner)
                              .where(Job.c.id == stored)).one()
    require(who, stored, owner, "cancel")
    if state in TERMINAL:
        raise InputError(f"job {stored}: already {state.value}; nothing to cancel")
    transition(db, stored, JobState.CANCELLED, expected=state, now_s=now_s)
    db.execute(update(Job).where(Job.c.id == stored).values(reason=reason))
    return stored, state


def _call_cancel(db: Db, job_id: str, reason: str) -> tuple[str, JobState]:
    try:
        row = db.execute(text("CALL andreas_cancel(:id, :reason)"),
                         {"id": job_id, "reason": reason}).one()
    except DBAPIError as e:
        refusal = signalled(e)
        if refusal is None:
            raise
        raise refusal from None
    return str(row.id), JobState(row.was)


def job_exists(db: Db, job_id: str) -> bool:
    """Whether a row has this id (the backend's comparison: MariaDB ignores case)."""
    return db.execute(select(Job.c.id).where(Job.c.id == job_id)).scalar_one_or_none() is not None


def record_run_end(db: Db, job_id: str, *, now_s: float, epochs_done: int) -> None:
    """A profiling run ended: its row's ``state_changed_s`` and ``epochs_done`` (the state
    stays what it is)."""
    db.execute(update(Job).where(Job.c.id == job_id)
               .values(state_changed_s=now_s, epochs_done=epochs_done))
