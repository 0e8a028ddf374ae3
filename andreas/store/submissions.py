"""Job rows written on behalf of people: a user's submission and cancellation, and the
profiler's record of one profiling run (a finished job with weight 0 and no attempt).

The checks of what a user typed live in :mod:`andreas.service.submit`; here are only the writes,
each in one transaction, so a refused submission stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from andreas.errors import AndreasError, InputError
from andreas.store.engine import Store
from andreas.store.jobs import TERMINAL, transition
from andreas.store.lookup import find_job_id, resolve_job_id
from andreas.store.models import Job, JobState
from andreas.store.nodes import Db


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


class JobIdTaken(AndreasError):
    """A job with the same id (ignoring case) exists; ``existing`` is its stored id."""

    def __init__(self, job_id: str, existing: str) -> None:
        super().__init__(f"job id {job_id!r}: taken by {existing!r}")
        self.job_id = job_id
        self.existing = existing


def insert_job(s: Session, job: NewJob) -> None:
    """Add the row in the caller's transaction (no check of the id)."""
    s.add(Job(id=job.id, image=job.image, command=list(job.command), env=dict(job.env),
              epochs=job.epochs, epochs_done=0, submit_s=job.submit_s, due_s=job.due_s,
              weight=job.weight, application=job.application, grace_s=job.grace_s,
              state=job.state, state_changed_s=job.submit_s, max_gpus=job.max_gpus,
              failures=0, reason=job.reason, gpu_milli=job.gpu_milli,
              gpu_memory_mib=job.gpu_memory_mib))


def add_job(store: Store, job: NewJob) -> None:
    """Store ``job`` in its own transaction; JobIdTaken when the id (ignoring case) is
    used, also when two submissions race (the unique key decides)."""
    try:
        with store.session() as s:
            existing = find_job_id(s, job.id)
            if existing is not None:
                raise JobIdTaken(job.id, existing)
            insert_job(s, job)
    except IntegrityError:
        raise JobIdTaken(job.id, job.id) from None


def cancel_job(db: Db, job_id: str, *, reason: str, now_s: float) -> tuple[str, JobState]:
    """Move the job to ``cancelled`` with ``reason`` in the caller's transaction; returns
    (stored id, the state it left). A finished job is an InputError; TransitionConflict
    when another writer moved it first (the caller may try again)."""
    stored = resolve_job_id(db, job_id)
    state = db.execute(select(Job.state).where(Job.id == stored)).scalar_one()
    if state in TERMINAL:
        raise InputError(f"job {stored}: already {state.value}; nothing to cancel")
    transition(db, stored, JobState.CANCELLED, expected=state, now_s=now_s)
    db.execute(update(Job).where(Job.id == stored).values(reason=reason)
               .execution_options(synchronize_session=False))
    return stored, state


def job_exists(db: Db, job_id: str) -> bool:
    """Whether a row has this id (the backend's comparison: MariaDB ignores case)."""
    return db.execute(select(Job.id).where(Job.id == job_id)).scalar_one_or_none() is not None


def record_run_end(db: Db, job_id: str, *, now_s: float, epochs_done: int) -> None:
    """A profiling run ended: its row's ``state_changed_s`` and ``epochs_done`` (the state
    stays what it is)."""
    db.execute(update(Job).where(Job.id == job_id)
               .values(state_changed_s=now_s, epochs_done=epochs_done)
               .execution_options(synchronize_session=False))
