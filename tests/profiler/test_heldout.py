"""The issue's target: the runtime model predicts held-out GPU counts of the profiles in
profiles/ within 10 % MAPE. profiles/ is itself Amdahl's law (1-GPU times and one serial
fraction per application), so the noise-free check shows the fit recovers the law; the
noisy one (5 % log-normal noise on every point, fixed seed) is the harder, honest case.
The per-application table is printed (pytest -s shows it; also
``python -m andreas.profiler.heldout [--noise 0.05]``)."""

from __future__ import annotations

import numpy as np

from andreas.profiler.heldout import MIN_COUNTS, format_table, held_out, main, overall
from andreas.profiles import load_profiles


def test_held_out_gpu_counts_of_profiles_within_10_percent():
    profiles = load_profiles()
    rows = held_out(profiles, max_gpus=8)
    print("\nheld-out MAPE, profiles/ as they are:\n" + format_table(rows))
    assert len(rows) == sum(len(a.epoch_s) for a in profiles.apps.values()) >= 1
    assert all(len(r.gpu_counts) >= MIN_COUNTS for r in rows)
    assert overall(rows) < 0.10
    assert max(r.mape for r in rows) < 0.001           # the law itself: ~0


def test_held_out_with_measurement_noise_within_10_percent():
    rows = held_out(load_profiles(), max_gpus=8, noise=0.05, rng=np.random.default_rng(0))
    print("\nheld-out MAPE, 5 % noise on every point:\n" + format_table(rows))
    assert overall(rows) < 0.10


def test_fewer_than_three_counts_are_not_scored():
    assert held_out(load_profiles(), max_gpus=2) == []


def test_script_prints_the_table(capsys):
    assert main(["--max-gpus", "4"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("application") and "overall" in out
