"""Reads of ``epoch_events`` (and the one write they cause, ``jobs.epochs_done``): the
progress of jobs, the epoch durations the estimator measures, a job's epochs per
configuration for ``andreas show``."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from andreas.store.chunks import chunks
from andreas.store.models import EpochEvent, Job, JobAttempt, Node
from andreas.store.nodes import Db


@dataclass(frozen=True, kw_only=True)
class EpochDuration:
    """One finished epoch as the estimator keys it: (application, GPU type, g)."""

    application: str
    gpu_type: str
    gpus: int
    event_id: int
    end_s: float
    seconds: float | None


@dataclass(frozen=True, kw_only=True)
class ConfigEpochs:
    """A job's finished epochs on one configuration (node, GPU type, g)."""

    node: str | None                    # None: the node row is gone
    gpu_type: str
    gpus: int
    epochs: int
    mean_s: float
    min_s: float
    max_s: float
    last_epoch: int
    last_end_s: float


def max_epochs(db: Db, job_ids: Collection[str]) -> dict[str, int]:
    """The highest epoch each job reported (jobs without events are absent)."""
    out: dict[str, int] = {}
    for chunk in chunks(sorted(job_ids)):
        out.update((j, int(e)) for j, e in db.execute(
            select(EpochEvent.job_id, func.max(EpochEvent.epoch))
            .where(EpochEvent.job_id.in_(chunk)).group_by(EpochEvent.job_id)))
    return out


def last_epoch_end(db: Db, job_ids: Collection[str]) -> dict[str, float]:
    """When each job's newest finished epoch ended (its last checkpoint; jobs without a
    finished epoch are absent)."""
    out: dict[str, float] = {}
    for chunk in chunks(sorted(job_ids)):
        out.update((j, float(e)) for j, e in db.execute(
            select(EpochEvent.job_id, func.max(EpochEvent.end_s))
            .where(EpochEvent.job_id.in_(chunk), EpochEvent.end_s.is_not(None))
            .group_by(EpochEvent.job_id)) if e is not None)
    return out


def write_epochs_done(s: Session, done: Mapping[str, int], stored: Mapping[str, int]) -> int:
    """``jobs.epochs_done`` = the reported epochs where they grew; one statement for all."""
    rows = [{"b_id": j, "b_done": e} for j, e in done.items() if e > stored.get(j, 0)]
    if rows:
        s.connection().execute(
            update(Job).where(Job.id == bindparam("b_id"), Job.epochs_done < bindparam("b_done"))
            .values(epochs_done=bindparam("b_done")), rows)
    return len(rows)


def _duration_columns() -> tuple[Any, ...]:
    E = EpochEvent
    return (Job.application.label("app"), E.gpu_type.label("gpu_type"), E.gpus.label("gpus"),
            E.id.label("id"), E.end_s.label("end_s"), (E.end_s - E.start_s).label("d"))


def _durations(rows: Any) -> list[EpochDuration]:
    return [EpochDuration(application=app, gpu_type=t, gpus=int(g), event_id=int(i),
                          end_s=float(end), seconds=None if d is None else float(d))
            for app, t, g, i, end, d in rows]


def newest_epochs(db: Db, per_key: int) -> tuple[list[EpochDuration], int | None]:
    """The newest ``per_key`` epochs per (application, GPU type, g) (one window query), and
    the highest event id now (None: no events). Only jobs on whole GPUs count: an epoch
    of a job sharing its GPU is slowed by its co-residents, not the application's own
    speed (its slowdown is read with :func:`attempt_epochs`); and only attempts at the
    default power limit: a lower limit stretches the epochs (``_at_default``)."""
    E = EpochEvent
    rn = func.row_number().over(partition_by=(Job.application, E.gpu_type, E.gpus),
                                order_by=E.end_s.desc()).label("rn")
    inner = (_at_default(select(*_duration_columns(), rn).join(Job, Job.id == E.job_id))
             .where(Job.gpu_milli.is_(None)).subquery())
    rows = db.execute(select(inner.c.app, inner.c.gpu_type, inner.c.gpus, inner.c.id,
                             inner.c.end_s, inner.c.d).where(inner.c.rn <= per_key))
    out = _durations(rows)
    top = db.execute(select(func.max(E.id))).scalar()
    return out, None if top is None else int(top)


def epochs_after(db: Db, event_id: int) -> list[EpochDuration]:
    """Every epoch with an event id above ``event_id`` (jobs on whole GPUs only, at the
    default power limit)."""
    return _durations(db.execute(_at_default(select(*_duration_columns())
                                             .join(Job, Job.id == EpochEvent.job_id))
                                 .where(EpochEvent.id > event_id, Job.gpu_milli.is_(None))))


