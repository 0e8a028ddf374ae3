"""Power levels expanded into configurations at compile time (``andreas/levels.py``).

A configuration becomes (class, g, level): for each node class and GPU count, one
configuration per level of the class's ``PowerLimits`` (the default first), laid out
contiguously, so ``cfg_index[k, g]`` is the default and ``cfg_index[k, g] + i`` level i.
A job may use a level configuration only where it has figures for that limit
(``levels.options``); its time there is stretched by the level's time factor and its
GPUs draw ``delta_w`` less each. Without limits on any node the configurations are
exactly (class, g), so the kernels see what they always saw. Cloud catalogs have no
levels: a VM's price does not follow the GPUs' power.

How f_obj prices a level (``Problem.level_cost``): what the level changes in the energy
cost of the job's run against the default level of the same (class, g). At the level the
node's power follows it (c_ng plus the job's GPUs x delta_w), and the run is longer; the
node's idle draw ``power_w[0]`` is paid whether the job runs or not, so the change is
``t_level x (rise + g delta) - t_default x rise`` with ``rise = c_ng(g) - c_ng(0)``,
priced like c_ng. A level's pi is the default's plus that change, and f_obj charges it
to the job. At the default the term is 0, so a job with slack takes the level that
saves the most energy while it still meets its due date, and a job near its due date
keeps the default (a lower level would make it late). Charging the whole node's power
for the longer run instead (pi as ANDREAS defines it, at the level) made every level
below 175 W look dearer than the default on a 2 x V100 node, where the node's idle
draw is over half its power with one GPU busy (docs/power-limits.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from andreas import levels
from andreas.model import Job, Node


@dataclass(frozen=True, eq=False)
class ConfigLevels:
    cfg_class: np.ndarray          # (C,)
    cfg_g: np.ndarray              # (C,)
    cfg_level: np.ndarray          # (C,) level index within its class (0: default)
    cfg_limit_w: np.ndarray        # (C,) the limit, nan where the class has no limits
    class_levels: tuple[tuple[float | None, ...], ...]
    factor: np.ndarray | None      # (J, C) time factor; None: no levels anywhere
    delta_w: np.ndarray | None     # (J, C) change of one GPU's draw
    allowed: np.ndarray | None     # (J, C) the job has figures for that level

    @property
    def active(self) -> bool:
        return self.factor is not None


def class_levels(rep: Node | None) -> tuple[float | None, ...]:
    """A class's levels: its limits' levels (default first), or the default alone (None)."""
    if rep is None or rep.power_limits is None:
        return (None,)
    return tuple(rep.power_limits.levels_w)


def configurations(jobs: Sequence[Job], reps: Sequence[Node | None],
                   class_gpus: np.ndarray) -> ConfigLevels:
    """Every configuration (class, g, level), with the jobs' factors on them."""
    lv = tuple(class_levels(r) for r in reps)
    cls, gs, idx, lim = [], [], [], []
    for k, g_max in enumerate(class_gpus):
        for g in range(1, int(g_max) + 1):
            for i, limit in enumerate(lv[k]):
                cls.append(k)
                gs.append(g)
                idx.append(i)
                lim.append(np.nan if limit is None else limit)
    arrays = (np.array(cls, dtype=np.int64), np.array(gs, dtype=np.int64),
              np.array(idx, dtype=np.int64), np.array(lim, dtype=float))
    if all(len(x) == 1 for x in lv):
        return ConfigLevels(*arrays, lv, None, None, None)
    nj, nc = len(jobs), len(cls)
    factor = np.ones((nj, nc))
    delta = np.zeros((nj, nc))
    allowed = np.ones((nj, nc), dtype=bool)
    by_class = {k: [c for c in range(nc) if cls[c] == k and idx[c] > 0]
                for k in range(len(lv)) if len(lv[k]) > 1}
    for k, cfgs in by_class.items():       # jobs of one application share their levels
        rep = reps[k]
        groups: dict[Any, list[int]] = {}
        for j, job in enumerate(jobs):
            groups.setdefault(job.power_levels.get(rep.gpu_type or "") if rep else None,
                              []).append(j)
        for rows in groups.values():
            opts = levels.options(jobs[rows[0]], rep) if rep is not None else ()
            at = {o.limit_w: o for o in opts if o.limit_w is not None}
            hit = [at.get(lim[c]) for c in cfgs]
            grid = np.ix_(rows, cfgs)
            allowed[grid] = np.array([o is not None for o in hit])
            factor[grid] = np.array([o.time_factor if o else 1.0 for o in hit])
            delta[grid] = np.array([o.delta_w if o else 0.0 for o in hit])
    return ConfigLevels(*arrays, lv, factor, delta, allowed)


def level_times(t: np.ndarray, lv: ConfigLevels,
                overhead: Callable[[int, int], float | None]) -> np.ndarray:
    """``t`` (filled at the default levels) with every level: the work stretched by the
    level's time factor, a restart's overhead not (``overhead(j, c)``: the job's time at
    factor 0 on the default configuration c)."""
    assert lv.factor is not None and lv.allowed is not None
    out = t.copy()
    base = np.arange(t.shape[1]) - lv.cfg_level
    levels_at = np.flatnonzero(lv.cfg_level > 0)
    for c0 in np.unique(base[levels_at]):
        finite = np.flatnonzero(np.isfinite(t[:, c0]))
        extra = np.zeros(t.shape[0])
        for i in finite:
            extra[i] = overhead(int(i), int(c0)) or 0.0
        for c in levels_at[base[levels_at] == c0]:
            ok = finite[lv.allowed[finite, c]]
            out[ok, c] = (t[ok, c0] - extra[ok]) * lv.factor[ok, c] + extra[ok]
    return out


def one_level(t: np.ndarray, change: np.ndarray, now: float, due: np.ndarray,
              lv: ConfigLevels) -> np.ndarray:
    """``t`` with one level left per (job, class, g), the others made unrunnable (inf): the
    level of least ``change`` (``Problem.level_cost``) among those that meet the job's due
    date, else the default (the fastest). The kernels then see one configuration per
    (class, g) and job, as without levels: the constructions draw among the same
    alternatives (placements, GPU counts), each at the level the job would take there,
    and a decision costs about what it costs without levels."""
    out = np.full_like(t, np.inf)
    on_time = now + t < due[:, None]
    starts = np.flatnonzero(lv.cfg_level == 0)
    ends = np.append(starts[1:], len(lv.cfg_level))
    for a, b in zip(starts, ends):
        block_t, block_change = t[:, a:b], change[:, a:b]
        ok = on_time[:, a:b] & np.isfinite(block_t)
        cand = np.where(ok, block_change, np.inf)
        pick = np.argmin(cand, axis=1)
        pick = np.where(ok.any(axis=1), pick, 0)
        rows = np.arange(t.shape[0])
        out[rows, a + pick] = block_t[rows, pick]
    return out


def running_level(lv: ConfigLevels, k: int, limit_w: float | None) -> int:
    """Index of a running job's limit among its class's levels (0, the default, when it runs
    at a limit the class does not offer)."""
    if limit_w is None:
        return 0
    for i, level in enumerate(lv.class_levels[k]):
        if level is not None and abs(level - limit_w) <= levels.TOLERANCE:
            return i
    return 0


def limit_of(cfg_limit_w: np.ndarray, c: int) -> float | None:
    value = float(cfg_limit_w[c])
    return None if np.isnan(value) else value
