"""The pure runtime model: Amdahl fits recover known laws; confidence follows its formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from andreas.profiler.fit import (DEFAULT_PRIOR_SERIAL, AmdahlFit, confidence, fit_amdahl,
                                  predict, prior_serial_fraction, recency_weights, source_tag,
                                  weighted_median)


def law(t1: float, s: float, g):
    return t1 * (s + (1 - s) / np.asarray(g, dtype=float))


@pytest.mark.parametrize("t1, s, gs", [(120.0, 0.15, [1, 2, 4, 8]), (600.0, 0.0, [1, 2, 3]),
                                       (45.0, 0.6, [2, 3, 4]), (3000.0, 0.999, [1, 8]),
                                       (10.0, 1.0, [1, 2, 4])])
def test_exact_law_is_recovered(t1, s, gs):
    fit = fit_amdahl(gs, law(t1, s, gs).tolist())
    assert fit.t1_s == pytest.approx(t1, rel=1e-9)
    assert fit.serial_fraction == pytest.approx(s, abs=1e-9)
    assert fit.mape == pytest.approx(0.0, abs=1e-9)
    assert fit.gpu_counts == tuple(sorted(gs)) and fit.samples == len(gs) and not fit.prior


def test_noisy_law_is_recovered_within_noise():
    rng = np.random.default_rng(7)
    gs = np.repeat([1, 2, 4, 8], 25)
    y = law(250.0, 0.2, gs) * np.exp(rng.normal(0, 0.03, len(gs)))   # 3 % noise per epoch
    fit = fit_amdahl(gs.tolist(), y.tolist())
    assert fit.t1_s == pytest.approx(250.0, rel=0.02)
    assert fit.serial_fraction == pytest.approx(0.2, abs=0.02)
    assert 0.015 < fit.mape < 0.035                  # the noise level, not the law
    assert fit.samples == 100


def test_weights_select_the_law_that_counts():
    gs = [1, 2, 4, 8]
    new, old = law(100.0, 0.1, gs), law(180.0, 0.5, gs)
    fit = fit_amdahl(gs * 2, np.concatenate([new, old]).tolist(), [1.0] * 4 + [1e-9] * 4)
    assert fit.t1_s == pytest.approx(100.0, rel=1e-5)
    assert fit.serial_fraction == pytest.approx(0.1, abs=1e-5)
    # zero weight drops a point entirely (also from gpu_counts); weight 2 == the point twice
    fit0 = fit_amdahl(gs + [16], new.tolist() + [5.0], [1, 1, 1, 1, 0])
    assert fit0.gpu_counts == (1, 2, 4, 8) and fit0.t1_s == pytest.approx(100.0)
    y = [100.0, 60.0, 41.0, 30.0]
    twice = fit_amdahl(gs + [2], y + [60.0])
    weighted = fit_amdahl(gs, y, [1, 2, 1, 1])
    assert weighted.t1_s == pytest.approx(twice.t1_s) and weighted.serial_fraction == \
        pytest.approx(twice.serial_fraction)


def test_serial_fraction_is_clipped_to_0_and_1():
    gs = [1, 2, 4, 8]
    superlinear = (100.0 / np.asarray(gs, dtype=float) ** 1.2).tolist()
    fit = fit_amdahl(gs, superlinear)
    assert fit.serial_fraction == 0.0 and fit.t1_s > 0
    slower = [100.0, 110.0, 125.0, 140.0]             # more GPUs, slower: no speed-up at all
    fit = fit_amdahl(gs, slower)
    assert fit.serial_fraction == 1.0
    assert min(slower) <= fit.t1_s <= max(slower)


def test_one_gpu_count_uses_the_prior():
    fit = fit_amdahl([2, 2, 2], [60.0, 61.0, 59.0], prior_serial_fraction=0.25)
    assert fit.prior and fit.mape is None and fit.gpu_counts == (2,)
    assert fit.serial_fraction == 0.25
    assert fit.epoch_s(2) == pytest.approx(60.0, rel=1e-3)
    assert fit.t1_s == pytest.approx(fit.epoch_s(2) / (0.25 + 0.75 / 2))
    assert fit_amdahl([1], [80.0]).serial_fraction == DEFAULT_PRIOR_SERIAL
    assert predict(fit, 2)[1] == 0.3                 # base confidence of a prior


def test_prior_from_profiles():
    fractions = {"a": 0.1, "b": 0.2, "c": 0.4}
    assert prior_serial_fraction(fractions, "b") == 0.2
    assert prior_serial_fraction(fractions, "new") == 0.2      # median of the others
    assert prior_serial_fraction({}, "new") == DEFAULT_PRIOR_SERIAL


def test_confidence_formula():
    assert confidence(0.0, [1, 2, 4], 2) == 1.0
    assert confidence(0.0, [1, 2, 4], 3) == 1.0                 # interpolation
    assert confidence(0.0, [1, 2, 4], 8) == round(math.exp(-0.35), 2)   # one doubling out
    assert confidence(0.0, [2, 4, 8], 1) == round(math.exp(-0.35), 2)   # below as well
    assert confidence(0.10, [1, 2, 4], 2) == round(math.exp(-1.0), 2)
    assert confidence(0.0, [1, 2], 2) == 0.6 and confidence(None, [4], 4) == 0.3
    assert confidence(0.0, [], 1) == 0.0
    values = [confidence(m, [1, 2, 4], g) for m in (0.0, 0.05, 0.2) for g in (4, 8, 16)]
    assert all(0 <= v <= 1 for v in values)
    assert confidence(0.05, [1, 2, 4], 16) < confidence(0.05, [1, 2, 4], 8) \
        < confidence(0.05, [1, 2, 4], 4)


def test_predict_and_source_tag():
    fit = AmdahlFit(t1_s=100.0, serial_fraction=0.2, mape=0.04, samples=6,
                    gpu_counts=(1, 2, 4))
    seconds, conf = predict(fit, 8)
    assert seconds == pytest.approx(30.0) and conf == confidence(0.04, (1, 2, 4), 8)
    assert source_tag(0.04, (1, 2, 4), 8) == f"model(mape 4%, conf {conf:.2f})"
    assert source_tag(None, (2,), 4) == "model"
    with pytest.raises(ValueError):
        predict(fit, 0)


@pytest.mark.parametrize("gs, ys, ws", [([], [], None), ([1, 2], [10.0], None),
                                        ([0, 1], [1.0, 2.0], None), ([1.5, 2], [1.0, 2.0], None),
                                        ([1, 2], [1.0, -2.0], None),
                                        ([1, 2], [1.0, float("nan")], None),
                                        ([1, 2], [1.0, 2.0], [0, 0]),
                                        ([1, 2], [1.0, 2.0], [1, -1])])
def test_bad_input_is_refused(gs, ys, ws):
    with pytest.raises(ValueError):
        fit_amdahl(gs, ys, ws)


def test_recency_weights_and_weighted_median():
    w = recency_weights([0.0, 3600.0, 7200.0, -5.0], 3600.0)
    assert w.tolist() == pytest.approx([1.0, 0.5, 0.25, 1.0])
    with pytest.raises(ValueError):
        recency_weights([1.0], 0.0)
    assert weighted_median([1, 2, 3], [1, 1, 1]) == 2
    assert weighted_median([1, 2, 3, 4], [1, 1, 1, 1]) == 2.5
    assert weighted_median([200, 200, 200, 100, 100], [0.01, 0.01, 0.01, 1, 1]) == 100
