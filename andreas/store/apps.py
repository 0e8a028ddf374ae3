"""What the Job Profiler stored about applications, as the manager's estimator reads it:
epoch times per (application, GPU type, g) and Amdahl models per (application, type)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from andreas.store.chunks import chunks
from andreas.store.models import AppModel, AppProfile
from andreas.store.nodes import Db


@dataclass(frozen=True, kw_only=True)
class ProfileRow:
    epoch_time_s: float
    source: str
    samples: int


@dataclass(frozen=True, kw_only=True)
class ModelRow:
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
            out[(a, t, int(g))] = ProfileRow(epoch_time_s=float(s), source=src or "profiler",
                                             samples=int(n or 0))
    return out


def app_models(db: Db, apps: Sequence[str]) -> dict[tuple[str, str], ModelRow]:
    """(application, GPU type) -> the profiler's Amdahl fit."""
    out = {}
    for chunk in chunks(apps):
        for a, t, t1, s, n, mape, counts in db.execute(
                select(AppModel.application, AppModel.gpu_type, AppModel.t1_s,
                       AppModel.serial_fraction, AppModel.samples, AppModel.mape,
                       AppModel.gpu_counts).where(AppModel.application.in_(chunk))):
            out[(a, t)] = ModelRow(t1_s=float(t1), serial_fraction=float(s), samples=int(n or 0),
                                   mape=mape, gpu_counts=tuple(counts or ()))
    return out
