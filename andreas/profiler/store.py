"""The profiler's writes: ``app_profiles`` and ``app_models`` rows, upserted, and the
production refinement (:func:`refresh_models`) from ``epoch_events``.

Upserts are one statement per batch on both backends (SQLite ``ON CONFLICT DO UPDATE``,
MariaDB ``ON DUPLICATE KEY UPDATE``), so two writers of the same key never fail on a
duplicate: the later one wins.

Refinement, per (application, GPU type), with every epoch weighted by recency
``w = exp(-ln 2 * age / half_life_s)`` (age = ``now_s - end_s``):

- per g with at least ``MIN_MEASURED`` production epochs: an ``app_profiles`` row (source
  ``measured``) with the recency-weighted median; other g keep their row (profiler);
- the Amdahl fit over the production epochs *plus* the profiler rows still stored for
  other g (each counted ``samples`` times, aged from its ``updated_s``), so a few
  production epochs at one g refine the profile instead of replacing a fit over many g by
  a one-point guess; written to ``app_models`` (source ``measured``). Without production
  epochs the profiler's model stays as it is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from andreas.profiler.fit import (MODEL, AmdahlFit, fit_amdahl, prior_serial_fraction,
                                  recency_weights, weighted_median)
from andreas.store.models import AppModel, AppProfile, EpochEvent, Job

DEFAULT_HALF_LIFE_S = 7 * 24 * 3600.0
MAX_EPOCHS_PER_CONFIG = 200      # newest epochs read per (application, type, g)
MIN_MEASURED = 3                 # production epochs before a g gets a "measured" row


def _conn(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def _upsert(db: Session | Connection, table: Any, rows: Sequence[Mapping[str, Any]],
            keys: Sequence[str]) -> None:
    if not rows:
        return
    conn = _conn(db)
    columns = [c for c in rows[0] if c not in keys]
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
        stmt = insert(table)
        stmt = stmt.on_conflict_do_update(index_elements=list(keys),
                                          set_={c: stmt.excluded[c] for c in columns})
    else:
        from sqlalchemy.dialects.mysql import insert
        stmt = insert(table)
        stmt = stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in columns})
    conn.execute(stmt, [dict(r) for r in rows])


def write_profiles(db: Session | Connection, rows: Iterable[Mapping[str, Any]]) -> None:
    """Upsert ``app_profiles`` rows (application, gpu_type, gpus, epoch_time_s, source,
    samples, updated_s)."""
    _upsert(db, AppProfile.__table__, list(rows), ("application", "gpu_type", "gpus"))


def write_model(db: Session | Connection, app: str, gpu_type: str, fit: AmdahlFit, *,
                source: str, now_s: float) -> None:
    """Upsert the ``app_models`` row of (app, gpu_type)."""
    _upsert(db, AppModel.__table__, [dict(
        application=app, gpu_type=gpu_type, model=MODEL, t1_s=float(fit.t1_s),
        serial_fraction=float(fit.serial_fraction),
        mape=None if fit.mape is None else float(fit.mape), samples=int(fit.samples),
        gpu_counts=list(fit.gpu_counts), source=source, updated_s=float(now_s))],
        ("application", "gpu_type"))


@dataclass(frozen=True, kw_only=True)
class Refreshed:
    """What one refinement wrote: per (application, type) the fit and the g values that got
    a measured row."""

    app: str
    gpu_type: str
    fit: AmdahlFit
    measured_gpus: tuple[int, ...]
    epochs: int


def _recent_epochs(conn: Connection) -> list[tuple[str, str, int, float, float]]:
    """(application, type, g, end_s, seconds) of the newest epochs per key (a window query:
    the cost does not grow with the history)."""
    E = EpochEvent
    rn = func.row_number().over(partition_by=(Job.application, E.gpu_type, E.gpus),
                                order_by=E.end_s.desc()).label("rn")
    inner = (select(Job.application.label("app"), E.gpu_type.label("gpu_type"),
                    E.gpus.label("gpus"), E.end_s.label("end_s"),
                    (E.end_s - E.start_s).label("d"), rn)
             .join(Job, Job.id == E.job_id).subquery())
    rows = conn.execute(select(inner.c.app, inner.c.gpu_type, inner.c.gpus, inner.c.end_s,
                               inner.c.d).where(inner.c.rn <= MAX_EPOCHS_PER_CONFIG))
    return [(a, t, int(g), float(e), float(d)) for a, t, g, e, d in rows
            if d is not None and d > 0]


def refresh_models(db: Session | Connection, now_s: float, *,
                   half_life_s: float = DEFAULT_HALF_LIFE_S,
                   prior_serial: Mapping[str, float] | None = None) -> list[Refreshed]:
    """Refit every (application, type) with production epochs (module docstring); in the
    caller's transaction. ``prior_serial``: the profiles' s per application, the prior of
    one-g fits (:func:`andreas.profiler.fit.prior_serial_fraction`)."""
    conn = _conn(db)
    epochs: dict[tuple[str, str], list[tuple[int, float, float]]] = defaultdict(list)
    for app, gpu_type, g, end_s, d in _recent_epochs(conn):
        epochs[(app, gpu_type)].append((g, end_s, d))
    if not epochs:
        return []
    apps = sorted({a for a, _ in epochs})
    profiler_rows: dict[tuple[str, str], list[tuple[int, float, int, float]]] = defaultdict(list)
    for a, t, g, s, n, u in conn.execute(
            select(AppProfile.application, AppProfile.gpu_type, AppProfile.gpus,
                   AppProfile.epoch_time_s, AppProfile.samples, AppProfile.updated_s)
            .where(AppProfile.application.in_(apps), AppProfile.source == "profiler")):
        profiler_rows[(a, t)].append((int(g), float(s), max(int(n or 0), 1), float(u)))
    out = []
    for (app, gpu_type), points in sorted(epochs.items()):
        gs = [g for g, _, _ in points]
        ys = [d for _, _, d in points]
        ws = recency_weights([now_s - e for _, e, _ in points], half_life_s).tolist()
        by_g: dict[int, list[int]] = defaultdict(list)
        for i, g in enumerate(gs):
            by_g[g].append(i)
        measured = sorted(g for g, idx in by_g.items() if len(idx) >= MIN_MEASURED)
        for g, s, n, u in profiler_rows.get((app, gpu_type), ()):
            if g in measured:
                continue                          # production data replaces it
            w = float(recency_weights([now_s - u], half_life_s)[0])
            gs.extend([g] * n)
            ys.extend([s] * n)
            ws.extend([w] * n)
        if sum(ws) <= 0:
            continue
        prior = prior_serial_fraction(prior_serial or {}, app)
        fit = fit_amdahl(gs, ys, ws, prior_serial_fraction=prior)
        write_profiles(conn, [dict(
            application=app, gpu_type=gpu_type, gpus=g,
            epoch_time_s=weighted_median([ys[i] for i in by_g[g]], [ws[i] for i in by_g[g]]),
            source="measured", samples=len(by_g[g]), updated_s=float(now_s))
            for g in measured])
        write_model(conn, app, gpu_type, fit, source="measured", now_s=now_s)
        out.append(Refreshed(app=app, gpu_type=gpu_type, fit=fit,
                             measured_gpus=tuple(measured), epochs=len(points)))
    return out
