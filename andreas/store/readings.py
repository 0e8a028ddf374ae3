"""What the agents measured, as the user views read it: energy attributed to jobs (sums of
``job_energy``) and the newest power readings and gaps of GPUs and nodes."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import func, select

from andreas.store.chunks import chunks
from andreas.store.models import GpuGap, HostSample, JobEnergy, PowerSample
from andreas.store.nodes import Db


@dataclass(frozen=True, kw_only=True)
class EnergyTotal:
    """Summed ``job_energy`` rows; a part is None when no row measured it."""

    gpu_mj: int | None
    host_mj: int | None
    rows: int


def job_energy(db: Db, job_ids: Collection[str]) -> dict[str, EnergyTotal]:
    """Each job's energy (jobs without rows are absent)."""
    out = {}
    for chunk in chunks(sorted(set(job_ids))):
        for job_id, gpu, host, n in db.execute(
                select(JobEnergy.job_id, func.sum(JobEnergy.gpu_energy_mj),
                       func.sum(JobEnergy.host_energy_mj), func.count())
                .where(JobEnergy.job_id.in_(chunk)).group_by(JobEnergy.job_id)):
            out[job_id] = _total(gpu, host, n)
    return out


def job_energy_parts(db: Db, job_ids: Collection[str]
                     ) -> dict[str, list[tuple[float, float, float]]]:
    """Each job's ``job_energy`` rows as (GPU + host mJ, start, end), by time: what a
    time-of-use tariff bills (each window at the time it was used; NULL parts add
    nothing). About one row per job and minute; read only where a tariff needs it."""
    out: dict[str, list[tuple[float, float, float]]] = {}
    for chunk in chunks(sorted(set(job_ids))):
        for job_id, t, dt, gpu, host in db.execute(
                select(JobEnergy.job_id, JobEnergy.t, JobEnergy.interval_s,
                       JobEnergy.gpu_energy_mj, JobEnergy.host_energy_mj)
                .where(JobEnergy.job_id.in_(chunk))
                .order_by(JobEnergy.job_id, JobEnergy.t)):
            out.setdefault(job_id, []).append((float(int(gpu or 0) + int(host or 0)),
                                               float(t) - float(dt), float(t)))
    return out


def attempt_energy(db: Db, job_id: str) -> dict[int, EnergyTotal]:
    """The job's energy per attempt number (attempts without rows are absent)."""
    return {a: _total(g, h, n) for a, g, h, n in db.execute(
        select(JobEnergy.attempt, func.sum(JobEnergy.gpu_energy_mj),
               func.sum(JobEnergy.host_energy_mj), func.count())
        .where(JobEnergy.job_id == job_id).group_by(JobEnergy.attempt))}


def total(parts: Iterable[EnergyTotal]) -> EnergyTotal | None:
    """The sum of several totals (None for none; a part stays None if None everywhere)."""
    parts = list(parts)
    if not parts:
        return None

    def add(xs: list[int | None]) -> int | None:
        return None if all(x is None for x in xs) else sum(x for x in xs if x is not None)
    return EnergyTotal(gpu_mj=add([p.gpu_mj for p in parts]),
                       host_mj=add([p.host_mj for p in parts]),
                       rows=sum(p.rows for p in parts))


def _total(gpu: Any, host: Any, rows: int) -> EnergyTotal:
    return EnergyTotal(gpu_mj=None if gpu is None else int(gpu),
                       host_mj=None if host is None else int(host), rows=int(rows))


def latest_gpu_power(db: Db, gpu_ids: Collection[int], since_s: float) -> dict[int, float]:
    """Power of each GPU's newest sample since ``since_s`` (primary-key range reads)."""
    out: dict[int, float] = {}
    for chunk in chunks(sorted(set(gpu_ids))):
        latest = (select(PowerSample.gpu_id, func.max(PowerSample.t).label("t"))
                  .where(PowerSample.gpu_id.in_(chunk), PowerSample.t >= since_s)
                  .group_by(PowerSample.gpu_id).subquery())
        out.update((g, float(p)) for g, p in db.execute(
            select(PowerSample.gpu_id, PowerSample.power_w)
            .join(latest, (PowerSample.gpu_id == latest.c.gpu_id)
                  & (PowerSample.t == latest.c.t))))
    return out


def latest_host_power(db: Db, node_ids: Collection[int], since_s: float) -> dict[int, float]:
    """Host power of each node's newest sample since ``since_s`` that has a reading."""
    out: dict[int, float] = {}
    for chunk in chunks(sorted(set(node_ids))):
        latest = (select(HostSample.node_id, func.max(HostSample.t).label("t"))
                  .where(HostSample.node_id.in_(chunk), HostSample.t >= since_s,
                         HostSample.host_power_w.is_not(None))
                  .group_by(HostSample.node_id).subquery())
        out.update((n, float(cast(float, p))) for n, p in db.execute(  # cast: no NULL power
            select(HostSample.node_id, HostSample.host_power_w)
            .join(latest, (HostSample.node_id == latest.c.node_id)
                  & (HostSample.t == latest.c.t))))
    return out


def gpus_with_gaps(db: Db, gpu_ids: Collection[int], since_s: float) -> set[int]:
    """The GPUs that could not be read at some time since ``since_s``."""
    out: set[int] = set()
    for chunk in chunks(sorted(set(gpu_ids))):
        out.update(db.execute(select(GpuGap.gpu_id).distinct()
                              .where(GpuGap.gpu_id.in_(chunk), GpuGap.t >= since_s)).scalars())
    return out
