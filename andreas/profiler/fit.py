"""The runtime model: Amdahl's law per (application, GPU type), fitted in closed form.

    epoch_s(g) = t1_s * (s + (1 - s) / g),   0 <= s <= 1

is linear in ``a = t1_s * s`` and ``b = t1_s * (1 - s)`` for ``x = 1 / g``: ``epoch_s = a
+ b x``. The fit is weighted least squares on *relative* residuals (each point weighs
``w_i / y_i**2``), because the error the optimizer feels is relative (a 10 s miss matters on
a 60 s epoch, not on a 3 600 s one) and the 1-GPU times would otherwise dominate. ``a, b >=
0`` (so ``s`` stays in [0, 1]) is a two-variable non-negative least squares problem,
solved exactly by comparing the free optimum with the two boundary solutions.

One GPU count says nothing about ``s``: the fit then takes a documented prior
(:func:`prior_serial_fraction`) and a low confidence.

Confidence of a prediction (:func:`confidence`), in [0, 1]::

    confidence(g) = base(k) * exp(-mape / MAPE_SCALE) * exp(-EXTRAPOLATION_RATE * d(g))

with k the number of distinct GPU counts measured (``base``: 1 -> 0.3, the serial fraction
is a prior; 2 -> 0.6, two parameters through two points, nothing checks the law; >= 3 ->
1.0), ``mape`` the fit's own error on its points (a fraction; 0 when unknown),
``MAPE_SCALE`` = 0.10 (a 10 % fit error gives 0.37) and ``d(g) = |log2(g / clamp(g, g_min,
g_max))|`` the doublings beyond the measured range (0 inside it; each doubling outside
multiplies by exp(-0.35) = 0.70).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MODEL = "amdahl"
DEFAULT_PRIOR_SERIAL = 0.17       # about the median of profiles/apps.toml (0.11 .. 0.32)
MAPE_SCALE = 0.10
EXTRAPOLATION_RATE = 0.35
BASE_CONFIDENCE = {1: 0.3, 2: 0.6}


@dataclass(frozen=True, kw_only=True)
class AmdahlFit:
    """A fitted law. ``mape``: mean absolute percentage error on the fitted points as a
    fraction (None with one GPU count: no error can be measured); ``samples``: points used;
    ``gpu_counts``: the distinct g measured; ``prior``: s was assumed, not fitted."""

    t1_s: float
    serial_fraction: float
    mape: float | None
    samples: int
    gpu_counts: tuple[int, ...]
    prior: bool = False

    def epoch_s(self, g: float) -> float:
        s = self.serial_fraction
        return self.t1_s * (s + (1.0 - s) / g)


def _points(gpus: Sequence[int], epoch_s: Sequence[float], weights: Sequence[float] | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.asarray(gpus, dtype=float)
    y = np.asarray(epoch_s, dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    if not (g.ndim == y.ndim == w.ndim == 1 and len(g) == len(y) == len(w)):
        raise ValueError("gpus, epoch_s and weights must be 1-D sequences of one length")
    if len(g) == 0:
        raise ValueError("no points to fit")
    if not (np.all(np.isfinite(g)) and np.all(g >= 1) and np.all(g == np.round(g))):
        raise ValueError(f"GPU counts must be integers >= 1, got {list(gpus)}")
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise ValueError("epoch times must be finite and > 0")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
        raise ValueError("weights must be finite, >= 0 and not all 0")
    return g, y, w


def _nnls2(x: np.ndarray, y: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """min sum v (y - a - b x)^2 with a, b >= 0, exactly: the free optimum if feasible, else
    the better of the two one-variable boundary optima (the problem is convex)."""
    sv, sx, sy = v.sum(), (v * x).sum(), (v * y).sum()
    sxx, sxy = (v * x * x).sum(), (v * x * y).sum()
    det = sv * sxx - sx * sx
    candidates = []
    if det > 1e-12 * max(sv * sxx, 1e-300):
        a = (sxx * sy - sx * sxy) / det
        b = (sv * sxy - sx * sy) / det
        if a >= 0 and b >= 0:
            return float(a), float(b)
    candidates.append((max(sy / sv, 0.0), 0.0))                    # s = 1: no speed-up
    candidates.append((0.0, max(sxy / sxx, 0.0)))                  # s = 0: linear speed-up

    def cost(ab: tuple[float, float]) -> float:
        return float((v * (y - ab[0] - ab[1] * x) ** 2).sum())

    return min(candidates, key=cost)


def fit_amdahl(gpus: Sequence[int], epoch_s: Sequence[float],
               weights: Sequence[float] | None = None, *,
               prior_serial_fraction: float = DEFAULT_PRIOR_SERIAL) -> AmdahlFit:
    """Fit Amdahl's law to epoch times measured on ``gpus`` (one entry per point; repeat g
    for several epochs). ``weights`` (default 1) scale each point, e.g. recency. Raises
    ValueError on empty or invalid input."""
    g, y, w = _points(gpus, epoch_s, weights)
    counts = tuple(sorted({int(v) for v in g[w > 0]}))
    keep = w > 0
    g, y, w = g[keep], y[keep], w[keep]
    if len(counts) == 1:
        s = min(max(float(prior_serial_fraction), 0.0), 1.0)
        speed = s + (1.0 - s) / counts[0]
        # relative least squares of a constant: sum(w/y) / sum(w/y^2)
        level = float((w / y).sum() / (w / y ** 2).sum())
        return AmdahlFit(t1_s=level / speed, serial_fraction=s, mape=None, samples=len(y),
                         gpu_counts=counts, prior=True)
    a, b = _nnls2(1.0 / g, y, w / y ** 2)
    t1 = a + b
    fit = AmdahlFit(t1_s=t1, serial_fraction=a / t1, mape=None, samples=len(y),
                    gpu_counts=counts)
    errors = np.abs(np.array([fit.epoch_s(v) for v in g]) - y) / y
    return AmdahlFit(t1_s=t1, serial_fraction=a / t1, mape=float((w * errors).sum() / w.sum()),
                     samples=len(y), gpu_counts=counts)


def confidence(mape: float | None, gpu_counts: Iterable[int], g: int) -> float:
    """How far to trust a prediction at g (module docstring), rounded to 0.01."""
    counts = sorted({int(c) for c in gpu_counts})
    if not counts:
        return 0.0
    base = BASE_CONFIDENCE.get(len(counts), 1.0)
    fit = math.exp(-(mape or 0.0) / MAPE_SCALE)
    inside = min(max(g, counts[0]), counts[-1])
    doublings = abs(math.log2(g / inside))
    return round(base * fit * math.exp(-EXTRAPOLATION_RATE * doublings), 2)


def predict(fit: AmdahlFit, g: int) -> tuple[float, float]:
    """(epoch seconds, confidence) at g GPUs."""
    if g < 1:
        raise ValueError(f"g must be >= 1, got {g}")
    return fit.epoch_s(g), confidence(fit.mape, fit.gpu_counts, g)


def source_tag(mape: float | None, gpu_counts: Iterable[int], g: int) -> str:
    """The estimate's source as the plan and ``andreas costs`` show it: ``model`` alone when
    the model has no measured error (one GPU count), else ``model(mape 4%, conf 0.81)``."""
    if mape is None:
        return "model"
    return f"model(mape {100 * mape:.0f}%, conf {confidence(mape, gpu_counts, g):.2f})"


def prior_serial_fraction(serial_fractions: Mapping[str, float], app: str) -> float:
    """The s assumed when only one GPU count is known: the application's own profiles/
    value if it has one, else the median over profiles/ (other applications), else
    ``DEFAULT_PRIOR_SERIAL``. A guess either way, hence the low confidence."""
    if app in serial_fractions:
        return float(serial_fractions[app])
    if serial_fractions:
        return float(statistics.median(serial_fractions.values()))
    return DEFAULT_PRIOR_SERIAL


def recency_weights(ages_s: Sequence[float], half_life_s: float) -> np.ndarray:
    """exp(-ln 2 * age / half_life): an epoch one half-life old counts half (ages < 0,
    clock skew, count as 0)."""
    if not half_life_s > 0:
        raise ValueError(f"half_life_s must be > 0, got {half_life_s}")
    ages = np.maximum(np.asarray(ages_s, dtype=float), 0.0)
    return np.exp(-math.log(2.0) * ages / half_life_s)


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value where the cumulative weight first reaches half (lower weighted median;
    the mean of the two middle values when the weight splits exactly there)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    half = cum[-1] / 2.0
    i = int(np.searchsorted(cum, half))
    if i + 1 < len(v) and math.isclose(cum[i], half, rel_tol=1e-12):
        return float((v[i] + v[i + 1]) / 2.0)
    return float(v[i])
