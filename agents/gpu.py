"""GPU inventory and sampling through NVML, keyed by GPU UUID.

The optimizer's energy costs are made of these numbers, so the sampler is written
around the ways NVML readings go wrong:

- Keys are UUIDs: NVML indices, ``CUDA_VISIBLE_DEVICES`` order and MIG ids disagree.
- Energy comes from ``nvmlDeviceGetTotalEnergyConsumption`` where the GPU has it (probed
  once per GPU: pre-Volta boards and many vGPUs lack it), else from the trapezoid of
  instant power over the monotonic interval. Every sample says which; "no reading" is
  ``None``, never 0 J.
- A counter that goes *down* was reset (driver reload, GPU reset): the interval is
  flagged (``counter_reset``) and its energy comes from integration, never from a
  subtraction or ``abs()``. A rise the board cannot have drawn (above twice its power
  limit) is flagged the same way.
- Power for integration is the instant-power field (``NVML_FI_DEV_POWER_INSTANT``);
  ``nvmlDeviceGetPowerUsage`` is a 1-s average on Ampere and newer and is only the
  fallback, recorded as ``PowerSource.AVERAGE``.
- Energy is emitted only over intervals of at least ``min_interval_s`` (1 s): the counter
  ticks every 10-100 ms, so shorter differences are noise. Readings in between still feed
  the trapezoid.
- MIG-enabled GPUs give no per-instance power: they are refused (marked in
  :class:`GpuInfo`, logged, never sampled) rather than counted twice.
- A GPU that falls off the bus or answers "unknown error" gets :class:`GpuGap` records
  (not zeros), is marked unhealthy while the others go on, and NVML is re-initialised with
  exponential back-off; a recovered GPU is re-baselined.
- An unofficial ``pynvml`` distribution can shadow NVIDIA's ``nvidia-ml-py``: checked at
  start (:func:`check_bindings`) and logged loudly.

Vendor errors are translated once, in :meth:`GpuSampler._call`, into the two private
exceptions the rest of the module handles (:class:`_NotSupported`, :class:`_DeviceFailed`);
nothing NVML-specific escapes :meth:`GpuSampler.sample`. The NVML module is a constructor
argument (the real ``pynvml`` by default, :class:`agents.nvml_fake.FakeNvml` only when asked
for), so tests run the same code without a GPU. Not thread-safe: one sampling thread owns
a sampler.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pynvml

from agents.bindings import BindingsCheck, NvmlModule, check_bindings
from agents.records import GpuGap, GpuInfo, GpuSample
from andreas.infra.backoff import Backoff
from andreas.errors import AndreasError
from andreas.sources import EnergySource, PowerSource

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
_MAX_REASON = 200   # a gap's reason is one short line (the store keeps 255 characters)

# Codes that mean "this GPU / driver cannot give that reading" (as opposed to a failure).
_UNSUPPORTED_CODES = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION,
                                pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
# A field id the driver does not know comes back per field as INVALID_ARGUMENT.
_FIELD_UNSUPPORTED_CODES = _UNSUPPORTED_CODES | {pynvml.NVML_ERROR_INVALID_ARGUMENT}


class NvmlUnavailable(AndreasError):
    """NVML cannot be initialised at start (no driver, no library): no GPU can be sampled."""


class _NotSupported(Exception):
    """This reading is not available on this GPU (or not to this user)."""


class _DeviceFailed(Exception):
    """The GPU did not answer (lost from the bus, unknown error, ...): a gap, not a value."""


# --------------------------------------------------------------------------- per-GPU state

@dataclass
class _Gpu:
    """What the sampler keeps per GPU between ticks."""

    info: GpuInfo
    handle: Any
    has_instant: bool = True
    unsupported: set[str] = field(default_factory=set)
    healthy: bool = True
    gap_reason: str = ""
    last_gap_mono: float = -math.inf
    # The open energy window (baseline = None: next reading starts one).
    window_start: float | None = None
    window_counter_mj: int | None = None
    window_integrated_mj: float = 0.0
    window_integration_ok: bool = True
    window_counter_ok: bool = True
    window_reset: bool = False
    process_seen_us: int = 0          # nvmlDeviceGetProcessUtilization's last timestamp
    last_mono: float | None = None
    last_power_w: float | None = None
    last_counter_mj: int | None = None

    def rebaseline(self) -> None:
        self.window_start = None
        self.last_mono = None
        self.last_power_w = None
        self.last_counter_mj = None


class GpuSampler:
    """Samples every non-MIG GPU of the node; ``start()`` once, then ``sample()`` per tick.

    ``sample(now_mono, now_wall)`` returns, per GPU, a :class:`GpuSample` when at least
    ``min_interval_s`` of monotonic time has passed since its previous sample (nothing in
    between, and nothing on the first call, which takes the baseline), or a
    :class:`GpuGap` (at most one per ``min_interval_s``) while the GPU cannot be read.
    """

    def __init__(self, nvml: NvmlModule = pynvml, *, min_interval_s: float = 1.0,
                 backoff_initial_s: float = 2.0, backoff_max_s: float = 300.0,
                 check: Callable[[object], BindingsCheck] = check_bindings) -> None:
        self._nvml = nvml
        self.min_interval_s = float(min_interval_s)
        self.backoff = Backoff(initial_s=float(backoff_initial_s), max_s=float(backoff_max_s))
        self._check = check
        self.bindings: BindingsCheck | None = None
        self._gpus: dict[str, _Gpu] = {}          # by UUID, in NVML index order at start
        self._started = False
        self._initialized = False
        self._unresolved_indices: set[int] = set()
        self._reinit_failures = 0                 # failed re-initialisations in a row
        self._next_reinit_mono: float | None = None
        self._codes = _codes(nvml)
        self._inventory_version = 0

    # ------------------------------------------------------------------ public API

    @property
    def inventory(self) -> list[GpuInfo]:
        """Every GPU seen, MIG-refused ones included (``mig_enabled=True``)."""
        return [g.info for g in self._gpus.values()]

    @property
    def inventory_version(self) -> int:
        """Grows whenever a GPU is added, comes back or turns unhealthy: the daemon compares
        it between ticks to know when to re-register the inventory and health."""
        return self._inventory_version

    @property
    def sampled_uuids(self) -> list[str]:
        """The GPUs ``sample()`` reports on (everything but MIG-refused GPUs)."""
        return [u for u, g in self._gpus.items() if not g.info.mig_enabled]

    @property
    def unhealthy(self) -> frozenset[str]:
        """UUIDs that could not be read at the last attempt (lost, unknown error)."""
        return frozenset(u for u, g in self._gpus.items()
                         if not g.healthy and not g.info.mig_enabled)

    def counters(self) -> dict[str, int | None]:
        """Each sampled healthy GPU's energy counter at its last reading (None: none)."""
        return {u: g.last_counter_mj for u, g in self._gpus.items()
                if not g.info.mig_enabled and g.healthy}

    def has_instant_power(self, uuid: str) -> bool:
        """Whether the instant-power field works on this GPU (else the 1-s average is used)."""
        return self._gpus[uuid].has_instant

    def start(self) -> list[GpuInfo]:
        """Check the bindings, initialise NVML, take the inventory; raises NvmlUnavailable."""
        if self._started:
            return self.inventory
        self.bindings = self._check(self._nvml)
        if self.bindings.fake:
            log.warning("GPU sampler: %s", self.bindings.summary())
        else:
            for problem in self.bindings.problems:
                log.warning("NVML BINDINGS PROBLEM: %s", problem)
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as e:
            raise NvmlUnavailable(f"NVML cannot be initialised: {e}") from e
        self._initialized = True
        self._started = True
        self._discover(initial=True)
        if self._unresolved_indices:
            self._schedule_reinit(None)
        return self.inventory

    def sample(self, now_mono: float, now_wall: float) -> list[GpuSample | GpuGap]:
        """One tick: readings of every healthy GPU, gaps for the others. Never raises for
        a device error; ``now_mono`` must come from the same monotonic clock every call."""
        if not self._started:
            raise RuntimeError("GpuSampler.sample() before start()")
        try:
            self._maybe_reinit(now_mono)
        except Exception:
            log.exception("NVML: re-initialisation failed unexpectedly")
            self._next_backoff(now_mono)
        out: list[GpuSample | GpuGap] = []
        for gpu in self._gpus.values():
            if gpu.info.mig_enabled:
                continue
            if gpu.healthy and self._initialized:
                try:
                    item = self._tick(gpu, now_mono, now_wall)
                except _DeviceFailed as e:
                    self._mark_lost(gpu, str(e), now_mono)
                except Exception as e:
                    log.exception("GPU %s: unexpected error while sampling", gpu.info.uuid)
                    self._mark_lost(gpu, f"unexpected error: {e!r}", now_mono)
                else:
                    if item is not None:
                        out.append(item)
                    continue
            if now_mono - gpu.last_gap_mono >= self.min_interval_s:
                gpu.last_gap_mono = now_mono
                reason = "NVML not initialised" if not self._initialized else "unhealthy"
                out.append(GpuGap(uuid=gpu.info.uuid, t=now_wall,
                                  reason=(gpu.gap_reason or reason)[:_MAX_REASON]))
        return out

    def close(self) -> None:
        """Shut NVML down (idempotent)."""
        if self._initialized:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as e:
                log.debug("nvmlShutdown: %s", e)
            self._initialized = False

    # ------------------------------------------------------------------ the vendor boundary

    def _call(self, fn_name: str, *args: Any) -> Any:
        """Call one NVML function; translate its errors into _NotSupported / _DeviceFailed."""
        fn = getattr(self._nvml, fn_name, None)
        if fn is None:
            raise _NotSupported(f"{fn_name} missing from these NVML bindings")
        try:
            return fn(*args)
        except self._nvml.NVMLError as e:
            code = getattr(e, "value", None)
            if code in self._codes.unsupported:
                raise _NotSupported(f"{fn_name}: {e}") from e
            raise _DeviceFailed(f"{fn_name}: {e}") from e

    def _field_w(self, gpu: _Gpu, field_id: int) -> float:
        """One power field value in watts (fields report per-field return codes)."""
        values = self._call("nvmlDeviceGetFieldValues", gpu.handle, [field_id])
        v = values[0]
        ret = int(v.nvmlReturn)
        if ret != self._codes.success:
            if ret in self._codes.field_unsupported:
                raise _NotSupported(f"field {field_id}: code {ret}")
            raise _DeviceFailed(f"nvmlDeviceGetFieldValues field {field_id}: "
                                f"{_error_text(self._nvml, ret)}")
        return _field_number(self._nvml, v) / 1000.0

    # ------------------------------------------------------------------ inventory

    def _discover(self, *, initial: bool) -> set[str]:
        """Enumerate GPUs by index, key them by UUID; returns the UUIDs seen now."""
        seen: set[str] = set()
        self._unresolved_indices = set()
        try:
            count = int(self._call("nvmlDeviceGetCount"))
        except (_NotSupported, _DeviceFailed) as e:
            log.error("NVML: cannot count GPUs: %s", e)
            return seen
        for index in range(count):
            try:
                handle = self._call("nvmlDeviceGetHandleByIndex", index)
                uuid = _text(self._call("nvmlDeviceGetUUID", handle))
            except (_NotSupported, _DeviceFailed) as e:
                log.warning("NVML: GPU at index %d cannot be read (%s); retrying with back-off",
                            index, e)
                self._unresolved_indices.add(index)
                continue
            seen.add(uuid)
            gpu = self._gpus.get(uuid)
            if gpu is not None and gpu.healthy and not initial:
                gpu.handle = handle           # still readable: keep its energy window
                if gpu.info.index != index:
                    gpu.info = replace(gpu.info, index=index)
                continue
            try:
                fresh = self._probe(index, handle, uuid)
            except _DeviceFailed as e:
                log.warning("NVML: GPU %s (index %d) fails while probed: %s", uuid, index, e)
                self._unresolved_indices.add(index)
                continue
            if gpu is None:
                if not initial:
                    log.warning("NVML: new GPU %s at index %d", uuid, index)
            else:
                log.warning("NVML: GPU %s is back (index %d); energy re-baselined", uuid, index)
            self._gpus[uuid] = fresh
            self._inventory_version += 1
        return seen

    def _probe(self, index: int, handle: Any, uuid: str) -> _Gpu:
        """Inventory of one GPU; probes the energy counter and instant power ONCE."""
        def optional(fn_name: str) -> Any:
            try:
                return self._call(fn_name, handle)
            except _NotSupported:
                return None

        name = optional("nvmlDeviceGetName")
        memory = optional("nvmlDeviceGetMemoryInfo")
        limit_mw = optional("nvmlDeviceGetPowerManagementLimit")
        mig = optional("nvmlDeviceGetMigMode")
        mig_enabled = bool(mig) and int(mig[0]) == self._codes.mig_enable
        has_counter = optional("nvmlDeviceGetTotalEnergyConsumption") is not None
        gpu = _Gpu(info=GpuInfo(uuid=uuid, index=index,
                                model=_text(name) if name is not None else "unknown",
                                memory_mib=int(memory.total) // _MIB if memory is not None else 0,
                                power_limit_w=limit_mw / 1000.0 if limit_mw is not None else None,
                                has_energy_counter=has_counter, mig_enabled=mig_enabled),
                   handle=handle)
        if self._codes.fi_power_instant is None:
            gpu.has_instant = False
        else:
            try:
                self._field_w(gpu, self._codes.fi_power_instant)
            except _NotSupported:
                gpu.has_instant = False
        if mig_enabled:
            log.warning("GPU %s (%s): MIG mode is enabled; NVML gives no per-instance power, so "
                        "the agent refuses this GPU (not sampled, not attributed) rather than "
                        "count its power once per instance", uuid, gpu.info.model)
        elif not has_counter:
            log.info("GPU %s (%s): no energy counter; energy from integrated %s power",
                     uuid, gpu.info.model, "instant" if gpu.has_instant else "1-s average")
        return gpu

    # ------------------------------------------------------------------ faults and re-init

    def _mark_lost(self, gpu: _Gpu, reason: str, now_mono: float) -> None:
        if gpu.healthy:
            self._inventory_version += 1
            log.error("GPU %s: %s; marked unhealthy, NVML re-initialisation with back-off",
                      gpu.info.uuid, reason)
        gpu.healthy = False
        gpu.gap_reason = reason
        gpu.rebaseline()
        self._schedule_reinit(now_mono)

    def _schedule_reinit(self, now_mono: float | None) -> None:
        if self._next_reinit_mono is None:
            self._next_reinit_mono = (-math.inf if now_mono is None
                                      else now_mono + self._reinit_delay_s())

    def _maybe_reinit(self, now_mono: float) -> None:
        if self._next_reinit_mono is None or now_mono < self._next_reinit_mono:
            return
        if self._next_reinit_mono == -math.inf:   # scheduled before any clock was seen
            self._next_reinit_mono = now_mono + self._reinit_delay_s()
            return
        log.info("NVML: re-initialising (back-off %.0f s)", self._reinit_delay_s())
        self.close()
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as e:
            log.error("NVML: re-initialisation failed: %s", e)
            for gpu in self._gpus.values():
                if gpu.healthy:
                    self._inventory_version += 1
                    gpu.healthy = False
                    gpu.gap_reason = f"nvmlInit: {e}"
                    gpu.rebaseline()
            self._next_backoff(now_mono)
            return
        self._initialized = True
        seen = self._discover(initial=False)
        for uuid, gpu in self._gpus.items():
            if uuid not in seen and gpu.healthy:
                self._inventory_version += 1
                gpu.healthy = False
                gpu.gap_reason = "not found after NVML re-initialisation"
                gpu.rebaseline()
        if self.unhealthy or self._unresolved_indices:
            self._next_backoff(now_mono)
        else:
            log.info("NVML: every GPU readable again")
            self._reinit_failures = 0
            self._next_reinit_mono = None

    def _reinit_delay_s(self) -> float:
        return self.backoff.delay_s(self._reinit_failures)

    def _next_backoff(self, now_mono: float) -> None:
        self._reinit_failures += 1
        self._next_reinit_mono = now_mono + self._reinit_delay_s()

    # ------------------------------------------------------------------ one GPU, one tick

    def _read_power(self, gpu: _Gpu) -> tuple[float | None, PowerSource | None]:
        if gpu.has_instant and self._codes.fi_power_instant is not None:
            try:
                return self._field_w(gpu, self._codes.fi_power_instant), PowerSource.INSTANT
            except _NotSupported:
                gpu.has_instant = False
                log.info("GPU %s: instant power field stopped working; using the 1-s average",
                         gpu.info.uuid)
        if "power_usage" not in gpu.unsupported:
            try:
                return self._call("nvmlDeviceGetPowerUsage", gpu.handle) / 1000.0, \
                    PowerSource.AVERAGE
            except _NotSupported:
                gpu.unsupported.add("power_usage")
        return None, None

    def _read_counter(self, gpu: _Gpu) -> int | None:
        if not gpu.info.has_energy_counter:
            return None
        try:
            return int(self._call("nvmlDeviceGetTotalEnergyConsumption", gpu.handle))
        except _NotSupported:
            log.warning("GPU %s: energy counter stopped working; integrating power instead",
                        gpu.info.uuid)
            gpu.info = replace(gpu.info, has_energy_counter=False)
            return None

    def _optional(self, gpu: _Gpu, key: str, fn_name: str) -> Any:
        if key in gpu.unsupported:
            return None
        try:
            return self._call(fn_name, gpu.handle)
        except _NotSupported:
            gpu.unsupported.add(key)
            return None

    def _process_sm(self, gpu: _Gpu) -> tuple[tuple[int, float], ...]:
        """Mean SM utilisation per PID since the last call (only read for a GPU that runs
        several processes: what splits a shared GPU's energy). NVML answers NOT_FOUND when
        it has no new sample: that is no reading, not a fault."""
        if "process_utilization" in gpu.unsupported:
            return ()
        try:
            rows = self._call("nvmlDeviceGetProcessUtilization", gpu.handle,
                              gpu.process_seen_us)
        except _NotSupported:
            gpu.unsupported.add("process_utilization")
            return ()
        except _DeviceFailed:
            return ()
        per_pid: dict[int, list[float]] = {}
        for r in rows or ():
            gpu.process_seen_us = max(gpu.process_seen_us, int(r.timeStamp))
            per_pid.setdefault(int(r.pid), []).append(float(r.smUtil))
        return tuple(sorted((pid, sum(v) / len(v)) for pid, v in per_pid.items()))

    @staticmethod
    def _plausible(gpu: _Gpu, delta_mj: int, interval_s: float) -> bool:
        """A counter rise above twice the power limit (+50 W) over the window is not energy
        the board drew (a reset to another baseline, a bad read): don't trust it."""
        if gpu.info.power_limit_w is None:
            return True
        return delta_mj <= (2.0 * gpu.info.power_limit_w + 50.0) * interval_s * 1000.0

    def _tick(self, gpu: _Gpu, now: float, now_wall: float) -> GpuSample | None:
        power_w, power_source = self._read_power(gpu)
        counter = self._read_counter(gpu)
        if gpu.window_start is None or gpu.last_mono is None:
            gpu.window_start, gpu.window_counter_mj = now, counter
            gpu.window_integrated_mj, gpu.window_reset = 0.0, False
            gpu.window_integration_ok = power_w is not None
            gpu.window_counter_ok = counter is not None
            gpu.last_mono, gpu.last_power_w, gpu.last_counter_mj = now, power_w, counter
            return None
        dt = now - gpu.last_mono
        if dt <= 0:
            return None
        if power_w is not None and gpu.last_power_w is not None:
            gpu.window_integrated_mj += (power_w + gpu.last_power_w) / 2.0 * dt * 1000.0
        else:
            gpu.window_integration_ok = False
        if counter is None or gpu.last_counter_mj is None:
            gpu.window_counter_ok = False
        elif counter < gpu.last_counter_mj:
            if not gpu.window_reset:
                log.warning("GPU %s: energy counter went down (%d -> %d mJ): reset; this "
                            "interval's energy comes from integrated power",
                            gpu.info.uuid, gpu.last_counter_mj, counter)
            gpu.window_reset = True
        gpu.last_mono, gpu.last_power_w, gpu.last_counter_mj = now, power_w, counter
        interval = now - gpu.window_start
        if interval < self.min_interval_s:
            return None

        if (not gpu.window_reset and gpu.window_counter_ok and counter is not None
                and gpu.window_counter_mj is not None
                and not self._plausible(gpu, counter - gpu.window_counter_mj, interval)):
            log.warning("GPU %s: energy counter rose by %d mJ in %.3f s, more than the board "
                        "can draw; interval flagged, energy from integrated power",
                        gpu.info.uuid, counter - gpu.window_counter_mj, interval)
            gpu.window_reset = True
        energy_mj: int | None = None
        energy_source: EnergySource | None = None
        if (gpu.window_counter_ok and not gpu.window_reset and counter is not None
                and gpu.window_counter_mj is not None):
            energy_mj, energy_source = counter - gpu.window_counter_mj, EnergySource.COUNTER
        elif gpu.window_integration_ok:
            energy_mj = int(round(gpu.window_integrated_mj))
            energy_source = EnergySource.INTEGRATED
        util = self._optional(gpu, "utilization", "nvmlDeviceGetUtilizationRates")
        memory = self._optional(gpu, "memory", "nvmlDeviceGetMemoryInfo")
        procs = self._optional(gpu, "processes", "nvmlDeviceGetComputeRunningProcesses")
        sm = self._process_sm(gpu) if procs and len(procs) > 1 else ()
        sample = GpuSample(
            uuid=gpu.info.uuid, t=now_wall, interval_s=interval, power_w=power_w,
            power_source=power_source, energy_mj=energy_mj, energy_source=energy_source,
            utilization=float(util.gpu) if util is not None else None,
            memory_used_mib=int(memory.used) // _MIB if memory is not None else None,
            pids=tuple(sorted(int(p.pid) for p in procs)) if procs else (),
            counter_reset=gpu.window_reset,
            process_memory_mib=_process_memory(procs) if procs and len(procs) > 1 else (),
            process_sm=sm, counter_mj=counter)
        gpu.window_start, gpu.window_counter_mj = now, counter
        gpu.window_integrated_mj, gpu.window_reset = 0.0, False
        gpu.window_integration_ok = power_w is not None
        gpu.window_counter_ok = counter is not None
        return sample


