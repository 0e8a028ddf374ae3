"""Reference hardware and application data from ``profiles/`` (human-edited TOML).

The cost model needs a node power curve ``P_n(g)`` and per-epoch times ``t(type, g)``
before the store has measured any. Those numbers come from spec sheets, public idle
readings and the project's example trace; every one carries a ``source`` string so an
operator can tell a datasheet value from an estimate, and the loader refuses a number
without one. Errors are one ``InputError`` line naming the file, the entry and the field.

Power model (profiles/README.md): a node with G GPUs of one type, g of them busy, draws

    P(g) = host_idle + (host_busy - host_idle) * g / G + G * gpu_idle + g * (gpu_busy - gpu_idle)

Speed-up model: Amdahl's law, ``t(g) = t(1) * (s + (1 - s) / g)`` with the
application's serial fraction ``s`` in (0, 1), so more GPUs always help, sub-linearly.

Power limits (``power_limits.toml``: NVML's range, default and the levels to try per GPU
type) and the workload sets under ``workloads/`` (applications as in ``apps.toml`` plus,
per GPU type, their time factor and GPU power at each level: ``andreas/levels.py``) are
read by ``load_power_limits`` and ``Profiles.workload``. A level table that is not
monotone or lacks the default limit is reported once (a warning naming the application
and GPU type) and dropped: that application then runs at the default limit there.
"""

from __future__ import annotations

import functools
import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from andreas.errors import InputError
from andreas.formats.snapshot import Fields, check_integer, check_name, check_number
from andreas.levels import check_limits, check_points
from andreas.model import PowerLevel, PowerLimits

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "profiles"
DEFAULT_HOST = "default"
_POWER_KEYS = ("description", "idle_w", "busy_w", "source")
_APP_KEYS = ("description", "epochs", "serial_fraction", "epoch_s", "source")
_WORKLOAD_APP_KEYS = _APP_KEYS + ("power",)
_LIMIT_KEYS = ("description", "min_w", "max_w", "default_w", "levels_w", "source")
_LEVEL_TABLE_KEYS = ("limit_w", "time_factor", "gpu_power_w", "level_source")
log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class PowerProfile:
    """Idle and busy watts of one GPU, or of the host of one kind of node."""

    name: str
    idle_w: float
    busy_w: float
    description: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AppProfile:
    """One application: 1-GPU epoch time per GPU type, Amdahl serial fraction, epoch range."""

    name: str
    epoch_s: Mapping[str, float]
    serial_fraction: float
    epochs: tuple[int, int]
    description: str = ""
    sources: Mapping[str, Any] = field(default_factory=dict)
    # per GPU type: its power levels (limit, time factor, GPU power) and each one's source
    power: Mapping[str, tuple[PowerLevel, ...]] = field(default_factory=dict)
    level_sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Profiles:
    """Everything in a profiles directory; ``path`` says where it came from (for messages)."""

    path: Path
    gpus: Mapping[str, PowerProfile]
    hosts: Mapping[str, PowerProfile]
    apps: Mapping[str, AppProfile]
    power_limits: Mapping[str, PowerLimits] = field(default_factory=dict)

    def host(self, gpu_type: str) -> PowerProfile:
        """The host of a node with ``gpu_type`` GPUs, else the ``default`` host."""
        host = self.hosts.get(gpu_type) or self.hosts.get(DEFAULT_HOST)
        if host is None:
            raise InputError(f"{self.path / 'hosts.toml'}: no entry for GPU type "
                             f"{gpu_type!r} and no '{DEFAULT_HOST}' entry")
        return host

    def node_power_w(self, gpu_type: str, gpus: int) -> tuple[float, ...]:
        """Whole-node watts with g = 0 .. gpus GPUs busy (the module docstring's model)."""
        if gpu_type not in self.gpus:
            raise InputError(f"{self.path / 'gpus.toml'}: no entry for GPU type {gpu_type!r} "
                             f"(known: {', '.join(sorted(self.gpus))})")
        if gpus < 1:
            raise InputError(f"node power: gpus must be >= 1, got {gpus}")
        gpu, host = self.gpus[gpu_type], self.host(gpu_type)
        return tuple(round(host.idle_w + (host.busy_w - host.idle_w) * g / gpus
                           + gpus * gpu.idle_w + g * (gpu.busy_w - gpu.idle_w), 3)
                     for g in range(gpus + 1))

    def epoch_times(self, app: str, gpu_type: str, max_gpus: int) -> tuple[float, ...]:
        """Seconds per epoch of ``app`` on g = 1 .. max_gpus GPUs of ``gpu_type`` (Amdahl)."""
        profile = self.apps.get(app)
        if profile is None:
            raise InputError(f"{self.path / 'apps.toml'}: no entry for application {app!r} "
                             f"(known: {', '.join(sorted(self.apps))})")
        t1 = profile.epoch_s.get(gpu_type)
        if t1 is None:
            raise InputError(f"{self.path / 'apps.toml'}: entry {app}: field 'epoch_s' has no "
                             f"time for GPU type {gpu_type!r}")
        s = profile.serial_fraction
        return tuple(round(t1 * (s + (1 - s) / g), 3) for g in range(1, max_gpus + 1))


    def workload(self, name: str) -> Profiles:
        """These profiles with the applications of ``workloads/<name>.toml`` instead of
        ``apps.toml`` (e.g. ``zeus``: the six Zeus NSDI '23 workloads with power levels)."""
        path = self.path / "workloads" / f"{name}.toml"
        if not path.is_file():
            known = sorted(p.stem for p in (self.path / "workloads").glob("*.toml"))
            raise InputError(f"workloads: no workload set {name!r} (known: "
                             f"{', '.join(known) or 'none'})")
        apps = {app: _app(app, raw, path, workload=True) for app, raw in _read(path).items()}
        _check_types(apps, self.gpus, path)
        return replace(self, apps=MappingProxyType(apps))

    def node_limits(self, gpu_type: str) -> PowerLimits | None:
        """The power limits of a GPU type (None: not settable, or not known here)."""
        return self.power_limits.get(gpu_type)


