"""Power-limit profiles: the monotone fit, the Zeus import and the profiles' level tables."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from andreas.errors import InputError
from andreas.formats.zeus import WORKLOADS, measured, to_toml
from andreas.powerfit import FIT, MEASURED, Point, fit_levels, monotone
from andreas.profiles import DEFAULT_DIR, load_power_limits, load_profiles

ROOT = Path(__file__).resolve().parents[1]


def zeus_dir() -> Path:
    """``../shared/traces/zeus-nsdi23-power`` beside the checkout (a worktree may sit a
    level deeper); the data is part of the test setup, so a missing copy fails."""
    for parent in ROOT.parents:
        candidate = parent / "shared" / "traces" / "zeus-nsdi23-power"
        if candidate.is_dir():
            return candidate
    raise AssertionError("../shared/traces/zeus-nsdi23-power is missing")


def test_monotone_pools_violators_and_merges_repeats():
    pts = monotone([Point(limit_w=100, epoch_s=10.0, power_w=50.0),
                    Point(limit_w=150, epoch_s=11.0, power_w=60.0),   # slower at more power
                    Point(limit_w=200, epoch_s=8.0, power_w=58.0),    # draws less at more
                    Point(limit_w=200, epoch_s=8.2, power_w=58.0)])
    assert [p.limit_w for p in pts] == [100, 150, 200]
    assert pts[0].epoch_s == pts[1].epoch_s == pytest.approx(10.5)
    assert pts[2].epoch_s == pytest.approx(8.1)
    assert pts[1].power_w == pts[2].power_w == pytest.approx((60 + 2 * 58) / 3)
    assert all(a.epoch_s >= b.epoch_s and a.power_w <= b.power_w for a, b in zip(pts, pts[1:]))


def test_fit_interpolates_extrapolates_and_keeps_sources():
    pts = [Point(limit_w=150, epoch_s=12.0, power_w=140.0),
           Point(limit_w=200, epoch_s=10.5, power_w=180.0),
           Point(limit_w=250, epoch_s=10.0, power_w=200.0)]
    out = fit_levels(pts, [300, 250, 225, 150, 120])
    assert [f.source for f in out] == [FIT, MEASURED, FIT, MEASURED, FIT]
    assert (out[0].epoch_s, out[0].power_w) == (10.0, 200.0)             # above: the highest
    assert out[2].epoch_s == pytest.approx(10.25) and out[2].power_w == pytest.approx(190.0)
    assert out[4].power_w == pytest.approx(140.0 * 120 / 150)             # a capped GPU
    beta = __import__("math").log(12.0 / 10.5) / __import__("math").log(200 / 150)
    assert out[4].epoch_s == pytest.approx(12.0 * (150 / 120) ** beta)
    with pytest.raises(ValueError):
        fit_levels([Point(limit_w=100, epoch_s=-1.0, power_w=1.0)], [100])


def test_committed_zeus_profiles_are_the_import_of_the_shared_traces():
    limits = {t: (lim.default_w, lim.levels_w) for t, lim in load_power_limits().items()}
    text = to_toml(measured(zeus_dir(), limits))
    assert (DEFAULT_DIR / "workloads" / "zeus.toml").read_text() == text


def test_zeus_workloads_load_with_levels_for_all_four_gpus():
    prof = load_profiles().workload("zeus")
    assert set(prof.apps) == {w.app for w in WORKLOADS}
    resnet = prof.apps["resnet50-imagenet"]
    assert set(resnet.power) == {"V100", "A40", "P100", "RTX6000"}
    v100 = resnet.power["V100"]
    assert [p.limit_w for p in v100] == [250.0, 225.0, 200.0, 175.0, 150.0]
    # docs/power-limits.md's example: 3 515 s at 250 W, 175 W is 10 % slower
    assert resnet.epoch_s["V100"] == pytest.approx(3515.0, rel=1e-3)
    assert v100[3].time_factor == pytest.approx(3852 / 3515, rel=0.01)
    # A40 sentiment140 lacks 275, 225 and 175 W: fitted, and said so
    assert prof.apps["bert-sentiment140"].level_sources["A40"] == (
        "measured", "fit", "measured", "fit", "measured", "fit")
    with pytest.raises(InputError, match="no workload set 'nope'.*zeus"):
        load_profiles().workload("nope")


def test_bad_level_table_is_one_warning_and_the_app_runs_at_the_default(tmp_path, caplog):
    root = tmp_path / "profiles"
    shutil.copytree(DEFAULT_DIR, root)
    path = root / "workloads" / "zeus.toml"
    text = path.read_text()
    head, tail = text.split("[resnet50-imagenet.power.V100]", 1)
    tail = tail.replace("time_factor = [1.0, 1.01972", "time_factor = [1.0, 0.5", 1)
    path.write_text(head + "[resnet50-imagenet.power.V100]" + tail)
    with caplog.at_level(logging.WARNING, logger="andreas.profiles"):
        prof = load_profiles(root).workload("zeus")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "resnet50-imagenet" in lines[0] and "GPU V100" in lines[0]
    assert "not monotone" in lines[0]
    assert "V100" not in prof.apps["resnet50-imagenet"].power
    assert "A40" in prof.apps["resnet50-imagenet"].power


def test_power_limits_outside_the_range_is_an_error(tmp_path):
    root = tmp_path / "profiles"
    shutil.copytree(DEFAULT_DIR, root)
    path = root / "power_limits.toml"
    path.write_text(path.read_text().replace("levels_w = [250.0, 225.0, 200.0, 175.0, 150.0]",
                                             "levels_w = [250.0, 90.0]", 1))
    with pytest.raises(InputError, match="entry V100: level 90 W is outside the GPU's range"):
        load_profiles(root)
