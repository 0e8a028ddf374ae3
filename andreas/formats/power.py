"""The power-limit parts of snapshots and traces (docs/FORMAT.md, "Power limits").

A node's ``power_limits`` (NVML's range, its default limit, the levels a plan may choose)
and a job's ``power_levels`` (per GPU type: limit, epoch time factor, GPU power) are read
as strictly as the rest of a document; the rules they must meet are
``andreas.levels.check_limits`` / ``check_points``. Documents without them load as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from andreas.errors import InputError
from andreas.levels import check_limits, check_points
from andreas.model import Job, Node, PowerLevel, PowerLimits
from andreas.formats.checks import Fields, _fail, check_list, check_name, check_number
from andreas.limits import MAX_POWER_W

_LIMITS_KEYS = ("min_w", "max_w", "default_w", "levels_w")
_LEVEL_KEYS = ("limit_w", "time_factor", "gpu_power_w")
MAX_LEVELS = 64
MAX_TIME_FACTOR = 100.0


def parse_limits(f: Fields) -> PowerLimits:
    """A node's ``power_limits``: NVML's range, the default limit and the levels to try."""
    d = Fields(f.get("power_limits"), f.label, _LIMITS_KEYS, prefix="power_limits.")
    levels = check_list(f.label, "power_limits.levels_w", d.get("levels_w"), nonempty=True)
    if len(levels) > MAX_LEVELS:
        _fail(f.label, "power_limits.levels_w", f"must have at most {MAX_LEVELS} levels",
              len(levels))
    limits = PowerLimits(
        min_w=d.number("min_w", gt=0, le=MAX_POWER_W), max_w=d.number("max_w", gt=0,
                                                                       le=MAX_POWER_W),
        default_w=d.number("default_w", gt=0, le=MAX_POWER_W),
        levels_w=tuple(check_number(f.label, f"power_limits.levels_w[{k}]", v, gt=0,
                                    le=MAX_POWER_W) for k, v in enumerate(levels)))
    problem = check_limits(f.label, limits)
    if problem:
        raise InputError(f"{f.label}: field 'power_limits' {problem}")
    return limits


def parse_levels(f: Fields) -> dict[str, tuple[PowerLevel, ...]]:
    """A job's ``power_levels``: per GPU type its points (limit, time factor, GPU power)."""
    raw = f.get("power_levels")
    if not isinstance(raw, Mapping):
        _fail(f.label, "power_levels", "must be an object {gpu_type: [level, ...]}", raw)
    out: dict[str, tuple[PowerLevel, ...]] = {}
    for gpu_type, seq in raw.items():
        check_name(f.label, "power_levels", gpu_type)
        field = f"power_levels.{gpu_type}"
        check_list(f.label, field, seq, nonempty=True)
        if len(seq) > MAX_LEVELS:
            _fail(f.label, field, f"must have at most {MAX_LEVELS} levels", len(seq))
        points = []
        for k, item in enumerate(seq):
            d = Fields(item, f.label, _LEVEL_KEYS, prefix=f"{field}[{k}].")
            points.append(PowerLevel(
                limit_w=d.number("limit_w", gt=0, le=MAX_POWER_W),
                time_factor=d.number("time_factor", gt=0, le=MAX_TIME_FACTOR),
                gpu_power_w=d.number("gpu_power_w", gt=0, le=MAX_POWER_W)))
        problem = check_points(tuple(points))
        if problem:
            raise InputError(f"{f.label}: field '{field}' {problem}")
        out[gpu_type] = tuple(sorted(points, key=lambda p: -p.limit_w))
    return out


def check_running_limit(label: str, job: Job, nodes: Sequence[Node]) -> None:
    """A running job's limit is one its node accepts (NVML's range; a document without
    ``power_limits`` for the node admits none)."""
    limit = job.running.power_limit_w if job.running is not None else None
    if limit is None or job.running is None:
        return
    node = next(n for n in nodes if n.name == job.running.node)
    lim = node.power_limits
    if lim is None:
        _fail(label, "running.power_limit_w", f"names a limit, but node {node.name} has no "
              "power_limits", limit)
    if not lim.min_w <= limit <= lim.max_w:
        _fail(label, "running.power_limit_w", f"is outside node {node.name}'s range "
              f"[{lim.min_w:g}, {lim.max_w:g}] W", limit)


def limits_to_dict(n: Node) -> dict[str, Any]:
    lim = n.power_limits
    if lim is None:
        return {}
    return {"power_limits": {"min_w": lim.min_w, "max_w": lim.max_w,
                             "default_w": lim.default_w, "levels_w": list(lim.levels_w)}}



def levels_to_dict(j: Job) -> dict[str, Any]:
    return {t: [{"limit_w": p.limit_w, "time_factor": p.time_factor,
                 "gpu_power_w": p.gpu_power_w} for p in points]
            for t, points in j.power_levels.items()}