def _at_default(query: Any) -> Any:
    """Epochs of attempts planned at the default GPU power limit (``power_limit_w`` NULL;
    an epoch with no attempt row, e.g. of ``andreas profile``, counts too)."""
    A = JobAttempt
    return query.outerjoin(A, (A.job_id == EpochEvent.job_id)
                           & (A.attempt == EpochEvent.attempt)).where(A.power_limit_w.is_(None))


def attempt_epochs(db: Db, attempts: Collection[tuple[str, int]], last: int | None = 3
                   ) -> dict[tuple[str, int], list[float]]:
    """The durations of the newest ``last`` epochs (None: all) of each (job, attempt),
    oldest first (attempts without epochs are absent): what a running job measures now."""
    out: dict[tuple[str, int], list[tuple[int, float]]] = {}
    jobs = sorted({j for j, _ in attempts})
    wanted = set(attempts)
    E = EpochEvent
    for chunk in chunks(jobs):
        for job_id, attempt, epoch, d in db.execute(
                select(E.job_id, E.attempt, E.epoch, E.end_s - E.start_s)
                .where(E.job_id.in_(chunk))):
            if (job_id, attempt) in wanted and d is not None and d > 0:
                out.setdefault((job_id, attempt), []).append((int(epoch), float(d)))
    first = -last if last is not None else None
    return {k: [d for _, d in sorted(v)[first:]] for k, v in out.items()}


def job_epochs(db: Db, job_id: str) -> list[ConfigEpochs]:
    """The job's finished epochs grouped per (node, GPU type, g), oldest last epoch first."""
    E = EpochEvent
    d = E.end_s - E.start_s
    rows = db.execute(
        select(Node.name, E.gpu_type, E.gpus, func.count(), func.avg(d), func.min(d),
               func.max(d), func.max(E.epoch), func.max(E.end_s))
        .outerjoin(Node, Node.id == E.node_id)
        .where(E.job_id == job_id).group_by(E.node_id, Node.name, E.gpu_type, E.gpus))
    return sorted((ConfigEpochs(node=n, gpu_type=t, gpus=g, epochs=int(c), mean_s=float(mean),
                                min_s=float(lo), max_s=float(hi), last_epoch=int(last),
                                last_end_s=float(end))
                   for n, t, g, c, mean, lo, hi, last, end in rows),
                  key=lambda e: e.last_end_s)


@dataclass(frozen=True, kw_only=True)
class ProfilingRun:
    """One attempt of the manager's automatic profiling: where, at which g, how it ended,
    and the durations of its finished epochs in epoch order."""

    job_id: str
    application: str
    attempt: int
    node_id: int | None
    gpu_type: str | None                 # the node's (None: the node row is gone)
    gpus: int
    start_s: float | None
    end_s: float | None
    exit_code: int | None
    reason: str | None
    stop_requested_s: float | None
    epoch_s: tuple[float, ...]
    power_limit_w: float | None = None   # the GPUs' limit of the run (None: the default)
    gpu_ids: tuple[int, ...] = ()        # the GPU indexes it held on its node


def profiling_runs(db: Db, apps: Collection[str]) -> list[ProfilingRun]:
    """Every profiling attempt of a job of these applications (any job state), oldest
    first, with its epochs: what the automatic profiling has measured so far."""
    A = JobAttempt
    rows: list[Any] = []
    for chunk in chunks(sorted(set(apps))):
        rows.extend(db.execute(
            select(A.job_id, Job.application, A.attempt, A.node_id, Node.gpu_type, A.gpu_ids,
                   A.start_s,
                   A.end_s, A.exit_code, A.reason, A.stop_requested_s, A.power_limit_w)
            .join(Job, Job.id == A.job_id).outerjoin(Node, Node.id == A.node_id)
            .where(A.profiling.is_(True), Job.application.in_(chunk))
            .order_by(A.id)))
    durations = attempt_epochs(db, [(r.job_id, r.attempt) for r in rows], last=None)
    return [ProfilingRun(job_id=r.job_id, application=r.application, attempt=r.attempt,
                         node_id=r.node_id,
                         gpu_type=r.gpu_type, gpus=len(r.gpu_ids or ()), start_s=r.start_s,
                         end_s=r.end_s, exit_code=r.exit_code, reason=r.reason,
                         stop_requested_s=r.stop_requested_s,
                         epoch_s=tuple(durations.get((r.job_id, r.attempt), ())),
                         power_limit_w=r.power_limit_w,
                         gpu_ids=tuple(int(i) for i in (r.gpu_ids or ())))
            for r in rows]
