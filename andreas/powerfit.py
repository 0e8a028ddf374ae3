"""Epoch time and GPU power per power limit, from measured points: monotone, then fitted.

Measurements are noisy (Zeus' memory-bound NCF draws 38 W at every limit and its epoch
times wander by +-6 %), but a lower limit can never make a job faster or its GPU draw
more, and the optimizer relies on that. So the points are first made monotone by
isotonic regression (pool adjacent violators, weighted by how many measurements each
point holds): time non-increasing and power non-decreasing as the limit rises. A level
that was not measured is then

- between two measured limits: interpolated linearly in the limit;
- above the highest: the highest (a limit the job never reaches changes nothing);
- below the lowest: the GPU draws the limit's share of the lowest point's power
  (``p * level / lowest``: a capped GPU runs at its cap) and the time grows as the
  power law of the two lowest points, ``t * (lowest / level) ** beta``, beta clamped to
  [0, 3].

Each level keeps its source: ``measured`` or ``fit``. Stdlib only (the profiler and the
agent-side fake NVML use it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MEASURED = "measured"
FIT = "fit"
MAX_BETA = 3.0


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measurement window (or the mean of several): limit, epoch time, GPU power."""

    limit_w: float
    epoch_s: float
    power_w: float
    weight: float = 1.0


@dataclass(frozen=True, kw_only=True)
class FittedLevel:
    limit_w: float
    epoch_s: float
    power_w: float
    source: str


def _pav(values: list[float], weights: list[float]) -> list[float]:
    """Weighted isotonic regression, non-decreasing, by pooling adjacent violators."""
    blocks: list[list[float]] = []       # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    out: list[float] = []
    for mean, _, count in blocks:
        out += [mean] * int(count)
    return out


def monotone(points: Iterable[Point]) -> list[Point]:
    """One point per limit (means, weighted), increasing limit, time non-increasing and
    power non-decreasing in the limit."""
    merged: dict[float, list[Point]] = {}
    for p in points:
        if not (p.limit_w > 0 and p.epoch_s > 0 and p.power_w > 0 and p.weight > 0
                and all(math.isfinite(x) for x in (p.limit_w, p.epoch_s, p.power_w))):
            raise ValueError(f"point at {p.limit_w!r} W: limit, epoch time and power must "
                             "be finite and > 0")
        merged.setdefault(p.limit_w, []).append(p)
    limits = sorted(merged)
    weights = [sum(p.weight for p in merged[x]) for x in limits]
    times = [sum(p.epoch_s * p.weight for p in merged[x]) / w for x, w in zip(limits, weights)]
    powers = [sum(p.power_w * p.weight for p in merged[x]) / w for x, w in zip(limits, weights)]
    neg = _pav([-t for t in times], weights)         # time non-increasing in the limit
    pow_ = _pav(powers, weights)                     # power non-decreasing in the limit
    return [Point(limit_w=x, epoch_s=-t, power_w=p, weight=w)
            for x, t, p, w in zip(limits, neg, pow_, weights)]


def fit_levels(points: Iterable[Point], levels_w: Sequence[float]) -> list[FittedLevel]:
    """The wanted levels from the points (the module docstring's rules), same order."""
    pts = monotone(points)
    if not pts:
        raise ValueError("no measured point to fit power levels to")
    by_limit = {p.limit_w: p for p in pts}
    out = []
    for level in levels_w:
        hit = next((p for x, p in by_limit.items() if abs(x - level) <= 1e-9), None)
        if hit is not None:
            out.append(FittedLevel(limit_w=level, epoch_s=hit.epoch_s, power_w=hit.power_w,
                                   source=MEASURED))
            continue
        t, p = _model(pts, level)
        out.append(FittedLevel(limit_w=level, epoch_s=t, power_w=p, source=FIT))
    return out


def _model(pts: list[Point], level: float) -> tuple[float, float]:
    lo, hi = pts[0], pts[-1]
    if level >= hi.limit_w:
        return hi.epoch_s, hi.power_w
    if level > lo.limit_w:
        for a, b in zip(pts, pts[1:]):
            if a.limit_w <= level <= b.limit_w:
                u = (level - a.limit_w) / (b.limit_w - a.limit_w)
                return (a.epoch_s + u * (b.epoch_s - a.epoch_s),
                        a.power_w + u * (b.power_w - a.power_w))
    beta = 1.0
    if len(pts) >= 2:
        nxt = pts[1]
        ratio = math.log(nxt.limit_w / lo.limit_w)
        beta = math.log(lo.epoch_s / nxt.epoch_s) / ratio if ratio > 0 else 1.0
        beta = min(max(beta, 0.0), MAX_BETA)
    return (lo.epoch_s * (lo.limit_w / level) ** beta,
            min(lo.power_w, lo.power_w * level / lo.limit_w))