def load_profiles(path: str | Path | None = None) -> Profiles:
    """Read ``gpus.toml``, ``hosts.toml`` and ``apps.toml`` from ``path`` (default: the repo's)."""
    if path is None:
        return _default_profiles()
    root = Path(path)
    gpus = {name: _power(name, raw, root / "gpus.toml")
            for name, raw in _read(root / "gpus.toml").items()}
    hosts = {name: _power(name, raw, root / "hosts.toml")
             for name, raw in _read(root / "hosts.toml").items()}
    apps = {name: _app(name, raw, root / "apps.toml")
            for name, raw in _read(root / "apps.toml").items()}
    _check_types(apps, gpus, root / "apps.toml")
    limits = load_power_limits(root) if (root / "power_limits.toml").is_file() else {}
    return Profiles(path=root, gpus=MappingProxyType(gpus), hosts=MappingProxyType(hosts),
                    apps=MappingProxyType(apps), power_limits=MappingProxyType(limits))


def _check_types(apps: Mapping[str, AppProfile], gpus: Mapping[str, PowerProfile],
                 path: Path) -> None:
    for app in apps.values():
        for gpu_type in app.epoch_s:
            if gpu_type not in gpus:
                raise InputError(f"{path}: entry {app.name}: field "
                                 f"'epoch_s.{gpu_type}' names a GPU type gpus.toml lacks")


def load_power_limits(path: str | Path | None = None) -> dict[str, PowerLimits]:
    """``power_limits.toml``: per GPU type NVML's range, the default and the levels."""
    file = Path(path or DEFAULT_DIR) / "power_limits.toml"
    out = {}
    for name, raw in _read(file).items():
        label = f"{file}: entry {name}"
        check_name(str(file), "entry name", name)
        f = Fields(raw, label, _LIMIT_KEYS)
        levels = f.get("levels_w")
        if not isinstance(levels, list) or not levels:
            raise InputError(f"{label}: field 'levels_w' must be a non-empty list, got "
                             f"{levels!r}")
        limits = PowerLimits(min_w=f.number("min_w", gt=0), max_w=f.number("max_w", gt=0),
                             default_w=f.number("default_w", gt=0),
                             levels_w=tuple(check_number(label, f"levels_w[{k}]", v, gt=0)
                                            for k, v in enumerate(levels)))
        problem = check_limits(label, limits)
        if problem:
            raise InputError(f"{label}: {problem}")
        _sources(label, f, {k: None for k in ("min_w", "max_w", "default_w", "levels_w")})
        out[name] = limits
    return out


@functools.lru_cache(maxsize=1)
def _default_profiles() -> Profiles:
    return load_profiles(DEFAULT_DIR)


def node_power_w(gpu_type: str, gpus: int) -> tuple[float, ...]:
    """``Profiles.node_power_w`` of the default profiles."""
    return load_profiles().node_power_w(gpu_type, gpus)


def epoch_times(app: str, gpu_type: str, max_gpus: int) -> tuple[float, ...]:
    """``Profiles.epoch_times`` of the default profiles."""
    return load_profiles().epoch_times(app, gpu_type, max_gpus)


# --------------------------------------------------------------------------- parsing

def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not TOML: {e}") from None
    if not doc:
        raise InputError(f"{path}: has no entries")
    for name, value in doc.items():
        if not isinstance(value, dict):
            raise InputError(f"{path}: entry {name}: must be a table [{name}], got {value!r}")
    return doc


def _power(name: str, raw: Any, path: Path) -> PowerProfile:
    label = f"{path}: entry {name}"
    check_name(f"{path}", "entry name", name)
    f = Fields(raw, label, _POWER_KEYS)
    idle = f.number("idle_w", ge=0)
    busy = f.number("busy_w", ge=0)
    if busy < idle:
        raise InputError(f"{label}: field 'busy_w' must be >= idle_w ({idle:g}), got {busy:g}")
    return PowerProfile(name=name, idle_w=idle, busy_w=busy, description=f.text("description"),
                        sources=_sources(label, f, {"idle_w": None, "busy_w": None}))


