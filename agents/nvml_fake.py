"""A fake of the pynvml API subset the GPU sampler uses, for machines without GPUs.

Why a fake of the *module* and not of the sampler: the sampler's NVML code (error
translation, field values, counter resets, re-initialisation) is the part most likely to
be wrong, so the fake sits under it and the same code runs in CI as on a GPU node.

What it models, deterministically:

- GPUs from a spec such as ``"2xV100"`` or ``"8xT4,2xV100"``; UUIDs
  ``GPU-fake-<node>-<n>`` numbered in spec order, while the NVML index order can be
  permuted (``index_order``) so tests catch code that keys by index.
- Power follows utilization: ``idle_w + (busy_w - idle_w) * utilization / 100`` with the
  figures of ``profiles/gpus.toml``. Utilization is piecewise constant in time, set with
  :meth:`FakeNvml.set_busy` (the daemon calls it when a container gets a GPU) or scripted
  in advance with :meth:`FakeNvml.script`; piecewise constant so the counter can be the
  *exact* integral.
- Time comes from an injected ``clock`` (monotonic seconds); every call reads it, so a
  test that advances its own clock gets exact, repeatable energies.
- ``nvmlDeviceGetTotalEnergyConsumption`` (mJ) is the floor of the exact integral of
  power, from a non-zero start value (counters count since driver load); it is
  NotSupported on pre-Volta types (K80, M60) as on real hardware.
- ``nvmlDeviceGetPowerUsage`` (mW) is the mean power over the last second, the semantics
  of Ampere and newer; the instant-power field (``NVML_FI_DEV_POWER_INSTANT``) is the
  power at the call.
- Power limits, as NVML sets them (milliwatts): the range and default of
  ``profiles/power_limits.toml`` for the GPU type, NotSupported for a type without an
  entry, InvalidArgument outside the range, NoPermission after
  :meth:`FakeNvml.deny_limits` (as for a non-root caller). A busy GPU draws at most its
  limit. With ``limit_dir`` the limits live in files
  ``power-limit-<uuid>`` there, so the privileged daemon (``agents/powerd.py``) that sets
  them and the agent that samples the GPUs, two processes, see the same fake GPUs.
- Faults, each at a time on the injected clock: a GPU lost (``NVMLError_GpuIsLost``)
  and optionally recovered with its counter reset; unknown errors in a window; a field
  made NotSupported; a counter reset; MIG mode on; ``nvmlInit`` failing until a time.

Errors and structures are the real pynvml ones, so ``except pynvml.NVMLError`` catches
the fake's errors too. The fake is only ever used when asked for
(``andreas-agent --fake-gpus SPEC`` -> :func:`make_fake_nvml`), never as a silent
fallback for a missing driver.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml

from andreas.errors import InputError
from andreas.profiles import Profiles
from agents.fake_gpus import (MAX_FAKE_GPUS, FakeGpuSpec,  # noqa: F401 (callers import them here)
                              _Step, _Timeline, parse_spec)

# --------------------------------------------------------------------------- constants
# Re-exported so the fake can stand in for the module (``nvml.NVML_...``, ``nvml.NVMLError``).
NVMLError = pynvml.NVMLError
NVMLError_NotSupported = pynvml.NVMLError_NotSupported
NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
NVMLError_Unknown = pynvml.NVMLError_Unknown
NVMLError_Uninitialized = pynvml.NVMLError_Uninitialized
NVMLError_InvalidArgument = pynvml.NVMLError_InvalidArgument
NVMLError_DriverNotLoaded = pynvml.NVMLError_DriverNotLoaded
NVML_SUCCESS = pynvml.NVML_SUCCESS
NVML_ERROR_UNINITIALIZED = pynvml.NVML_ERROR_UNINITIALIZED
NVML_ERROR_INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
NVML_ERROR_NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION
NVML_ERROR_NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND
NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
NVML_ERROR_FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
NVML_ERROR_UNKNOWN = pynvml.NVML_ERROR_UNKNOWN
NVML_FI_DEV_POWER_AVERAGE = pynvml.NVML_FI_DEV_POWER_AVERAGE
NVML_FI_DEV_POWER_INSTANT = pynvml.NVML_FI_DEV_POWER_INSTANT
NVML_VALUE_TYPE_UNSIGNED_INT = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
NVML_DEVICE_MIG_DISABLE = pynvml.NVML_DEVICE_MIG_DISABLE
NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

#: Names accepted by :meth:`FakeNvml.set_not_supported`, and the call each one breaks.
FIELDS: Mapping[str, str] = {
    "energy": "nvmlDeviceGetTotalEnergyConsumption",
    "power_instant": "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)",
    "power_average": "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_AVERAGE)",
    "power_usage": "nvmlDeviceGetPowerUsage",
    "power_limit": "nvmlDeviceGetPowerManagementLimit",
    "utilization": "nvmlDeviceGetUtilizationRates",
    "memory": "nvmlDeviceGetMemoryInfo",
    "processes": "nvmlDeviceGetComputeRunningProcesses",
    "process_utilization": "nvmlDeviceGetProcessUtilization",
}

_MIB = 1024 * 1024
_NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId of a process on a non-MIG GPU


@dataclass
class _FakeGpu:
    serial: int                      # position in the spec (UUID number)
    uuid: str
    spec: FakeGpuSpec
    timeline: _Timeline
    counter_start_mj: int
    resets: list[float] = field(default_factory=list)          # sorted reset times
    lost: list[tuple[float, float]] = field(default_factory=list)
    unknown: list[tuple[float, float]] = field(default_factory=list)
    not_supported: set[str] = field(default_factory=set)
    mig: bool | None = None          # None: not MIG-capable (NotSupported)
    limit_mw: int | None = None      # the power limit in force (None: the type has none)


def _locked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a fake NVML call under the fake's lock (set_busy may run on another thread)."""
    @functools.wraps(fn)
    def wrapper(self: FakeNvml, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return fn(self, *args, **kwargs)
    return wrapper


class _FakeHandle:
    """Opaque device handle, as pynvml's ``c_nvmlDevice_t`` pointer is."""

    __slots__ = ("_owner", "_serial")

    def __init__(self, owner: FakeNvml, serial: int) -> None:
        self._owner = owner
        self._serial = serial

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self._serial}>"


