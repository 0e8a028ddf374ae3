"""Power levels in the manager's snapshot (``andreas/levels.py``): which limits each node
may be planned at, each job's figures per limit, and the limit running attempts hold.

- A node gets ``PowerLimits`` when its agent reported that its GPUs accept limits
  (``nodes.power_caps``: NVML's range and default, through ``andreas-powerd``) and
  ``profiles/power_limits.toml`` names levels for its GPU type: the reported default
  first, then the profile's levels within the reported range. A profile level outside
  that range is one warning naming the node and the level, and is left out. A node that
  cannot set limits (no daemon, no permission, unsupported GPU) or never reported is
  planned at the default, as is every node with ``[manager] power_levels = false``.
- A job's levels come from the Job Profiler's level measurements on this cluster (the
  automatic profiling's ``app_levels`` rows), else from its application's tables in
  ``profiles/`` (``apps.toml`` and ``workloads/*.toml``; a table that is not monotone or
  lacks the default was dropped with a warning when it was read). Without them the job
  runs at the default limit.
- A running job carries the limit its attempt was planned at (``job_attempts.
  power_limit_w``), so the policy knows what changing it means (nothing: a limit
  changes in place, the job keeps running).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, SupportsFloat

from andreas.model import Job, Node, PowerLevel, PowerLimits, Snapshot
from andreas.profiles import Profiles

if TYPE_CHECKING:
    from andreas.store.nodes import Db

log = logging.getLogger(__name__)
_warned: set[tuple[str, float]] = set()


def _reported_w(value: object) -> float:
    """A reported limit as ``float()`` reads it (TypeError for a value of another kind)."""
    if not isinstance(value, (str, SupportsFloat)):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def node_limits(node: Node, caps: Mapping[str, object] | None,
                profiles: Profiles) -> PowerLimits | None:
    """The node's limits from its agent's report and the profiles (module docstring)."""
    if not caps or caps.get("settable") is not True or node.gpu_type is None:
        return None
    wanted = profiles.power_limits.get(node.gpu_type)
    try:
        lo, hi, default = (_reported_w(caps["min_w"]), _reported_w(caps["max_w"]),
                           _reported_w(caps["default_w"]))
    except (KeyError, TypeError, ValueError):
        return None
    if wanted is None or not lo <= default <= hi:
        return None
    levels = [default]
    for level in wanted.levels_w[1:]:
        if not lo <= level <= hi:
            if (node.name, level) not in _warned:
                _warned.add((node.name, level))
                log.warning("node %s: power level %g W of profiles/power_limits.toml is "
                            "outside the GPU's range [%g, %g] W: not planned", node.name,
                            level, lo, hi)
            continue
        if level < default:
            levels.append(level)
    return PowerLimits(min_w=lo, max_w=hi, default_w=default, levels_w=tuple(levels))


def app_levels(profiles: Profiles, app: str) -> dict[str, tuple[PowerLevel, ...]]:
    """An application's level tables in ``profiles/`` (apps.toml, then the workloads)."""
    if app in profiles.apps and profiles.apps[app].power:
        return dict(profiles.apps[app].power)
    for workload in _workloads(profiles):
        found = workload.apps.get(app)
        if found is not None and found.power:
            return dict(found.power)
    return {}


_loaded: dict[str, list[Profiles]] = {}


def _workloads(profiles: Profiles) -> list[Profiles]:
    """The workload sets of a profiles directory, read once per process."""
    key = str(profiles.path)
    if key not in _loaded:
        names = sorted(p.stem for p in (profiles.path / "workloads").glob("*.toml"))
        _loaded[key] = [profiles.workload(n) for n in names]
    return _loaded[key]


