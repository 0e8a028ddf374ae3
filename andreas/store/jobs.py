"""The job state machine: the allowed transitions, in one place, and the one way to move.

::

    queued ──► running ──► preempting ──► preempted ──► running ...
       │          │  ╲           │             │
       ▼          ▼   ╲──────────┼──► completed / failed / cancelled (terminal)
    cancelled   preempted        ▼
                (killed,      completed / failed / cancelled
                 resumable)

    queued / preempted ──► profiling ──► preempted (measured, or profiling failed)
                              │
                              │    (stays profiling between its GPU counts' runs)
                              ▼
                    completed / failed / cancelled

``profiling``: the Job Manager runs the job of an application nobody measured on a
profiling node, a few epochs per GPU count, before any policy plans it
(:mod:`andreas.manager.profiling`); between two GPU counts it stays ``profiling``.

:func:`transition` is an atomic conditional ``UPDATE jobs SET state = new WHERE id = :job
AND state = :old``: of two writers that both saw ``queued``, exactly one moves the job
to ``running``; the other gets :class:`TransitionConflict`. It runs in the caller's
transaction (so the state change and, say, the new job attempt commit together); on
MariaDB the updated row stays locked until that transaction ends.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from sqlalchemy import Connection, bindparam, func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from andreas.errors import InputError
from andreas.store.errors import InvalidTransition, TransitionConflict
from andreas.store.models import Job, JobState
from andreas.store.nodes import run

Q, R, PG, PD = JobState.QUEUED, JobState.RUNNING, JobState.PREEMPTING, JobState.PREEMPTED
P = JobState.PROFILING
C, F, X = JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED

ALLOWED: Mapping[JobState, frozenset[JobState]] = {
    # queued -> failed: its image could not be had (see the manager's image_pull_grace_s).
    Q: frozenset({R, P, F, X}),
    # running -> preempted: the container died resumably (e.g. exit 137 with a checkpoint)
    # without a stop request; -> failed: a failure past the retry limit.
    R: frozenset({PG, PD, C, F, X}),
    # A job may finish, fail or be cancelled while its stop request is pending.
    PG: frozenset({PD, C, F, X}),
    PD: frozenset({R, P, F, X}),
    # profiling -> preempted: measured (or profiling failed), planned from its checkpoint.
    # Between two GPU counts' runs the job stays profiling (no transition).
    P: frozenset({PD, C, F, X}),
    C: frozenset(),
    F: frozenset(),
    X: frozenset(),
}
TERMINAL = frozenset(s for s, targets in ALLOWED.items() if not targets)
# A container should exist for the job (its open attempt runs or is being stopped).
LIVE = (R, PG, P)
# Waiting for GPUs: planned by the manager, started when the target places them.
WAITING = (Q, PD)
# Jobs the manager plans or watches.
ACTIVE = (Q, R, PG, PD, P)


def allowed(old: JobState, new: JobState) -> bool:
    return new in ALLOWED[old]


def check_transition(job_id: str, old: JobState, new: JobState) -> None:
    """InvalidTransition naming the job, both states and what is allowed from ``old``."""
    if not allowed(old, new):
        targets = ", ".join(s.value for s in JobState if s in ALLOWED[old]) or "nothing (final)"
        raise InvalidTransition(f"job {job_id}: cannot go from {old.value} to {new.value} "
                                f"(allowed from {old.value}: {targets})")


def as_state(value: JobState | str) -> JobState:
    if isinstance(value, JobState):
        return value
    try:
        return JobState(value)
    except ValueError:
        raise InputError(f"unknown job state {value!r} (known: "
                         f"{', '.join(s.value for s in JobState)})") from None


def transition(db: Session | Connection, job_id: str, new: JobState | str, *,
               expected: JobState | str | None = None, now_s: float | None = None) -> JobState:
    """Move a job to ``new``; returns the state it left.

    ``expected``: the state the caller based its decision on (e.g. the scheduler started a
    job it saw queued); if the job is elsewhere by now this is a TransitionConflict, not a
    silent move from another state. Raises InputError (no such job), InvalidTransition
    (not allowed from the current state) or TransitionConflict (another writer won).
    """
    new = as_state(new)
    old = db.execute(select(Job.state).where(Job.id == job_id)).scalar_one_or_none()
    if old is None:
        raise InputError(f"job {job_id}: no such job")
    if expected is not None and old is not as_state(expected):
        raise TransitionConflict(f"job {job_id}: expected {as_state(expected).value}, found "
                                 f"{old.value}; not moved to {new.value}")
    check_transition(job_id, old, new)
    stamp = time.time() if now_s is None else now_s
    result = run(db, update(Job).where(Job.id == job_id, Job.state == old)
                 .values(state=new, state_changed_s=stamp)
                 .execution_options(synchronize_session=False))
    if result.rowcount != 1:
        # A locking read sees the latest committed state (a plain read on MariaDB would
        # still show this transaction's snapshot).
        now = db.execute(select(Job.state).where(Job.id == job_id)
                         .with_for_update()).scalar_one_or_none()
        seen = now.value if now is not None else "deleted"
        raise TransitionConflict(f"job {job_id}: another writer moved it from {old.value} to "
                                 f"{seen} first; not moved to {new.value}")
    if isinstance(db, Session):
        job = db.identity_map.get(identity_key(Job, job_id))
        if job is not None:
            db.expire(job, ["state", "state_changed_s"])
    return old


def record(db: Session | Connection, job_id: str, *, failures: int | None = None,
           reason: str | None = None, epochs_done: int | None = None) -> None:
    """What the manager learned about a job besides its state (the given fields only)."""
    values: dict[str, object] = {}
    if failures is not None:
        values["failures"] = failures
    if reason is not None:
        values["reason"] = reason
    if epochs_done is not None:
        values["epochs_done"] = epochs_done
    if values:
        db.execute(update(Job).where(Job.id == job_id).values(**values)
                   .execution_options(synchronize_session=False))


def fill_predicted_cost(db: Session | Connection, costs: Mapping[str, float]) -> None:
    """``jobs.predicted_cost`` at a job's first assignment: set where still NULL (one
    statement for all jobs)."""
    rows = [{"b_id": job_id, "b_cost": cost} for job_id, cost in costs.items()]
    if rows:
        conn = db.connection() if isinstance(db, Session) else db
        conn.execute(update(Job).where(Job.id == bindparam("b_id"), Job.predicted_cost.is_(None))
                     .values(predicted_cost=bindparam("b_cost")), rows)


def count_by_state(db: Session | Connection) -> dict[JobState, int]:
    """How many jobs are in each state (every state, 0 where none): the metrics exporter."""
    counts = dict.fromkeys(JobState, 0)
    for state, n in db.execute(select(Job.state, func.count()).group_by(Job.state)):
        counts[state] = int(n)
    return counts
