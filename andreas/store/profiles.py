"""The Job Profiler's tables: ``app_profiles`` and ``app_models`` rows, upserted, the
reads its production refinement needs (recent ``epoch_events`` per application, type and
g; the profiler's own rows), and the manager's estimator's reads of both tables.

Upserts are one statement per batch on both backends (SQLite ``ON CONFLICT DO UPDATE``,
MariaDB ``ON DUPLICATE KEY UPDATE``), so two writers of the same key never fail on a
duplicate: the later one wins.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select
from sqlalchemy.orm import Session

from andreas.store.chunks import chunks
from andreas.store.models import (AppLevel, AppModel, AppProfile, EpochEvent, Job, JobAttempt,
                                  PowerSample)
from andreas.store.nodes import Db



class ProfileSource(enum.StrEnum):
    """Where an ``app_profiles``, ``app_models`` or ``app_levels`` row came from (the
    stored ``source``)."""

    PROFILER = "profiler"       # profiling runs: ``andreas profile``, the manager's own
    MEASURED = "measured"       # production epochs (andreas.profiler.store)
    FIT = "fit"                 # a power level fitted where none was measured


# The ``jobs.reason`` of the rows ``andreas profile`` writes for its containers (they have
# no attempt rows); their first epoch is warm-up, like a profiling attempt's.
PROFILE_RUN_REASON = "profiling run (andreas profile)"
WARMUP_MIN_EPOCHS = 3        # a profiling run's first epoch is dropped when it has this many


@dataclass(frozen=True, kw_only=True)
class ModelRow:
    """An ``app_models`` row: the Amdahl fit of one (application, GPU type)."""

    application: str
    gpu_type: str
    model: str
    t1_s: float
    serial_fraction: float
    mape: float | None
    samples: int
    gpu_counts: tuple[int, ...]
    source: str
    updated_s: float


@dataclass(frozen=True, kw_only=True)
class EpochPoint:
    """One production epoch of an application: on ``gpus`` GPUs of ``gpu_type``, ended at
    ``end_s``, lasted ``seconds``."""

    application: str
    gpu_type: str
    gpus: int
    end_s: float
    seconds: float


@dataclass(frozen=True, kw_only=True)
class ProfilerPoint:
    """A stored ``app_profiles`` row of source ``profiler``."""

    application: str
    gpu_type: str
    gpus: int
    epoch_time_s: float
    samples: int
    updated_s: float


def _conn(db: Db) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def _upsert(db: Db, table: Any, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
            ) -> None:
    if not rows:
        return
    conn = _conn(db)
    columns = [c for c in rows[0] if c not in keys]
    stmt: Any
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
        stmt = insert(table)
        stmt = stmt.on_conflict_do_update(index_elements=list(keys),
                                          set_={c: stmt.excluded[c] for c in columns})
    else:
        from sqlalchemy.dialects.mysql import insert as mysql_insert
        stmt = mysql_insert(table)
        stmt = stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in columns})
    conn.execute(stmt, [dict(r) for r in rows])


def upsert_profiles(db: Db, rows: Iterable[Mapping[str, Any]]) -> None:
    """Upsert ``app_profiles`` rows (application, gpu_type, gpus, epoch_time_s, source,
    samples, updated_s)."""
    _upsert(db, AppProfile.__table__, list(rows), ("application", "gpu_type", "gpus"))


def upsert_model(db: Db, row: ModelRow) -> None:
    """Upsert the ``app_models`` row of (application, gpu_type)."""
    _upsert(db, AppModel.__table__, [dict(
        application=row.application, gpu_type=row.gpu_type, model=row.model,
        t1_s=float(row.t1_s), serial_fraction=float(row.serial_fraction),
        mape=None if row.mape is None else float(row.mape), samples=int(row.samples),
        gpu_counts=list(row.gpu_counts), source=row.source, updated_s=float(row.updated_s))],
        ("application", "gpu_type"))


def recent_epochs(db: Db, per_config: int) -> list[EpochPoint]:
    """The newest ``per_config`` epochs per (application, type, g) with a positive
    duration (a window query: the cost does not grow with the history). The warm-up epoch
    of a profiling run (the first of a run with at least ``WARMUP_MIN_EPOCHS``, as the
    profiler drops it) is left out: data loading and autotuning, not the epoch time."""
    E, A = EpochEvent, JobAttempt
    run = (E.job_id, E.attempt)
    first = func.min(E.epoch).over(partition_by=run).label("first")
    count = func.count().over(partition_by=run).label("count")
    profiling = or_(A.profiling.is_(True), Job.reason == PROFILE_RUN_REASON).label("profiling")
    runs = (select(E.id.label("id"), first, count, profiling)
            .join(Job, Job.id == E.job_id)
            .outerjoin(A, and_(A.job_id == E.job_id, A.attempt == E.attempt)).subquery())
    rn = func.row_number().over(partition_by=(Job.application, E.gpu_type, E.gpus),
                                order_by=E.end_s.desc()).label("rn")
    warmup = and_(runs.c.profiling.is_(True), E.epoch == runs.c.first,
                  runs.c.count >= WARMUP_MIN_EPOCHS)
    inner = (select(Job.application.label("app"), E.gpu_type.label("gpu_type"),
                    E.gpus.label("gpus"), E.end_s.label("end_s"),
                    (E.end_s - E.start_s).label("d"), rn)
             .join(Job, Job.id == E.job_id).join(runs, runs.c.id == E.id)
             .where(~warmup).subquery())
    rows = _conn(db).execute(select(inner.c.app, inner.c.gpu_type, inner.c.gpus,
                                    inner.c.end_s, inner.c.d).where(inner.c.rn <= per_config))
    return [EpochPoint(application=a, gpu_type=t, gpus=int(g), end_s=float(e),
                       seconds=float(d))
            for a, t, g, e, d in rows if d is not None and d > 0]


def profiler_points(db: Db, applications: Iterable[str]) -> list[ProfilerPoint]:
    """The ``profiler`` rows of these applications (``samples`` at least 1)."""
    apps = sorted(set(applications))
    if not apps:
        return []
    return [ProfilerPoint(application=a, gpu_type=t, gpus=int(g), epoch_time_s=float(s),
                          samples=max(int(n or 0), 1), updated_s=float(u))
            for a, t, g, s, n, u in _conn(db).execute(
                select(AppProfile.application, AppProfile.gpu_type, AppProfile.gpus,
                       AppProfile.epoch_time_s, AppProfile.samples, AppProfile.updated_s)
                .where(AppProfile.application.in_(apps),
                       AppProfile.source == ProfileSource.PROFILER))]


@dataclass(frozen=True, kw_only=True)
class ProfileRow:
    epoch_time_s: float
    source: str
    samples: int


@dataclass(frozen=True, kw_only=True)
class ModelFit:
    """The part of an ``app_models`` row the manager's estimator uses (it fits one
    itself where no row exists)."""

    t1_s: float
    serial_fraction: float
    samples: int
    mape: float | None
    gpu_counts: tuple[int, ...]


def app_profiles(db: Db, apps: Sequence[str]) -> dict[tuple[str, str, int], ProfileRow]:
    """(application, GPU type, g) -> the profiler's epoch time (source "profiler" when the
    row names none)."""
    out = {}
    for chunk in chunks(apps):
        for a, t, g, s, src, n in db.execute(
                select(AppProfile.application, AppProfile.gpu_type, AppProfile.gpus,
                       AppProfile.epoch_time_s, AppProfile.source, AppProfile.samples)
                .where(AppProfile.application.in_(chunk))):
            out[(a, t, int(g))] = ProfileRow(epoch_time_s=float(s),
                                             source=src or ProfileSource.PROFILER,
                                             samples=int(n or 0))
    return out


def app_models(db: Db, apps: Sequence[str]) -> dict[tuple[str, str], ModelFit]:
    """(application, GPU type) -> the profiler's Amdahl fit."""
    out = {}
    for chunk in chunks(apps):
        for a, t, t1, s, n, mape, counts in db.execute(
                select(AppModel.application, AppModel.gpu_type, AppModel.t1_s,
                       AppModel.serial_fraction, AppModel.samples, AppModel.mape,
                       AppModel.gpu_counts).where(AppModel.application.in_(chunk))):
            out[(a, t)] = ModelFit(t1_s=float(t1), serial_fraction=float(s), samples=int(n or 0),
                                   mape=mape, gpu_counts=tuple(counts or ()))
    return out


