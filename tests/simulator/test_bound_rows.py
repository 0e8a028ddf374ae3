"""The set bounds of bound_rows.py against brute force on small random cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from andreas.simulator.bound_rows import assignment_bound, fused_times, sequence_bound


def _makespan(jobs: tuple, release: np.ndarray, p: np.ndarray) -> float:
    end = -np.inf
    for j in sorted(jobs, key=lambda j: release[j]):    # earliest release first: least
        end = max(end, release[j]) + p[j]
    return end


@pytest.mark.parametrize("seed", range(5))
def test_sequence_bound_is_the_best_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n = int(rng.integers(1, 6))
        release = np.round(rng.uniform(0, 4, n))
        p, due, weight = rng.uniform(0.1, 3, n), rng.uniform(0, 10, n), rng.uniform(0.1, 2, n)
        own = release + rng.uniform(0, 3, n)
        best = min(sum(weight[j] * max(0.0, max(_makespan(order[:k + 1], release, p), own[j])
                                       - due[j]) for k, j in enumerate(order))
                   for order in itertools.permutations(range(n)))
        assert sequence_bound(release, p, own, due, weight) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_assignment_bound_is_the_best_pairing_from_below(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n = int(rng.integers(1, 6))
        ends = np.sort(rng.uniform(0, 10, n))
        own, due, weight = rng.uniform(0, 8, n), rng.uniform(0, 10, n), rng.uniform(0.1, 2, n)
        best = min(sum(weight[j] * max(0.0, max(ends[k], own[j]) - due[j])
                       for k, j in enumerate(order))
                   for order in itertools.permutations(range(n)))
        got = assignment_bound(ends, own, due, weight)
        assert best - 1e-6 <= got <= best + 1e-9


def test_fused_sizes_fit_any_split_of_the_work() -> None:
    # job 0 runs on class 0 only, job 2 on class 1 only; every candidate's sizes must fit
    # in the span the busiest class needs, however the jobs split their work
    least = np.array([[10.0, np.inf], [10.0, 30.0], [np.inf, 30.0]])
    rates = np.array([10.0, 5.0])
    sizes = fused_times(least, rates)
    time_on = least / rates
    rng = np.random.default_rng(0)
    for _ in range(500):
        split = rng.uniform(size=least.shape) * np.isfinite(least)
        split /= split.sum(axis=1, keepdims=True)
        span = np.where(np.isfinite(time_on), split * np.where(np.isfinite(time_on),
                                                               time_on, 0.0), 0.0)
        assert (sizes.sum(axis=1) <= span.sum(axis=0).max() + 1e-9).all()
    # a slow class's GPU-second counts less: the balanced candidate is larger
    assert sizes.sum(axis=1).max() > sizes[0].sum()
