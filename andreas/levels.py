"""GPU power limits as a decision: which limits a job may run at on a node, and what each
one does to its time and to the node's power.

A node whose GPUs can be capped carries ``PowerLimits`` (NVML's constraints, the default
limit and the *levels* a plan may choose, the default first). A job carries, per GPU type,
``PowerLevel`` points: its epoch time at a limit over its epoch time at the GPU's default
limit, and the GPU's mean draw while it trains there (the Zeus NSDI '23 measurements, the
Job Profiler, or the fit in ``fit_levels``). The levels offered to a job on a node are
the node's levels the job has a point for, provided it has one at the node's default
(else the default alone: nothing to compare the draw with).

The model, one rule everywhere (optimizer, ``costs.evaluate``, simulator, bound):

- epoch time at a level = epoch time (at the default) x ``time_factor``;
- node power = the node's curve ``power_w[busy GPUs]`` (taken at the default limit) plus,
  for each job, its GPUs x (``gpu_power_w`` at its level - ``gpu_power_w`` at the
  default): ``delta_w`` below, <= 0 under a lower limit.

The default level of a node without limits is ``None`` in plans and documents, so plans
of documents without levels stay exactly as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from andreas.model import Job, Node, PowerLevel, PowerLimits, Trace

T = TypeVar("T", bound=Trace)
TOLERANCE = 1e-9


@dataclass(frozen=True)
class LevelOption:
    """A limit a job may run at on a node: None = the GPU's default as it is."""

    limit_w: float | None
    time_factor: float = 1.0
    delta_w: float = 0.0      # change of one busy GPU's draw against the default limit


DEFAULT = LevelOption(None)


def default_point(job: Job, gpu_type: str, limits: PowerLimits) -> PowerLevel | None:
    """The job's point at the node's default limit, if it has one."""
    for p in job.power_levels.get(gpu_type, ()):
        if abs(p.limit_w - limits.default_w) <= TOLERANCE:
            return p
    return None


def options(job: Job, node: Node) -> tuple[LevelOption, ...]:
    """The levels ``job`` may run at on ``node``, the default first (see the module doc)."""
    limits, gpu_type = node.power_limits, node.gpu_type
    if limits is None or gpu_type is None:
        return (DEFAULT,)
    base = default_point(job, gpu_type, limits)
    if base is None:
        return (LevelOption(limits.default_w),)
    points = {p.limit_w: p for p in job.power_levels[gpu_type]}
    out = [LevelOption(limits.default_w)]
    for level in limits.levels_w[1:]:
        p = points.get(level)
        if p is not None:
            out.append(LevelOption(level, p.time_factor / base.time_factor,
                                   p.gpu_power_w - base.gpu_power_w))
    return tuple(out)


def option_at(job: Job, node: Node, limit_w: float | None) -> LevelOption | None:
    """The option of ``limit_w`` (None or the default: the default) on ``node``, or None
    when the job may not run there at that limit."""
    opts = options(job, node)
    if limit_w is None:
        return opts[0]
    return next((o for o in opts if o.limit_w is not None
                 and abs(o.limit_w - limit_w) <= TOLERANCE), None)


def has_levels(trace: Trace) -> bool:
    """Some node offers a level below its default (else levels change nothing)."""
    return any(n.power_limits is not None and len(n.power_limits.levels_w) > 1
               for n in trace.nodes)


def without_levels(trace: T) -> T:
    """The same trace or snapshot with every GPU at its default limit: limits off."""
    if not any(n.power_limits is not None for n in trace.nodes) and not any(
            j.running is not None and j.running.power_limit_w is not None
            for j in trace.jobs):
        return trace
    nodes = tuple(replace(n, power_limits=None) for n in trace.nodes)
    jobs = tuple(replace(j, running=replace(j.running, power_limit_w=None))
                 if j.running is not None and j.running.power_limit_w is not None else j
                 for j in trace.jobs)
    return replace(trace, nodes=nodes, jobs=jobs)


def check_limits(label: str, limits: PowerLimits) -> str | None:
    """Why ``limits`` is not usable (one phrase naming the value), or None."""
    if not 0 < limits.min_w <= limits.max_w:
        return f"min_w must be > 0 and <= max_w ({limits.max_w:g}), got {limits.min_w:g}"
    if not limits.min_w <= limits.default_w <= limits.max_w:
        return (f"default_w must be within [{limits.min_w:g}, {limits.max_w:g}], "
                f"got {limits.default_w:g}")
    if not limits.levels_w or abs(limits.levels_w[0] - limits.default_w) > TOLERANCE:
        return f"levels_w must start with default_w ({limits.default_w:g})"
    for level in limits.levels_w:
        if not limits.min_w <= level <= limits.max_w:
            return (f"level {level:g} W is outside the GPU's range "
                    f"[{limits.min_w:g}, {limits.max_w:g}] W")
    if any(b >= a for a, b in zip(limits.levels_w, limits.levels_w[1:])):
        return "levels_w must decrease after the default"
    return None


def check_points(points: tuple[PowerLevel, ...]) -> str | None:
    """Why a job's points on one GPU type are not a usable profile, or None: distinct
    limits; a lower limit never faster nor drawing more (with 2 % of measurement noise
    allowed; ``fit_levels`` makes measured points monotone)."""
    ordered = sorted(points, key=lambda p: -p.limit_w)
    for p in ordered:
        if not (p.limit_w > 0 and p.time_factor > 0 and p.gpu_power_w > 0):
            return f"level {p.limit_w:g} W: limit, time_factor and gpu_power_w must be > 0"
    for hi, lo in zip(ordered, ordered[1:]):
        if abs(hi.limit_w - lo.limit_w) <= TOLERANCE:
            return f"level {lo.limit_w:g} W appears twice"
        if lo.time_factor < hi.time_factor * (1 - 0.02):
            return (f"not monotone: {lo.limit_w:g} W is faster than {hi.limit_w:g} W "
                    f"(time_factor {lo.time_factor:g} < {hi.time_factor:g})")
        if lo.gpu_power_w > hi.gpu_power_w * (1 + 0.02):
            return (f"not monotone: {lo.limit_w:g} W draws more than {hi.limit_w:g} W "
                    f"(gpu_power_w {lo.gpu_power_w:g} > {hi.gpu_power_w:g})")
    return None