def _app(name: str, raw: Any, path: Path, workload: bool = False) -> AppProfile:
    label = f"{path}: entry {name}"
    check_name(f"{path}", "entry name", name)
    f = Fields(raw, label, _WORKLOAD_APP_KEYS if workload else _APP_KEYS)
    rng = f.get("epochs")
    if not isinstance(rng, list) or len(rng) != 2:
        raise InputError(f"{label}: field 'epochs' must be [min, max], got {rng!r}")
    lo = check_integer(label, "epochs[0]", rng[0], ge=1)
    hi = check_integer(label, "epochs[1]", rng[1], ge=lo)
    serial = f.number("serial_fraction", gt=0)
    if serial >= 1:
        raise InputError(f"{label}: field 'serial_fraction' must be < 1, got {serial:g}")
    times_raw = f.get("epoch_s")
    if not isinstance(times_raw, Mapping) or not times_raw:
        raise InputError(f"{label}: field 'epoch_s' must be a table {{gpu_type = seconds}}, "
                         f"got {times_raw!r}")
    times = {check_name(label, "epoch_s", t): check_number(label, f"epoch_s.{t}", v, gt=0)
             for t, v in times_raw.items()}
    wanted: dict[str, tuple[str, ...] | None] = {"epochs": None, "serial_fraction": None,
                                                  "epoch_s": tuple(times)}
    power, level_sources = _power_tables(label, f) if f.has("power") else ({}, {})
    if power:
        wanted["power"] = tuple(power)
    sources = _sources(label, f, wanted)
    return AppProfile(name=name, epoch_s=MappingProxyType(times), serial_fraction=serial,
                      epochs=(lo, hi), description=f.text("description"), sources=sources,
                      power=MappingProxyType(power),
                      level_sources=MappingProxyType(level_sources))


def _power_tables(label: str, f: Fields) -> tuple[dict[str, tuple[PowerLevel, ...]],
                                                   dict[str, tuple[str, ...]]]:
    """``[app.power.TYPE]``: parallel lists limit_w / time_factor / gpu_power_w /
    level_source. A table that breaks the rules (``levels.check_points``) or lacks the
    time factor 1 of its first (default) level is a warning and is dropped."""
    raw = f.get("power")
    if not isinstance(raw, Mapping):
        raise InputError(f"{label}: field 'power' must be a table per GPU type, got {raw!r}")
    power, sources = {}, {}
    for gpu_type, table in raw.items():
        t = Fields(table, label, _LEVEL_TABLE_KEYS, prefix=f"power.{gpu_type}.")
        cols = {k: t.get(k) for k in _LEVEL_TABLE_KEYS}
        n = len(cols["limit_w"]) if isinstance(cols["limit_w"], list) else -1
        if n < 1 or any(not isinstance(v, list) or len(v) != n for v in cols.values()):
            raise InputError(f"{label}: field 'power.{gpu_type}' must have lists limit_w, "
                             "time_factor, gpu_power_w, level_source of one length")
        points = tuple(PowerLevel(
            limit_w=check_number(label, f"power.{gpu_type}.limit_w[{k}]", w, gt=0),
            time_factor=check_number(label, f"power.{gpu_type}.time_factor[{k}]", x, gt=0),
            gpu_power_w=check_number(label, f"power.{gpu_type}.gpu_power_w[{k}]", p, gt=0))
            for k, (w, x, p) in enumerate(zip(cols["limit_w"], cols["time_factor"],
                                              cols["gpu_power_w"])))
        problem = check_points(points)
        if problem is None and abs(points[0].time_factor - 1.0) > 1e-9:
            problem = "the first level (the default limit) must have time_factor 1"
        if problem:
            log.warning("%s: GPU %s: power levels dropped, the application runs at the "
                        "default limit there: %s", label, gpu_type, problem)
            continue
        power[gpu_type] = points
        sources[gpu_type] = tuple(str(x) for x in cols["level_source"])
    return power, sources


def _sources(label: str, f: Fields, wanted: dict[str, tuple[str, ...] | None]
             ) -> Mapping[str, Any]:
    """Every number needs a source: a string per field, or for a table a string or per-key ones."""
    src = f.get("source")
    if not isinstance(src, Mapping):
        raise InputError(f"{label}: field 'source' must be a table with a string per number")
    out: dict[str, Any] = {}
    for key, keys in wanted.items():
        value = src.get(key)
        if keys is not None and isinstance(value, Mapping):
            for k in keys:
                _source_text(label, f"source.{key}.{k}", value.get(k))
            out[key] = MappingProxyType(dict(value))
        else:
            out[key] = _source_text(label, f"source.{key}", value)
    return MappingProxyType(out)


def _source_text(label: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{label}: field '{field}' is missing: every number needs a source "
                         "(where it comes from)")
    return value