def _within(windows: Iterable[tuple[float, float]], t: float) -> bool:
    return any(a <= t < b for a, b in windows)


# --------------------------------------------------------------------------- the fake

class FakeNvml:
    """Stands in for the ``pynvml`` module: pass it as ``GpuSampler(nvml=fake)``.

    The ``nvml*`` methods mirror pynvml's functions (same names, arguments, units and
    errors); the other public methods drive the fake (utilization, faults) and answer
    tests (:meth:`energy_j`). Thread-safe: the daemon's sampling thread reads while its
    container watcher calls :meth:`set_busy`.
    """

    IS_FAKE = True
    NVMLError = pynvml.NVMLError

    def __getattr__(self, name: str) -> Any:
        """NVML constants and error classes (``NVML_*``, ``NVMLError_*``) are pynvml's own;
        any other missing name is an NVML function the fake does not offer."""
        if name.startswith(("NVML_", "NVMLError_")):
            return getattr(pynvml, name)
        raise AttributeError(f"fake NVML does not implement {name!r}")

    def __init__(self, gpus: Sequence[FakeGpuSpec], *, node: str = "node",
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 index_order: Sequence[int] | None = None,
                 counter_start_mj: Sequence[int] | None = None,
                 limit_dir: str | None = None) -> None:
        """``index_order[i]`` is the spec position of the GPU at NVML index ``i``;
        ``limit_dir``: where the power limits live when several processes share the GPUs."""
        if not gpus:
            raise InputError("fake NVML: needs at least one GPU")
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.RLock()
        self.origin_s = clock()
        n = len(gpus)
        order = list(range(n)) if index_order is None else list(index_order)
        if sorted(order) != list(range(n)):
            raise InputError(f"fake NVML: index_order must be a permutation of 0..{n - 1}, "
                             f"got {list(index_order or ())}")
        starts = (list(counter_start_mj) if counter_start_mj is not None
                  else [1_000_000_000 + 7_919_000 * i for i in range(n)])
        node_id = re.sub(r"[^A-Za-z0-9_.-]", "-", node)
        self._gpus = [_FakeGpu(serial=i, uuid=f"GPU-fake-{node_id}-{i}", spec=s,
                               timeline=_Timeline(self.origin_s, s),
                               counter_start_mj=int(starts[i]))
                      for i, s in enumerate(gpus)]
        self._order = order
        self._limit_dir = limit_dir
        self._limits_denied = False
        for g in self._gpus:
            if g.spec.limit_range_w is not None:
                g.limit_mw = int(round(g.spec.limit_range_w[2] * 1000))
                g.timeline.cap_w = g.limit_mw / 1000.0
        self._init_count = 0
        self._init_fail_until = -math.inf
        self.init_calls: list[float] = []      # clock time of every nvmlInit (back-off tests)
        self.shutdown_calls: list[float] = []

    # ------------------------------------------------------------------ driving the fake

    @property
    def uuids(self) -> list[str]:
        """UUIDs in spec order (not NVML index order)."""
        return [g.uuid for g in self._gpus]

    def uuid_at_index(self, index: int) -> str:
        return self._gpus[self._order[index]].uuid

    def set_busy(self, uuid: str, utilization: float = 100.0, pids: Iterable[int] = (), *,
                 memory_used_mib: int | None = None, at_s: float | None = None,
                 process_sm: Iterable[float] = ()) -> None:
        """From ``at_s`` (default now) the GPU runs at ``utilization`` percent for ``pids``
        (``process_sm``: each pid's SM percent; default the utilisation split equally)."""
        with self._lock:
            g = self._by_uuid(uuid)
            g.timeline.add(self._clock() if at_s is None else at_s, utilization,
                           tuple(pids), memory_used_mib, tuple(process_sm))

    def set_idle(self, uuid: str, *, at_s: float | None = None) -> None:
        self.set_busy(uuid, 0.0, (), at_s=at_s)

    def script(self, uuid: str, steps: Iterable[tuple[float, float]]) -> None:
        """Utilization steps ``(t, percent)`` in time order, possibly in the future."""
        for t, utilization in steps:
            self.set_busy(uuid, utilization, (), at_s=t)

    def power_w(self, uuid: str, t: float | None = None) -> float:
        """The fake's true power at ``t`` (default now)."""
        g = self._by_uuid(uuid)
        return g.timeline.step_at(self._clock() if t is None else t).power_w

    def energy_j(self, uuid: str, t0: float, t1: float) -> float:
        """The exact energy of the GPU over [t0, t1] (what a perfect meter would say)."""
        tl = self._by_uuid(uuid).timeline
        return tl.energy_j(t1) - tl.energy_j(t0)

    def lose_gpu(self, uuid: str, *, at_s: float | None = None,
                 until_s: float = math.inf, reset_counter: bool = True) -> None:
        """The GPU falls off the bus at ``at_s``; back at ``until_s``, with its counter reset."""
        with self._lock:
            g = self._by_uuid(uuid)
            start = self._clock() if at_s is None else at_s
            g.lost.append((start, until_s))
            if reset_counter and until_s != math.inf:
                bisect.insort(g.resets, until_s)

    def raise_unknown(self, uuid: str, *, at_s: float | None = None,
                      until_s: float = math.inf) -> None:
        """Every call on the GPU raises ``NVMLError_Unknown`` in [at_s, until_s)."""
        with self._lock:
            g = self._by_uuid(uuid)
            g.unknown.append((self._clock() if at_s is None else at_s, until_s))

    def set_not_supported(self, uuid: str, *names: str) -> None:
        """Make fields of :data:`FIELDS` NotSupported on the GPU (e.g. ``"energy"``)."""
        with self._lock:
            g = self._by_uuid(uuid)
            for name in names:
                if name not in FIELDS:
                    raise ValueError(f"unknown fake NVML field {name!r} "
                                     f"(known: {', '.join(FIELDS)})")
                g.not_supported.add(name)

    def reset_counter(self, uuid: str, *, at_s: float | None = None) -> None:
        """The energy counter goes back to 0 at ``at_s`` (driver reload, GPU reset)."""
        with self._lock:
            g = self._by_uuid(uuid)
            bisect.insort(g.resets, self._clock() if at_s is None else at_s)

    def set_mig(self, uuid: str, enabled: bool = True) -> None:
        """Make the GPU MIG-capable (as an A100/H100 would be) with MIG mode on or off."""
        with self._lock:
            self._by_uuid(uuid).mig = enabled

    def deny_limits(self, denied: bool = True) -> None:
        """Setting a limit raises NoPermission (as for a caller that is not root)."""
        self._limits_denied = denied

    def fail_init(self, *, until_s: float = math.inf) -> None:
        """``nvmlInit`` raises ``NVMLError_DriverNotLoaded`` until ``until_s``."""
        self._init_fail_until = until_s

    # ------------------------------------------------------------------ pynvml: library

    @_locked
    def nvmlInit(self) -> None:
        with self._lock:
            now = self._clock()
            self.init_calls.append(now)
            if now < self._init_fail_until:
                raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)
            self._init_count += 1

    @_locked
    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    @_locked
    def nvmlShutdown(self) -> None:
        with self._lock:
            self.shutdown_calls.append(self._clock())
            if self._init_count == 0:
                raise NVMLError(NVML_ERROR_UNINITIALIZED)
            self._init_count -= 1

    @_locked
    def nvmlSystemGetDriverVersion(self) -> str:
        self._check_init()
        return "fake"

    @_locked
    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        return len(self._gpus)

    @_locked
    def nvmlDeviceGetHandleByIndex(self, index: int) -> _FakeHandle:
        self._check_init()
        if not isinstance(index, int) or not 0 <= index < len(self._gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        g = self._gpus[self._order[index]]
        self._check_faults(g, self._clock())
        return _FakeHandle(self, g.serial)

    @_locked
    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> _FakeHandle:
        self._check_init()
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        for g in self._gpus:
            if g.uuid == text:
                self._check_faults(g, self._clock())
                return _FakeHandle(self, g.serial)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    # ------------------------------------------------------------------ pynvml: device

    @_locked
    def nvmlDeviceGetUUID(self, handle: _FakeHandle) -> str:
        return self._device(handle)[0].uuid

    @_locked
    def nvmlDeviceGetName(self, handle: _FakeHandle) -> str:
        return self._device(handle)[0].spec.name

    @_locked
    def nvmlDeviceGetIndex(self, handle: _FakeHandle) -> int:
        g, _ = self._device(handle)
        return self._order.index(g.serial)

    @_locked
    def nvmlDeviceGetMemoryInfo(self, handle: _FakeHandle) -> Any:
        g, t = self._device(handle, "memory")
        total = g.spec.memory_mib * _MIB
        used = min(g.timeline.step_at(t).memory_used_mib * _MIB, total)
        return pynvml.c_nvmlMemory_t(total=total, free=total - used, used=used)

    @_locked
    def nvmlDeviceGetPowerManagementLimit(self, handle: _FakeHandle) -> int:
        g, _ = self._device(handle, "power_limit")
        if g.limit_mw is None:
            return int(round(g.spec.busy_w * 1000))
        return g.limit_mw

    @_locked
    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: _FakeHandle) -> list[int]:
        g, _ = self._device(handle, "power_limit")
        rng = self._range(g)
        return [int(round(rng[0] * 1000)), int(round(rng[1] * 1000))]

    @_locked
    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: _FakeHandle) -> int:
        g, _ = self._device(handle, "power_limit")
        return int(round(self._range(g)[2] * 1000))

    @_locked
    def nvmlDeviceSetPowerManagementLimit(self, handle: _FakeHandle, limit: int) -> None:
        """Milliwatts within the constraints, else InvalidArgument (NVML's answer)."""
        g, t = self._device(handle, "power_limit")
        lo, hi, _ = self._range(g)
        if self._limits_denied:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        if not isinstance(limit, int) or not lo * 1000 <= limit <= hi * 1000:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if self._limit_dir is not None:
            from andreas.infra.fileio import write_text_atomic
            write_text_atomic(self._limit_file(g), f"{limit}\n")
        self._set_limit(g, t, limit)

    @_locked
    def nvmlDeviceGetPowerUsage(self, handle: _FakeHandle) -> int:
        """Milliwatts, mean over the last second (Ampere-and-newer semantics)."""
        g, t = self._device(handle, "power_usage")
        return int(round(self._average_w(g, t) * 1000))

    @_locked
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: _FakeHandle) -> int:
        """Millijoules since driver load (or the last reset): floor of the exact integral."""
        g, t = self._device(handle, "energy")
        if not g.spec.energy_counter:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return self._counter_mj(g, t)

    @_locked
    def nvmlDeviceGetFieldValues(self, handle: _FakeHandle, fieldIds: Sequence[Any]) -> Any:
        g, t = self._device(handle)
        values = (pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        stamp_us = int(self._wall() * 1e6)
        for i, fid in enumerate(fieldIds):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            v = values[i]
            v.fieldId, v.scopeId, v.timestamp, v.latencyUsec = fid, scope, stamp_us, 0
            v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT
            if (fid == NVML_FI_DEV_POWER_INSTANT and g.spec.instant_field
                    and "power_instant" not in g.not_supported):
                v.value.uiVal = int(round(g.timeline.step_at(t).power_w * 1000))
                v.nvmlReturn = NVML_SUCCESS
            elif (fid == NVML_FI_DEV_POWER_AVERAGE and g.spec.instant_field
                    and "power_average" not in g.not_supported):
                v.value.uiVal = int(round(self._average_w(g, t) * 1000))
                v.nvmlReturn = NVML_SUCCESS
            else:
                v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
        return values

    @_locked
    def nvmlDeviceGetUtilizationRates(self, handle: _FakeHandle) -> Any:
        g, t = self._device(handle, "utilization")
        if g.mig:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # as on a MIG-enabled A100/H100
        u = int(round(g.timeline.step_at(t).utilization))
        return pynvml.c_nvmlUtilization_t(gpu=u, memory=u // 2)

    @_locked
    def nvmlDeviceGetComputeRunningProcesses(self, handle: _FakeHandle) -> list[Any]:
        g, t = self._device(handle, "processes")
        step = g.timeline.step_at(t)
        share = (step.memory_used_mib * _MIB // len(step.pids)) if step.pids else 0
        return [pynvml.nvmlFriendlyObject({"pid": pid, "usedGpuMemory": share,
                                           "gpuInstanceId": _NO_INSTANCE,
                                           "computeInstanceId": _NO_INSTANCE})
                for pid in step.pids]

    @_locked
    def nvmlDeviceGetProcessUtilization(self, handle: _FakeHandle, timeStamp: int) -> list[Any]:
        """One sample per process of the step in force now, stamped now (microseconds);
        NOT_FOUND when nothing ran since ``timeStamp``, as NVML does."""
        g, t = self._device(handle, "process_utilization")
        step = g.timeline.step_at(t)
        stamp = int(t * 1e6)
        if not step.pids or stamp <= timeStamp:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        sm = step.process_sm or tuple(step.utilization / len(step.pids) for _ in step.pids)
        return [pynvml.nvmlFriendlyObject({"pid": pid, "timeStamp": stamp,
                                           "smUtil": int(round(u)), "memUtil": 0,
                                           "encUtil": 0, "decUtil": 0})
                for pid, u in zip(step.pids, sm)]

    @_locked
    def nvmlDeviceGetMigMode(self, handle: _FakeHandle) -> list[int]:
        g, _ = self._device(handle)
        if g.mig is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        mode = NVML_DEVICE_MIG_ENABLE if g.mig else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    # ------------------------------------------------------------------ internals

    def _by_uuid(self, uuid: str) -> _FakeGpu:
        for g in self._gpus:
            if g.uuid == uuid:
                return g
        raise KeyError(f"fake NVML has no GPU {uuid!r} (has: {', '.join(self.uuids)})")

    def _check_init(self) -> None:
        if self._init_count == 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _check_faults(self, g: _FakeGpu, t: float) -> None:
        if _within(g.lost, t):
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        if _within(g.unknown, t):
            raise NVMLError(NVML_ERROR_UNKNOWN)

    def _device(self, handle: Any, field_name: str | None = None) -> tuple[_FakeGpu, float]:
        with self._lock:
            self._check_init()
            if not isinstance(handle, _FakeHandle) or handle._owner is not self:
                raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
            g = self._gpus[handle._serial]
            t = self._clock()
            self._check_faults(g, t)
            if field_name is not None and field_name in g.not_supported:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            self._sync_limit(g, t)
            return g, t

    def _range(self, g: _FakeGpu) -> tuple[float, float, float]:
        if g.spec.limit_range_w is None or g.limit_mw is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return g.spec.limit_range_w

    def _limit_file(self, g: _FakeGpu) -> str:
        import os
        assert self._limit_dir is not None
        return os.path.join(self._limit_dir, f"power-limit-{g.uuid}")

    def _set_limit(self, g: _FakeGpu, t: float, limit_mw: int) -> None:
        if limit_mw != g.limit_mw:
            g.limit_mw = limit_mw
            g.timeline.recap(t, limit_mw / 1000.0)

    def _sync_limit(self, g: _FakeGpu, t: float) -> None:
        """With ``limit_dir``, the limit another process set (a missing file: the default)."""
        if self._limit_dir is None or g.limit_mw is None or g.spec.limit_range_w is None:
            return
        try:
            with open(self._limit_file(g)) as f:
                value = int(f.read().strip())
        except FileNotFoundError:
            value = int(round(g.spec.limit_range_w[2] * 1000))
        except (OSError, ValueError):
            return
        self._set_limit(g, t, value)

    def _average_w(self, g: _FakeGpu, t: float) -> float:
        t0 = max(t - 1.0, self.origin_s)
        if t <= t0:
            return g.timeline.step_at(t).power_w
        return (g.timeline.energy_j(t) - g.timeline.energy_j(t0)) / (t - t0)

    def _counter_mj(self, g: _FakeGpu, t: float) -> int:
        i = bisect.bisect_right(g.resets, t) - 1
        if i < 0:
            return g.counter_start_mj + math.floor(g.timeline.energy_j(t) * 1000.0)
        since = g.resets[i]
        return math.floor((g.timeline.energy_j(t) - g.timeline.energy_j(since)) * 1000.0)


def make_fake_nvml(spec: str, *, node: str = "node",
                   clock: Callable[[], float] = time.monotonic,
                   wall_clock: Callable[[], float] = time.time,
                   index_order: Sequence[int] | None = None,
                   profiles: Profiles | None = None,
                   limit_dir: str | None = None) -> FakeNvml:
    """The fake the daemon uses for ``--fake-gpus SPEC`` (``"2xV100"``, ``"8xT4,2xV100"``)."""
    return FakeNvml(parse_spec(spec, profiles), node=node, clock=clock,
                    wall_clock=wall_clock, index_order=index_order, limit_dir=limit_dir)