def levels_for_build(s, build, state, profiles: Profiles):
    """:func:`with_levels` of a manager snapshot build: reported caps, planned limits of
    the running attempts (``store.attempts.power_limits``)."""
    from andreas.levels import check_points
    from andreas.store.attempts import power_limits
    from andreas.store.nodes import power_caps
    from andreas.store.profiles import app_levels as stored_levels

    running = {j.id: j.latest.id for j in state.jobs.values()
               if j.latest is not None and j.latest.open}
    limits = power_limits(s, list(running.values())) if running else {}
    planned = {job: limits.get(aid) for job, aid in running.items()}
    measured: dict[str, dict[str, tuple[PowerLevel, ...]]] = {}
    for app, types in stored_levels(s, {j.app for j in build.snapshot.jobs}).items():
        for gpu_type, rows in types.items():
            points = tuple(PowerLevel(limit_w=r.limit_w, time_factor=r.time_factor,
                                      gpu_power_w=r.gpu_power_w) for r in rows)
            if check_points(points) is None:
                measured.setdefault(app, {})[gpu_type] = points
    return replace(build, snapshot=with_levels(build.snapshot, power_caps(s), profiles,
                                               planned, measured))


def with_levels(snapshot: Snapshot, caps: Mapping[str, Mapping[str, object]],
                profiles: Profiles, planned: Mapping[str, float | None],
                measured: Mapping[str, Mapping[str, tuple[PowerLevel, ...]]] | None = None,
                ) -> Snapshot:
    """The snapshot with node limits, job levels and running jobs' limits."""
    nodes = tuple(replace(n, power_limits=node_limits(n, caps.get(n.name), profiles))
                  for n in snapshot.nodes)
    if not any(n.power_limits is not None for n in nodes):
        return snapshot
    cache: dict[str, dict[str, tuple[PowerLevel, ...]]] = {}
    jobs = []
    for job in snapshot.jobs:
        if job.app not in cache:
            cache[job.app] = {**app_levels(profiles, job.app),
                              **(measured or {}).get(job.app, {})}
        levels = {t: v for t, v in cache[job.app].items() if t in job.epoch_time_s}
        running = job.running
        if running is not None:
            running = replace(running, power_limit_w=_within(
                planned.get(job.id), next(n for n in nodes if n.name == running.node)))
        jobs.append(replace(job, power_levels=levels, running=running) if levels
                    or running is not job.running else job)
    return replace(snapshot, nodes=nodes, jobs=tuple(jobs))


def _within(limit: float | None, node: Node) -> float | None:
    lim = node.power_limits
    if limit is None or lim is None or not lim.min_w <= limit <= lim.max_w:
        return None
    return limit


def job_level(job: Job, node: Node, limit_w: float | None) -> float | None:
    """The limit to record for an assignment (None: the default, nothing to set)."""
    if limit_w is None or node.power_limits is None:
        return None
    return None if abs(limit_w - node.power_limits.default_w) < 1e-9 else limit_w


class AttemptLimits:
    """The reconciler's part: a running attempt whose target keeps it where it runs but at
    another power limit gets the new limit in its row (``set_power_limit``); the node's
    agent applies it within its fence period, the job keeps running. One store read per
    attempt, to learn the limit it was started with."""

    def __init__(self, store) -> None:
        self.store = store
        self._known: dict[int, float | None] = {}

    def follow(self, job, attempt, target) -> None:
        want = target.assignments.get(job.id)
        if want is None or attempt.profiling:
            return
        from andreas.store.attempts import power_limits, set_power_limit

        if attempt.id not in self._known:
            with self.store.session() as s:
                self._known[attempt.id] = power_limits(s, [attempt.id]).get(attempt.id)
        if _same(self._known[attempt.id], want.power_limit_w):
            return
        with self.store.session() as s:
            set_power_limit(s, attempt.id, want.power_limit_w)
        log.info("power limit job=%s attempt=%d: %s -> %s (decision %s)", job.id,
                 attempt.attempt, _watts(self._known[attempt.id]),
                 _watts(want.power_limit_w), target.decision_id)
        self._known[attempt.id] = want.power_limit_w
        if len(self._known) > 10_000:
            self._known.clear()


def _same(a: float | None, b: float | None) -> bool:
    return a is None and b is None or (a is not None and b is not None and abs(a - b) < 1e-9)


def _watts(x: float | None) -> str:
    return "default" if x is None else f"{x:g} W"


def profiling_levels(db: Db, node: Node, profiles: Profiles) -> tuple[float, ...]:
    """The limits to profile on a node: its default first, then the levels below (none
    when its agent reported that it cannot set limits, or never reported)."""
    from andreas.store.nodes import power_caps

    limits = node_limits(node, power_caps(db).get(node.name), profiles)
    return tuple(limits.levels_w) if limits is not None else ()
