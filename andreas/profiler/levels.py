"""Power levels of an application from level runs, for ``andreas profile`` and the
manager's profiling nodes alike.

A level run is one GPU at one limit for a few epochs (Zeus' just-in-time profiling: one
level per short window). Its point is the run's median epoch and the mean draw of the
GPU's samples taken at that limit within the run (the node agent stores them with the
limit in force). The one-GPU run at the default limit is the reference: without it there
is nothing to compare a level with, and no level is stored. The points are made monotone
and the levels not measured fitted (:mod:`andreas.powerfit`), then stored as
``app_levels`` rows (source ``profiler``, or ``fit``), which the manager plans with.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence

from andreas.powerfit import MEASURED, FittedLevel, Point, fit_levels
from andreas.store.nodes import Db
from andreas.store.profiles import ProfileSource, mean_gpu_power, upsert_levels

log = logging.getLogger(__name__)


def level_point(db: Db, gpu_ids: Sequence[int], t0_s: float, t1_s: float,
                limit_w: float | None, default_w: float,
                epochs_s: Sequence[float]) -> Point | None:
    """The point of one run on ``gpu_ids`` (store ids) in (t0_s, t1_s] at ``limit_w``
    (None: the default limit, any sample); None without epochs or samples."""
    if not epochs_s or not gpu_ids:
        return None
    watts, n = mean_gpu_power(db, gpu_ids, t0_s, t1_s, limit_w)
    if watts is None or n == 0:
        return None
    return Point(limit_w=limit_w if limit_w is not None else default_w,
                 epoch_s=float(statistics.median(epochs_s)), power_w=watts,
                 weight=len(epochs_s))


def store_levels(db: Db, app: str, gpu_type: str, levels_w: Sequence[float],
                 points: Sequence[Point], now_s: float) -> list[FittedLevel]:
    """Fit ``levels_w`` (the default first) from ``points`` and upsert the ``app_levels``
    rows; nothing (a warning) without a point at the default."""
    if not levels_w or not any(p.limit_w == levels_w[0] for p in points):
        log.warning("application %s on %s: no power measured at the default limit; power "
                    "levels not profiled", app, gpu_type)
        return []
    fitted = fit_levels(list(points), list(levels_w))
    base = fitted[0].epoch_s
    upsert_levels(db, [dict(application=app, gpu_type=gpu_type, limit_w=f.limit_w,
                            time_factor=f.epoch_s / base, gpu_power_w=f.power_w,
                            source=(ProfileSource.PROFILER if f.source == MEASURED
                                    else ProfileSource.FIT),
                            updated_s=now_s) for f in fitted])
    log.info("profiled power levels of %s on %s: %s", app, gpu_type, ", ".join(
        f"{f.limit_w:g} W x{f.epoch_s / base:.3f} {f.power_w:.0f} W" for f in fitted))
    return fitted