# --------------------------------------------------------------------------- helpers

def _process_memory(procs: Any) -> tuple[tuple[int, int], ...]:
    """(PID, MiB) of NVML's compute processes (memory not reported: left out)."""
    out: dict[int, int] = {}
    for p in procs:
        used = getattr(p, "usedGpuMemory", None)
        if isinstance(used, int) and 0 <= used < 1 << 50:     # NVML_VALUE_NOT_AVAILABLE: huge
            out[int(p.pid)] = out.get(int(p.pid), 0) + used // _MIB
    return tuple(sorted(out.items()))


@dataclass(frozen=True)
class _Codes:
    success: int
    unsupported: frozenset[int]
    field_unsupported: frozenset[int]
    fi_power_instant: int | None
    mig_enable: int


def _codes(nvml: Any) -> _Codes:
    """The NVML constants the sampler needs, read from the module it was given."""
    def const(name: str, default: int) -> int:
        return int(getattr(nvml, name, default))
    unsupported = frozenset({const("NVML_ERROR_NOT_SUPPORTED", 3),
                             const("NVML_ERROR_NO_PERMISSION", 4),
                             const("NVML_ERROR_FUNCTION_NOT_FOUND", 13)})
    fi = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
    return _Codes(success=const("NVML_SUCCESS", 0), unsupported=unsupported,
                  field_unsupported=unsupported | {const("NVML_ERROR_INVALID_ARGUMENT", 2)},
                  fi_power_instant=int(fi) if fi is not None else None,
                  mig_enable=const("NVML_DEVICE_MIG_ENABLE", 1))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _error_text(nvml: Any, code: int) -> str:
    try:
        return str(nvml.NVMLError(code))
    except Exception:  # noqa: BLE001 - only for a message
        return f"NVML error {code}"


def _field_number(nvml: Any, v: Any) -> float:
    """The number in a ``c_nvmlFieldValue_t``, whatever its declared value type."""
    kinds = {int(getattr(nvml, "NVML_VALUE_TYPE_DOUBLE", 0)): "dVal",
             int(getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_INT", 1)): "uiVal",
             int(getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2)): "ulVal",
             int(getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3)): "ullVal",
             int(getattr(nvml, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4)): "sllVal",
             int(getattr(nvml, "NVML_VALUE_TYPE_SIGNED_INT", 5)): "siVal"}
    return float(getattr(v.value, kinds.get(int(v.valueType), "uiVal")))
