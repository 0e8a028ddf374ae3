"""Leave-one-GPU-count-out check of the runtime model on the profiles in ``profiles/``.

For every application x GPU type of ``profiles/apps.toml``, its epoch times for g = 1 ..
``max_gpus`` (``Profiles.epoch_times``), each g in turn is held out, the law is fitted to
the others and asked for the held-out one. With ``noise`` > 0 every point is first
multiplied by a log-normal factor (sigma ``noise``, seeded), as real epoch medians would
be, and the error is measured against the noisy held-out point.

Caveat that the numbers must be read with: ``profiles/`` *is* Amdahl's law (1-GPU times
and one serial fraction per application), so without noise the check only shows that the
fit recovers the law (error ~0); the noisy variant shows how the error grows with noise.

    python -m andreas.profiler.heldout [--max-gpus 8] [--noise 0.05] [--seed 0]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from andreas.profiler.fit import fit_amdahl
from andreas.profiles import Profiles, load_profiles

DEFAULT_MAX_GPUS = 8
MIN_COUNTS = 3


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """One application x GPU type: its mean absolute percentage error (fraction) over the
    held-out GPU counts, and the worst one."""

    app: str
    gpu_type: str
    gpu_counts: tuple[int, ...]
    mape: float
    max_error: float


def held_out(profiles: Profiles, *, max_gpus: int = DEFAULT_MAX_GPUS, noise: float = 0.0,
             rng: np.random.Generator | None = None) -> list[HeldOut]:
    """Per application x GPU type with >= 3 GPU counts, sorted by name."""
    if noise > 0 and rng is None:
        raise ValueError("noise needs an explicit rng")
    out: list[HeldOut] = []
    gs = np.arange(1, max_gpus + 1)
    if len(gs) < MIN_COUNTS:
        return out
    for app in sorted(profiles.apps):
        for gpu_type in sorted(profiles.apps[app].epoch_s):
            times = np.array(profiles.epoch_times(app, gpu_type, max_gpus), dtype=float)
            if noise > 0 and rng is not None:       # (noise > 0 has an rng: checked above)
                times = times * np.exp(rng.normal(0.0, noise, size=len(times)))
            errors = []
            for k in range(len(gs)):
                rest = np.arange(len(gs)) != k
                fit = fit_amdahl(gs[rest].tolist(), times[rest].tolist())
                errors.append(abs(fit.epoch_s(int(gs[k])) - times[k]) / times[k])
            out.append(HeldOut(app=app, gpu_type=gpu_type, gpu_counts=tuple(gs.tolist()),
                               mape=float(np.mean(errors)), max_error=float(np.max(errors))))
    return out


def overall(rows: list[HeldOut]) -> float:
    """Mean over every held-out point (each row has the same number of points)."""
    return float(np.mean([r.mape for r in rows])) if rows else float("nan")


def format_table(rows: list[HeldOut]) -> str:
    lines = [f"{'application':<14} {'GPU type':<9} {'g':<8} {'MAPE %':>8} {'max %':>8}"]
    for r in rows:
        span = f"1..{r.gpu_counts[-1]}"
        lines.append(f"{r.app:<14} {r.gpu_type:<9} {span:<8} {100 * r.mape:8.4f} "
                     f"{100 * r.max_error:8.4f}")
    lines.append(f"{'overall':<14} {'':<9} {'':<8} {100 * overall(rows):8.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default=None, help="profiles directory (default: repo's)")
    parser.add_argument("--max-gpus", type=int, default=DEFAULT_MAX_GPUS)
    parser.add_argument("--noise", type=float, default=0.0,
                        help="log-normal sigma of the noise on every point (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = held_out(load_profiles(args.profiles), max_gpus=args.max_gpus, noise=args.noise,
                    rng=np.random.default_rng(args.seed))
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
