"""What a fake GPU is (``--fake-gpus 2xV100``) and how it draws power over time.

The spec comes from profiles/ (idle and busy power, power limits) and a table of what
NVML reports per model; the timeline holds a GPU's utilization steps and the exact
integral of its power, which the fake NVML's energy counter and tests read.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.attribution import ContainerJob
from andreas.errors import InputError
from andreas.profiles import Profiles, load_profiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Model:
    """What NVML would report for a GPU type besides power (which comes from profiles/)."""

    name: str
    memory_mib: int
    energy_counter: bool   # nvmlDeviceGetTotalEnergyConsumption: Volta and newer
    instant_field: bool    # NVML_FI_DEV_POWER_INSTANT


_MODELS: Mapping[str, _Model] = {
    "V100": _Model("Tesla V100-PCIE-16GB", 16384, True, True),
    "T4": _Model("Tesla T4", 15360, True, True),
    "K80": _Model("Tesla K80", 11441, False, False),   # Kepler: no energy counter
    "M60": _Model("Tesla M60", 8192, False, False),    # Maxwell: no energy counter
}


@dataclass(frozen=True, kw_only=True)
class FakeGpuSpec:
    """One fake GPU: its type (a ``profiles/gpus.toml`` entry) and board power figures."""

    gpu_type: str
    idle_w: float
    busy_w: float
    name: str
    memory_mib: int
    energy_counter: bool = True
    instant_field: bool = True
    # NVML's power-limit constraints and default (W); None: the type cannot be capped
    limit_range_w: tuple[float, float, float] | None = None


MAX_FAKE_GPUS = 64         # a node; 10**6 fake GPUs would make the agent sample for ever


def parse_spec(spec: str, profiles: Profiles | None = None) -> list[FakeGpuSpec]:
    """``"2xV100"``, ``"8xT4,2xV100"`` or ``"V100"`` -> one :class:`FakeGpuSpec` per GPU."""
    profiles = profiles or load_profiles()
    out: list[FakeGpuSpec] = []
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"fake_gpus: expected COUNTxTYPE[,COUNTxTYPE...] such as 2xV100, "
                         f"got {spec!r}", field="fake_gpus")
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(?:(\d{1,9})\s*[xX*]\s*)?([A-Za-z0-9_.-]+)\s*", part)
        if m is None:
            raise InputError(f"fake_gpus: part {part.strip()!r} of {spec!r} is not "
                             "COUNTxTYPE (such as 2xV100)", field="fake_gpus")
        count = int(m.group(1)) if m.group(1) is not None else 1
        gpu_type = m.group(2)
        if count < 1:
            raise InputError(f"fake_gpus: count in {part.strip()!r} must be >= 1, got {count}",
                             field="fake_gpus")
        if count + len(out) > MAX_FAKE_GPUS:
            raise InputError(f"fake_gpus: {spec!r} makes more than {MAX_FAKE_GPUS} GPUs on one "
                             "node", field="fake_gpus")
        power = profiles.gpus.get(gpu_type)
        if power is None:
            raise InputError(f"fake_gpus: unknown GPU type {gpu_type!r} in {spec!r} "
                             f"(known: {', '.join(sorted(profiles.gpus))})", field="fake_gpus")
        model = _MODELS.get(gpu_type, _Model(f"NVIDIA {gpu_type}", 16384, True, True))
        lim = profiles.power_limits.get(gpu_type)
        limits = (lim.min_w, lim.max_w, lim.default_w) if lim is not None else None
        out.extend(FakeGpuSpec(gpu_type=gpu_type, idle_w=power.idle_w, busy_w=power.busy_w,
                               name=model.name, memory_mib=model.memory_mib,
                               energy_counter=model.energy_counter,
                               instant_field=model.instant_field, limit_range_w=limits)
                   for _ in range(count))
    return out


# --------------------------------------------------------------------------- timeline

@dataclass
class _Step:
    t: float
    utilization: float
    power_w: float
    pids: tuple[int, ...]
    memory_used_mib: int
    energy_before_j: float  # exact integral of power from the origin to t
    process_sm: tuple[float, ...] = ()   # SM percent per pid (default: utilisation split)


class _Timeline:
    """Piecewise-constant utilization of one GPU and the exact integral of its power."""

    def __init__(self, origin: float, spec: FakeGpuSpec) -> None:
        self.spec = spec
        self.cap_w = math.inf            # the power limit in force (busy power is capped)
        self.steps = [_Step(origin, 0.0, spec.idle_w, (), 0, 0.0)]
        self.times = [origin]

    def power_w(self, utilization: float) -> float:
        busy = self.spec.idle_w + (self.spec.busy_w - self.spec.idle_w) * utilization / 100.0
        return max(self.spec.idle_w, min(busy, self.cap_w))

    def recap(self, t: float, cap_w: float) -> None:
        """The limit changes at ``t``: the same load, drawn under the new cap."""
        last = self.step_at(t)
        self.cap_w = cap_w
        self.add(max(t, self.steps[-1].t), last.utilization, last.pids, last.memory_used_mib,
                 last.process_sm)

    def step_at(self, t: float) -> _Step:
        i = bisect.bisect_right(self.times, t) - 1
        return self.steps[max(i, 0)]

    def energy_j(self, t: float) -> float:
        """Exact integral of power from the origin to ``t`` (0 before the origin)."""
        i = bisect.bisect_right(self.times, t) - 1
        if i < 0:
            return 0.0
        s = self.steps[i]
        return s.energy_before_j + s.power_w * (t - s.t)

    def add(self, t: float, utilization: float, pids: tuple[int, ...],
            memory_used_mib: int | None, process_sm: tuple[float, ...] = ()) -> None:
        if not 0.0 <= utilization <= 100.0:
            raise ValueError(f"utilization must be in [0, 100] percent, got {utilization!r}")
        last = self.steps[-1]
        if t < last.t:
            raise ValueError(f"utilization steps must come in time order: {t} < {last.t} "
                             "(a scripted step lies in the future)")
        if memory_used_mib is None:
            memory_used_mib = 0 if not pids else int(self.spec.memory_mib * 0.6)
        if process_sm and len(process_sm) != len(pids):
            raise ValueError(f"process_sm needs one value per pid, got {len(process_sm)} for "
                             f"{len(pids)}")
        step = _Step(t, float(utilization), self.power_w(utilization), tuple(pids),
                     int(memory_used_mib), self.energy_j(t), tuple(process_sm))
        if t == last.t:
            step.energy_before_j = last.energy_before_j
            self.steps[-1] = step
        else:
            self.steps.append(step)
            self.times.append(t)


Busy = dict[str, tuple[int, tuple[tuple[int, int], ...]]]   # GPU -> (milli-GPU, (PID, share))


def drive_fake(fake: Any, current: Sequence[ContainerJob],
               pids_of: Callable[[str], tuple[int, ...]], busy: Busy) -> Busy:
    """Fake GPUs run at 100 % while containers hold them, idle otherwise; each
    container's main PID is a 'process' NVML lists (so the PID check works), using its
    share of the SMs (a whole GPU: all of it; shares: in proportion). ``busy``: what was
    set last time (only changes are sent); returns what is set now."""
    held: dict[str, int] = {}                       # milli-GPU held per GPU
    procs: dict[str, list[tuple[int, int]]] = {}    # (PID, share) per GPU
    for job in current:
        for uuid in job.gpu_uuids:
            held[uuid] = held.get(uuid, 0) + job.share
            procs.setdefault(uuid, []).extend(
                (pid, job.share) for pid in pids_of(job.container_id))
    wanted = {uuid: (min(1000, m), tuple(sorted(procs[uuid]))) for uuid, m in held.items()}
    for uuid in set(busy) | set(wanted):
        if busy.get(uuid) == wanted.get(uuid):
            continue
        try:
            if uuid in wanted:
                milli, ps = wanted[uuid]
                util = 100.0 * milli / 1000.0
                total = sum(s for _, s in ps)
                fake.set_busy(uuid, util, [p for p, _ in ps],
                              process_sm=[util * s / total for _, s in ps])
            else:
                fake.set_idle(uuid)
        except Exception as e:  # noqa: BLE001 - a label naming a GPU the fake lacks
            log.debug("fake GPU %s: %s", uuid, e)
    return wanted
