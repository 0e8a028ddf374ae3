"""Job attempts (one container each): the only writers of ``job_attempts`` rows.

Each function runs in the caller's transaction, so that, e.g., an attempt and its job's
move to ``running`` commit together (:func:`andreas.store.jobs.transition`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from andreas.limits import REASON_CHARS
from andreas.store.errors import TransitionConflict
from andreas.store.models import JobAttempt
from andreas.store.nodes import Db, run
from andreas.store.owners import attempts_table


def open_attempt(s: Session, *, job_id: str, attempt: int, node_id: int,
                 gpu_ids: Sequence[int], decision_id: int | None,
                 gpu_milli: int | None = None, profiling: bool = False,
                 power_limit_w: float | None = None) -> int:
    """A new attempt row (no container yet); its id. TransitionConflict when the job
    already has attempt number ``attempt`` (another writer started it first).
    ``gpu_milli``: the share of its one GPU the attempt holds (None: whole GPUs);
    ``profiling``: a run of the manager's automatic profiling; ``power_limit_w``: the GPUs'
    power limit the plan chose (None: the default), which the node's agent applies."""
    row = JobAttempt(job_id=job_id, attempt=attempt, node_id=node_id, gpu_ids=list(gpu_ids),
                     decision_id=decision_id, gpu_milli=gpu_milli, profiling=profiling,
                     power_limit_w=power_limit_w)
    s.add(row)
    try:
        s.flush()
    except IntegrityError as e:
        raise TransitionConflict(f"job {job_id}: attempt {attempt} exists already "
                                 f"({str(e).splitlines()[0]})") from None
    return row.id


def set_power_limit(db: Db, attempt_id: int, power_limit_w: float | None) -> None:
    """A plan changed a running attempt's power limit (the agent applies it in place)."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id)
               .values(power_limit_w=power_limit_w)
               .execution_options(synchronize_session=False))


def power_limits(db: Db, attempt_ids: Sequence[int]) -> dict[int, float | None]:
    """The planned power limit of each attempt (the ids given)."""
    out: dict[int, float | None] = {}
    for chunk in (list(attempt_ids[i:i + 500]) for i in range(0, len(attempt_ids), 500)):
        out.update({i: w for i, w in db.execute(
            select(JobAttempt.id, JobAttempt.power_limit_w).where(JobAttempt.id.in_(chunk)))})
    return out


def record_container(db: Db, attempt_id: int, container_id: str,
                     start_s: float | None) -> None:
    """The attempt's container and when it started (at start, or when adopted; None: an
    engine that queues took it, and it has not started yet)."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id)
               .values(container_id=container_id, start_s=start_s)
               .execution_options(synchronize_session=False))


def set_gpus(db: Db, attempt_id: int, gpu_ids: Sequence[int]) -> None:
    """The GPUs an engine that picks them gave the attempt (Slurm's IDX), replacing the
    ones the manager asked for."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id)
               .values(gpu_ids=list(gpu_ids)).execution_options(synchronize_session=False))


def note_pending(db: Db, attempt_id: int, reason: str) -> None:
    """Why the engine keeps an open attempt queued (``pending: <reason>``), shown while it
    waits; the attempt's end reason replaces it."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id,
                                        JobAttempt.end_s.is_(None))
               .values(reason=reason[:REASON_CHARS]).execution_options(synchronize_session=False))


def request_stop(db: Db, attempt_id: int, now_s: float, decision_id: int | None) -> None:
    """The stop request of a decision: the deadline (``stop_requested_s``) and who asked."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id)
               .values(stop_requested_s=now_s, stop_decision_id=decision_id)
               .execution_options(synchronize_session=False))


def note_stop(db: Db, attempt_id: int, now_s: float) -> None:
    """The first stop request of an attempt with no decision behind it (its job ended);
    a recorded request is kept, so the kill deadline survives a manager restart."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id,
                                        JobAttempt.stop_requested_s.is_(None))
               .values(stop_requested_s=now_s).execution_options(synchronize_session=False))


def end_attempt(db: Db, attempt_id: int, end_s: float, *, exit_code: int | None,
                reason: str) -> bool:
    """Close the attempt if it is still open; returns whether it was."""
    done = run(db, update(JobAttempt)
               .where(JobAttempt.id == attempt_id, JobAttempt.end_s.is_(None))
               .values(end_s=end_s, exit_code=exit_code, reason=reason)
               .execution_options(synchronize_session=False))
    return done.rowcount == 1


def note_ran_on(db: Db, attempt_id: int, *, exit_code: int, reason: str) -> bool:
    """An ended attempt whose container ran on after the end (its engine was unreachable
    when the manager ended it): its real exit code and the reason saying so. Once only
    (where the exit code is still unknown); returns whether it was noted now."""
    done = run(db, update(JobAttempt)
               .where(JobAttempt.id == attempt_id, JobAttempt.exit_code.is_(None))
               .values(exit_code=exit_code, reason=reason)
               .execution_options(synchronize_session=False))
    return done.rowcount == 1


def save_log_tail(db: Db, attempt_id: int, text: str, now_s: float) -> None:
    """Keep the end of the attempt's log (its container is about to be removed)."""
    db.execute(update(JobAttempt).where(JobAttempt.id == attempt_id)
               .values(log_tail=text, log_saved_s=now_s)
               .execution_options(synchronize_session=False))


def stored_log(db: Db, attempt_id: int) -> tuple[str, float] | None:
    """The kept end of the log and when it was kept, or None (the container still has it)."""
    a = attempts_table(db)                # a submitter reads its own view
    row = db.execute(select(a.c.log_tail, a.c.log_saved_s)
                     .where(a.c.id == attempt_id)).first()
    if row is None or row.log_saved_s is None:
        return None
    return row.log_tail or "", row.log_saved_s
