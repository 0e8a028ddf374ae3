"""What the node agent measures, before it is written to the store.

Frozen keyword-only records shared by the samplers (producers), the attribution step and
the delivery side (spool + store writer). Everything is keyed by GPU UUID, never by
index: NVML indices, CUDA_VISIBLE_DEVICES and MIG ids disagree. Times are UTC seconds
(``time.time()``) for storage, and every interval is measured on the monotonic clock.
Energies are integer millijoules (NVML's unit) so sums stay exact; ``None`` means "no
reading", never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from andreas.sources import EnergySource, PowerSource


@dataclass(frozen=True, kw_only=True)
class GpuInfo:
    """Inventory of one GPU, taken once at start (and after NVML re-initialisation)."""

    uuid: str
    index: int
    model: str
    memory_mib: int
    power_limit_w: float | None
    has_energy_counter: bool
    mig_enabled: bool = False


@dataclass(frozen=True, kw_only=True)
class GpuSample:
    """One reading of one GPU over the interval that ends at ``t``.

    ``energy_mj`` is the energy over (previous sample, t]; None when there is none (first
    sample, a gap, a reset interval without a fallback). ``counter_reset`` flags an
    interval in which the energy counter went down (driver reload / GPU reset).
    """

    uuid: str
    t: float
    interval_s: float
    power_w: float | None
    power_source: PowerSource | None
    energy_mj: int | None
    energy_source: EnergySource | None
    utilization: float | None = None
    memory_used_mib: int | None = None
    pids: tuple[int, ...] = ()
    counter_reset: bool = False
    # Per process (host PID): GPU memory it holds and its mean SM utilisation (percent)
    # over the interval, when NVML reports them; they split a shared GPU's energy.
    process_memory_mib: tuple[tuple[int, int], ...] = ()
    process_sm: tuple[tuple[int, float], ...] = ()
    # The energy counter's reading at ``t`` (None: no counter): what a restarted agent
    # charges the time it was not running from (agents/resume.py); not stored.
    counter_mj: int | None = None
    power_limit_w: float | None = None   # the limit in force (agents/powerlimits.py)


@dataclass(frozen=True, kw_only=True)
class GpuGap:
    """A GPU could not be read (lost from the bus, unknown NVML error): a gap, not zeros."""

    uuid: str
    t: float
    reason: str


@dataclass(frozen=True, kw_only=True)
class AgentGap:
    """Time the agent was not sampling, recorded when it starts again (agents/resume.py)."""

    start_s: float
    end_s: float
    charged: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class HostSample:
    t: float
    interval_s: float
    cpu_utilization: float
    memory_used_mib: int
    host_power_w: float | None
    power_source: PowerSource | None
    energy_mj: int | None
    energy_source: EnergySource | None
    agent_cpu_percent: float | None = None
    agent_rss_mib: float | None = None


@dataclass(frozen=True, kw_only=True)
class EpochRecord:
    """One finished epoch read from a container's progress lines."""

    job_id: str
    attempt: int
    epoch: int
    start_s: float
    end_s: float
    container_id: str
    gpu_uuids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class JobEnergy:
    """Energy attributed to one job over one interval: its GPUs plus its share of host."""

    job_id: str
    attempt: int
    t: float
    interval_s: float
    gpu_energy_mj: int | None
    host_energy_mj: int | None
    gpu_uuids: tuple[str, ...] = field(default=())
