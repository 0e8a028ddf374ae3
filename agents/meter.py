"""What the agent's metrics exporter reads: running totals the sampling loop keeps.

Stdlib only and always on (a few dict updates per tick), so the sampling loop does not
depend on ``prometheus_client``; :mod:`agents.exporter` turns a :meth:`Meter.view` into
metric families at scrape time, and is imported only when a metrics port is set.

Energy totals are sums of the samples' ``energy_mj`` (the interval energies the samplers
already compute from NVML's counters or RAPL, resets handled there), so they only grow:
Prometheus counters. A job's total lives while the job holds GPUs on this node and for
``job_keep_s`` after, then its series ends (a node sees thousands of jobs a month).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from agents.attribution import JobShare
from agents.records import GpuGap, GpuSample, HostSample

JOB_KEEP_S = 600.0


@dataclass(frozen=True, kw_only=True)
class GpuView:
    uuid: str
    power_w: float | None        # the last sample's power; None: no reading yet or a gap
    energy_mj: int               # since the agent started
    gaps: int                    # intervals the GPU could not be read
    power_limit_w: float | None = None   # the limit in force, when the agent knows it


@dataclass(frozen=True, kw_only=True)
class MeterView:
    """One consistent copy of the totals (taken under the meter's lock)."""

    gpus: tuple[GpuView, ...]
    host_power_w: float | None
    host_energy_mj: int
    jobs: tuple[tuple[str, int], ...]        # (job id, energy mJ: GPUs + host share)
    last_tick_wall: float | None


class Meter:
    """Totals updated by the sampling loop (:meth:`observe`), read by a scrape (:meth:`view`)."""

    def __init__(self, *, job_keep_s: float = JOB_KEEP_S) -> None:
        self.job_keep_s = job_keep_s
        self._lock = threading.Lock()
        self._power: dict[str, float | None] = {}
        self._energy: dict[str, int] = {}
        self._gaps: dict[str, int] = {}
        self._limit: dict[str, float | None] = {}
        self._host_power: float | None = None
        self._host_energy = 0
        self._jobs: dict[str, int] = {}
        self._job_seen: dict[str, float] = {}
        self._last_tick: float | None = None

    def observe(self, now_wall: float, readings: Iterable[GpuSample | GpuGap],
                host: HostSample | None, shares: Iterable[JobShare]) -> None:
        """One tick's readings, host sample and job shares."""
        with self._lock:
            for r in readings:
                if isinstance(r, GpuSample):
                    self._power[r.uuid] = r.power_w
                    self._limit[r.uuid] = r.power_limit_w
                    self._energy[r.uuid] = self._energy.get(r.uuid, 0) + (r.energy_mj or 0)
                else:
                    self._power[r.uuid] = None
                    self._gaps[r.uuid] = self._gaps.get(r.uuid, 0) + 1
                    self._energy.setdefault(r.uuid, 0)
            if host is not None:
                self._host_power = host.host_power_w
                self._host_energy += host.energy_mj or 0
            for s in shares:
                mj = (s.gpu_energy_mj or 0) + (s.host_energy_mj or 0)
                self._jobs[s.job_id] = self._jobs.get(s.job_id, 0) + mj
                self._job_seen[s.job_id] = now_wall
            for job in [j for j, t in self._job_seen.items() if now_wall - t > self.job_keep_s]:
                del self._jobs[job], self._job_seen[job]
            self._last_tick = now_wall

    def view(self) -> MeterView:
        with self._lock:
            return MeterView(
                gpus=tuple(GpuView(uuid=u, power_w=self._power.get(u), energy_mj=e,
                                   gaps=self._gaps.get(u, 0),
                                   power_limit_w=self._limit.get(u))
                           for u, e in self._energy.items()),
                host_power_w=self._host_power, host_energy_mj=self._host_energy,
                jobs=tuple(self._jobs.items()), last_tick_wall=self._last_tick)
