"""The production refinement of application profiles (:func:`refresh_models`) from
``epoch_events``; the rows it reads and writes are :mod:`andreas.store.profiles`.

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
from collections.abc import Mapping
from dataclasses import dataclass

from andreas.profiler.fit import (MODEL, AmdahlFit, fit_amdahl, prior_serial_fraction,
                                  recency_weights, weighted_median)
from andreas.store.nodes import Db
from andreas.store.profiles import (ModelRow, ProfileSource, profiler_points,
                                    recent_epochs, upsert_model, upsert_profiles)

DEFAULT_HALF_LIFE_S = 7 * 24 * 3600.0
MAX_EPOCHS_PER_CONFIG = 200      # newest epochs read per (application, type, g)
MIN_MEASURED = 3                 # production epochs before a g gets a "measured" row


def write_model(db: Db, app: str, gpu_type: str, fit: AmdahlFit, *, source: str,
                now_s: float) -> None:
    """Upsert the ``app_models`` row of (app, gpu_type) from an Amdahl fit."""
    upsert_model(db, ModelRow(application=app, gpu_type=gpu_type, model=MODEL, t1_s=fit.t1_s,
                             serial_fraction=fit.serial_fraction, mape=fit.mape,
                             samples=fit.samples, gpu_counts=tuple(fit.gpu_counts),
                             source=source, updated_s=now_s))


@dataclass(frozen=True, kw_only=True)
class Refreshed:
    """What one refinement wrote: per (application, type) the fit and the g values that got
    a measured row."""

    app: str
    gpu_type: str
    fit: AmdahlFit
    measured_gpus: tuple[int, ...]
    epochs: int


def refresh_models(db: Db, now_s: float, *,
                   half_life_s: float = DEFAULT_HALF_LIFE_S,
                   prior_serial: Mapping[str, float] | None = None) -> list[Refreshed]:
    """Refit every (application, type) with production epochs (module docstring); in the
    caller's transaction. ``prior_serial``: the profiles' s per application, the prior of
    one-g fits (:func:`andreas.profiler.fit.prior_serial_fraction`)."""
    epochs: dict[tuple[str, str], list[tuple[int, float, float]]] = defaultdict(list)
    for p in recent_epochs(db, MAX_EPOCHS_PER_CONFIG):
        epochs[(p.application, p.gpu_type)].append((p.gpus, p.end_s, p.seconds))
    if not epochs:
        return []
    profiler_rows: dict[tuple[str, str], list[tuple[int, float, int, float]]] = defaultdict(list)
    for r in profiler_points(db, (a for a, _ in epochs)):
        profiler_rows[(r.application, r.gpu_type)].append(
            (r.gpus, r.epoch_time_s, r.samples, r.updated_s))
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
        upsert_profiles(db, [dict(
            application=app, gpu_type=gpu_type, gpus=g,
            epoch_time_s=weighted_median([ys[i] for i in by_g[g]], [ws[i] for i in by_g[g]]),
            source=ProfileSource.MEASURED, samples=len(by_g[g]), updated_s=float(now_s))
            for g in measured])
        write_model(db, app, gpu_type, fit, source=ProfileSource.MEASURED, now_s=now_s)
        out.append(Refreshed(app=app, gpu_type=gpu_type, fit=fit,
                             measured_gpus=tuple(measured), epochs=len(points)))
    return out