def upsert_levels(db: Db, rows: Iterable[Mapping[str, Any]]) -> None:
    """Upsert ``app_levels`` rows (application, gpu_type, limit_w, time_factor, gpu_power_w,
    source, updated_s): the Job Profiler's power levels."""
    _upsert(db, AppLevel.__table__, list(rows), ("application", "gpu_type", "limit_w"))


def app_levels(db: Db, apps: Iterable[str]) -> dict[str, dict[str, list[AppLevel]]]:
    """application -> GPU type -> its level rows, highest limit first."""
    out: dict[str, dict[str, list[AppLevel]]] = {}
    for chunk in chunks(sorted(set(apps))):
        for row in db.execute(select(AppLevel).where(AppLevel.application.in_(chunk))
                              .order_by(AppLevel.limit_w.desc())).scalars():
            out.setdefault(row.application, {}).setdefault(row.gpu_type, []).append(row)
    return out


def mean_gpu_power(db: Db, gpu_ids: Sequence[int], t0: float, t1: float,
                   limit_w: float | None) -> tuple[float | None, int]:
    """Mean power of these GPUs' samples in (t0, t1] taken at ``limit_w`` (None: any limit;
    the store's GPU ids), and how many samples: what a GPU drew at a power level."""
    q = select(func.avg(PowerSample.power_w), func.count()).where(
        PowerSample.gpu_id.in_(list(gpu_ids)), PowerSample.t > t0, PowerSample.t <= t1)
    if limit_w is not None:
        q = q.where(func.abs(PowerSample.power_limit_w - limit_w) < 0.5)
    avg, n = db.execute(q).one()
    return (None if avg is None else float(avg)), int(n)


def latest_gpu_sample_s(db: Db, gpu_ids: Sequence[int]) -> float | None:
    """The time of the newest sample of these GPUs (the store's ids): how far the node
    agent's delivery has come."""
    return db.execute(select(func.max(PowerSample.t))
                      .where(PowerSample.gpu_id.in_(list(gpu_ids)))).scalar()
