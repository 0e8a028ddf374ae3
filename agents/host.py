"""Host sampling: CPU and memory through psutil, host power from RAPL or the profile model.

Why each choice (the ways power readings go wrong):

- ``psutil.cpu_percent(None)`` is non-blocking (utilization since the previous call);
  the blocking form would stall the one sampling thread.
- RAPL (``/sys/class/powercap``): only the *package* domains ``intel-rapl:N`` whose
  ``name`` is ``package-N`` are read. Their sub-domains (``intel-rapl:N:M``: core, uncore,
  dram) overlap the package or are reported separately, the ``psys`` platform domain
  contains the packages, and ``intel-rapl-mmio:N`` repeats a package through another
  interface; summing any of them with the packages would count energy twice. DRAM energy
  is therefore not included, and RAPL covers the CPU packages only, not fans, disks or
  power-supply losses: a lower bound of the host's draw, not the profile model's
  "everything but the GPUs" (say so when comparing the two).
- ``energy_uj`` wraps at ``max_energy_range_uj``: a decrease is a wrap, added back once.
- ``energy_uj`` is root-only on current kernels (CVE-2020-8694) and absent in VMs: then
  host power comes from the node's power model in ``profiles/`` (:class:`HostPowerModel`)
  and the sample says ``MODEL`` (an estimate).
- The agent measures its own CPU and resident memory (``psutil.Process()``).

Every OS input is a constructor argument with the production default, so tests pass a
powercap tree in a temporary directory and a fake psutil.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil as _psutil

from agents.records import HostSample
from andreas.profiles import DEFAULT_HOST, Profiles, load_profiles
from andreas.sources import EnergySource, PowerSource

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
_PACKAGE_DIR = re.compile(r"intel-rapl:(\d+)")


class RaplUnavailable(Exception):
    """RAPL cannot be used on this host (absent, unreadable); the message says why."""


@dataclass(frozen=True, kw_only=True)
class HostPowerModel:
    """The profiles/ host model: ``idle_w`` with no GPU busy, linear up to ``busy_w``."""

    idle_w: float
    busy_w: float
    label: str

    def power_w(self, busy_fraction: float) -> float:
        f = min(max(busy_fraction, 0.0), 1.0)
        return self.idle_w + (self.busy_w - self.idle_w) * f

    @classmethod
    def from_profiles(cls, gpu_type: str | None,
                      profiles: Profiles | None = None) -> HostPowerModel:
        """The host entry for nodes of ``gpu_type`` (``default`` when unknown or None)."""
        profiles = profiles or load_profiles()
        host = profiles.host(gpu_type or DEFAULT_HOST)
        return cls(idle_w=host.idle_w, busy_w=host.busy_w,
                   label=f"profiles/hosts.toml [{host.name}]")

    @classmethod
    def for_gpu_models(cls, models: Sequence[str],
                       profiles: Profiles | None = None) -> HostPowerModel:
        """The model for a node whose GPUs NVML names ``models`` ("Tesla V100-PCIE-16GB")."""
        profiles = profiles or load_profiles()
        return cls.from_profiles(profile_gpu_type(models, profiles), profiles)


def profile_gpu_type(models: Sequence[str], profiles: Profiles | None = None) -> str | None:
    """The ``profiles/gpus.toml`` type named in NVML model names (most common), else None."""
    profiles = profiles or load_profiles()
    counts: dict[str, int] = {}
    for model in models:
        for gpu_type in profiles.gpus:
            if re.search(rf"(?<![A-Za-z0-9]){re.escape(gpu_type)}(?![0-9])", model,
                         re.IGNORECASE):
                counts[gpu_type] = counts.get(gpu_type, 0) + 1
                break
    return max(counts, key=lambda k: counts[k]) if counts else None


# --------------------------------------------------------------------------- RAPL

@dataclass(frozen=True, kw_only=True)
class RaplDomain:
    name: str                 # "package-0"
    path: Path                # .../intel-rapl:0
    max_energy_range_uj: int


class RaplReader:
    """Reads the package domains of a powercap tree; raises RaplUnavailable with a reason."""

    def __init__(self, powercap_root: str | Path = "/sys/class/powercap") -> None:
        self.root = Path(powercap_root)
        self.domains = self._discover()
        self.read_uj()   # readable now, or RaplUnavailable (permissions) at construction

    def _discover(self) -> list[RaplDomain]:
        if not self.root.is_dir():
            raise RaplUnavailable(f"{self.root} does not exist (no powercap: a VM, or not Linux)")
        domains: list[RaplDomain] = []
        entries = sorted((p for p in self.root.iterdir() if _PACKAGE_DIR.fullmatch(p.name)),
                         key=lambda p: int(p.name.split(":")[1]))
        for entry in entries:
            try:
                name = (entry / "name").read_text().strip()
                max_uj = int((entry / "max_energy_range_uj").read_text().strip())
            except (OSError, ValueError) as e:
                raise RaplUnavailable(f"{entry}: cannot read name/max_energy_range_uj: {e}") from e
            if not name.startswith("package"):
                continue   # psys (platform) contains the packages: never add it to them
            if max_uj <= 0:
                raise RaplUnavailable(f"{entry}: max_energy_range_uj is {max_uj}")
            domains.append(RaplDomain(name=name, path=entry, max_energy_range_uj=max_uj))
        if not domains:
            raise RaplUnavailable(f"no RAPL package domain (intel-rapl:N named package-N) "
                                  f"under {self.root} (a VM, or RAPL not exposed)")
        return domains

    def read_uj(self) -> list[int]:
        """Current ``energy_uj`` of every package domain, in domain order."""
        values: list[int] = []
        for d in self.domains:
            path = d.path / "energy_uj"
            try:
                values.append(int(path.read_text().strip()))
            except PermissionError as e:
                raise RaplUnavailable(
                    f"{path}: permission denied (energy_uj is readable by root only since "
                    f"the CVE-2020-8694 fix; grant read access, e.g. a udev rule or "
                    f"systemd ExecStartPre chmod, to use RAPL)") from e
            except (OSError, ValueError) as e:
                raise RaplUnavailable(f"{path}: cannot read: {e}") from e
        return values

    def delta_uj(self, before: Sequence[int], after: Sequence[int]) -> int:
        """Energy between two readings, summed over packages; a decrease is one wrap."""
        total = 0
        for d, a, b in zip(self.domains, before, after, strict=True):
            total += b - a if b >= a else b + d.max_energy_range_uj - a
        return total


# --------------------------------------------------------------------------- sampler

class HostSampler:
    """CPU, memory and host power of the node, plus the agent's own CPU and memory use.

    ``sample(now_mono, now_wall, busy_fraction)`` returns ``None`` on its first call (it
    takes the baselines: psutil's CPU counters, RAPL energy) and a :class:`HostSample`
    covering the interval since the previous call afterwards. ``busy_fraction`` (share of
    the node's GPUs that are busy, 0..1) only drives the model fallback.
    """

    def __init__(self, powercap_root: str | Path = "/sys/class/powercap", *,
                 psutil: Any = _psutil, fallback_model: HostPowerModel | None = None,
                 process: Any | None = None) -> None:
        self._psutil = psutil
        self._process = process if process is not None else psutil.Process()
        self.fallback_model = fallback_model
        self.powercap_root = Path(powercap_root)
        self.rapl: RaplReader | None = None
        self.rapl_problem: str | None = None
        try:
            self.rapl = RaplReader(powercap_root)
        except RaplUnavailable as e:
            self.rapl_problem = str(e)
            if fallback_model is not None:
                log.warning("RAPL not usable (%s); host power is ESTIMATED from %s "
                            "(idle %.0f W, busy %.0f W)", e, fallback_model.label,
                            fallback_model.idle_w, fallback_model.busy_w)
            else:
                log.warning("RAPL not usable (%s) and no host power model: host power is "
                            "not measured", e)
        self._last_mono: float | None = None
        self._last_uj: list[int] | None = None
        self._carry_uj = 0          # µJ not yet emitted, so the emitted mJ sum stays exact

    @property
    def power_source(self) -> PowerSource | None:
        """Where host power comes from now: RAPL, MODEL (estimated) or None."""
        if self.rapl is not None:
            return PowerSource.RAPL
        return PowerSource.MODEL if self.fallback_model is not None else None

    def sample(self, now_mono: float, now_wall: float,
               busy_fraction: float = 0.0) -> HostSample | None:
        cpu = float(self._psutil.cpu_percent(None))
        vm = self._psutil.virtual_memory()
        agent_cpu, agent_rss = self._agent_usage()
        uj = self._read_rapl()
        if self._last_mono is None or now_mono <= self._last_mono:
            self._last_mono, self._last_uj = now_mono, uj
            return None
        interval = now_mono - self._last_mono
        power_w: float | None = None
        energy_mj: int | None = None
        power_source: PowerSource | None = None
        energy_source: EnergySource | None = None
        if self.rapl is not None and uj is not None and self._last_uj is not None:
            total_uj = self.rapl.delta_uj(self._last_uj, uj) + self._carry_uj
            energy_mj, self._carry_uj = divmod(total_uj, 1000)
            power_w = (total_uj - self._carry_uj) / 1e6 / interval
            power_source, energy_source = PowerSource.RAPL, EnergySource.RAPL
        elif self.fallback_model is not None:
            power_w = self.fallback_model.power_w(busy_fraction)
            energy_mj = int(round(power_w * interval * 1000.0))
            power_source, energy_source = PowerSource.MODEL, EnergySource.MODEL
        self._last_mono, self._last_uj = now_mono, uj
        return HostSample(t=now_wall, interval_s=interval, cpu_utilization=cpu,
                          memory_used_mib=int(vm.total - vm.available) // _MIB,
                          host_power_w=power_w, power_source=power_source,
                          energy_mj=energy_mj, energy_source=energy_source,
                          agent_cpu_percent=agent_cpu, agent_rss_mib=agent_rss)

    def _read_rapl(self) -> list[int] | None:
        """RAPL energy now, or None (that interval then falls back to the model)."""
        if self.rapl is None:
            return None
        try:
            return self.rapl.read_uj()
        except RaplUnavailable as e:
            log.warning("RAPL read failed (%s); this interval uses the model", e)
            self._carry_uj = 0
            return None

    def _agent_usage(self) -> tuple[float | None, float | None]:
        try:
            cpu = float(self._process.cpu_percent(None))
            rss = self._process.memory_info().rss / _MIB
        except Exception as e:  # noqa: BLE001 - psutil.Error / OSError: report, don't stop
            log.debug("agent self-measurement failed: %s", e)
            return None, None
        return cpu, rss
