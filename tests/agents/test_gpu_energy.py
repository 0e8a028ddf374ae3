"""Energy over a scripted utilization profile against the analytic integral (issue 5).

Profile: 0 % for 40 s, 100 % for 40 s, 30 % for 40 s on a V100 (35 W idle, 250 W busy),
sampled at 1 Hz on an injected clock. The agent's energy must match the integral within
1 %, from the counter and from integrated power (counter marked NotSupported).
"""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from andreas.sources import EnergySource, PowerSource

from .gpu_helpers import WALL0, Clock, energy_j, fake, gaps, run, samples, started

PROFILE = [(0.0, 0.0), (40.0, 100.0), (80.0, 30.0)]
ANALYTIC_J = 40 * 35.0 + 40 * 250.0 + 40 * (35.0 + 0.3 * 215.0)   # 15 380 J over [0, 120]


def _scripted(clock: Clock, spec: str = "2xV100", **kwargs):
    f = fake(spec, clock, **kwargs)
    f.script(f.uuids[0], PROFILE)
    return f


def test_counter_energy_matches_analytic_integral() -> None:
    clock = Clock()
    f = _scripted(clock)
    s = started(f)
    items = run(s, clock, range(0, 121))
    mine = samples(items, f.uuids[0])
    assert len(mine) == 120                       # first tick is the baseline
    assert {x.energy_source for x in mine} == {EnergySource.COUNTER}
    assert {x.power_source for x in mine} == {PowerSource.INSTANT}
    assert all(x.interval_s == 1.0 and not x.counter_reset for x in mine)
    assert energy_j(items, f.uuids[0]) == pytest.approx(ANALYTIC_J, rel=0.01)
    assert energy_j(items, f.uuids[0]) == pytest.approx(f.energy_j(f.uuids[0], 0, 120), abs=0.002)
    assert energy_j(items, f.uuids[1]) == pytest.approx(120 * 35.0, rel=0.01)


def test_integrated_energy_matches_when_counter_not_supported() -> None:
    clock = Clock()
    f = _scripted(clock)
    f.set_not_supported(f.uuids[0], "energy")
    s = started(f)
    assert not s.inventory[0].has_energy_counter and s.inventory[1].has_energy_counter
    items = run(s, clock, range(0, 121))
    mine = samples(items, f.uuids[0])
    assert {x.energy_source for x in mine} == {EnergySource.INTEGRATED}
    assert {x.power_source for x in mine} == {PowerSource.INSTANT}
    assert energy_j(items, f.uuids[0]) == pytest.approx(ANALYTIC_J, rel=0.01)


def test_integrated_energy_from_average_power_when_instant_field_missing() -> None:
    clock = Clock()
    f = _scripted(clock)
    f.set_not_supported(f.uuids[0], "energy", "power_instant")
    s = started(f)
    assert not s.has_instant_power(f.uuids[0]) and s.has_instant_power(f.uuids[1])
    items = run(s, clock, range(0, 121))
    mine = samples(items, f.uuids[0])
    assert {x.power_source for x in mine} == {PowerSource.AVERAGE}
    assert {x.energy_source for x in mine} == {EnergySource.INTEGRATED}
    assert energy_j(items, f.uuids[0]) == pytest.approx(ANALYTIC_J, rel=0.01)


def test_pre_volta_gpu_integrates_without_counter() -> None:
    clock = Clock()
    f = _scripted(clock, "1xK80")
    s = started(f)
    assert s.inventory[0].has_energy_counter is False
    items = run(s, clock, range(0, 121))
    analytic = 40 * 27.0 + 40 * 150.0 + 40 * (27.0 + 0.3 * 123.0)
    assert energy_j(items, f.uuids[0]) == pytest.approx(analytic, rel=0.01)
    assert {x.energy_source for x in samples(items)} == {EnergySource.INTEGRATED}


@pytest.mark.parametrize("counter", [True, False])
def test_irregular_and_sub_second_ticks_accumulate_to_one_second(counter: bool) -> None:
    """Ticks 0.1-1.7 s apart: energy only over intervals >= 1 s, nothing lost in between."""
    clock = Clock()
    f = _scripted(clock)
    if not counter:
        f.set_not_supported(f.uuids[0], "energy")
    s = started(f)
    rng = random.Random(5)
    times, t = [], 0.0
    while t < 120.0:
        times.append(t)
        t += rng.choice([0.1, 0.25, 0.5, 0.9, 1.3, 1.7])
    items = run(s, clock, times)
    mine = samples(items, f.uuids[0])
    assert all(x.interval_s >= 1.0 for x in mine)
    end = mine[-1].t - WALL0
    assert sum(x.interval_s for x in mine) == pytest.approx(end)   # contiguous from 0
    assert times[-1] - end < 1.0                                      # only the open window left
    exact = f.energy_j(f.uuids[0], 0.0, end)
    assert energy_j(items, f.uuids[0]) == pytest.approx(exact, rel=0.01)


def test_sample_reports_utilization_memory_and_pids() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    s = started(f)
    run(s, clock, [0.0])
    f.set_busy(f.uuids[0], 80.0, [321, 123], memory_used_mib=4000, at_s=0.5)
    (x,) = samples(run(s, clock, [1.0]))
    assert x.utilization == 80.0 and x.memory_used_mib == 4000 and x.pids == (123, 321)
    assert x.power_w == pytest.approx(35.0 + 0.8 * 215.0)
    assert x.t == 1_700_000_001.0


def test_keys_are_uuids_even_with_permuted_indices() -> None:
    """NVML index 0 is the spec's GPU 2; CUDA_VISIBLE_DEVICES order would differ again."""
    clock = Clock()
    f = fake("3xV100", clock, index_order=[2, 0, 1])
    busy = "GPU-fake-n1-0"                   # NVML index 1
    f.set_busy(busy, 100.0, [77], at_s=0.0)
    s = started(f)
    assert [(g.uuid, g.index) for g in s.inventory] == [
        ("GPU-fake-n1-2", 0), ("GPU-fake-n1-0", 1), ("GPU-fake-n1-1", 2)]
    items = run(s, clock, range(0, 11))
    assert energy_j(items, busy) == pytest.approx(10 * 250.0)
    assert energy_j(items, "GPU-fake-n1-2") == pytest.approx(10 * 35.0)
    assert {x.pids for x in samples(items, busy)} == {(77,)}
    assert {x.uuid for x in samples(items)} == set(f.uuids)


def test_mig_gpu_is_refused_and_not_double_counted(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    f = fake("2xV100", clock)
    mig, plain = f.uuids
    f.set_mig(mig, True)
    f.set_mig(plain, False)                  # MIG-capable but off: sampled normally
    f.set_busy(mig, 100.0, at_s=0.0)
    with caplog.at_level(logging.WARNING, logger="agents.gpu"):
        s = started(f)
    info = {g.uuid: g for g in s.inventory}
    assert info[mig].mig_enabled and not info[plain].mig_enabled
    assert s.sampled_uuids == [plain]
    assert "MIG mode is enabled" in caplog.text and mig in caplog.text
    items = run(s, clock, range(0, 11))
    assert {x.uuid for x in items} == {plain}
    total = sum(x.energy_mj for x in samples(items)) / 1000.0
    assert total == pytest.approx(10 * 35.0)      # only the non-MIG GPU, once


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.floats(0.0, 60.0), st.floats(0.0, 100.0)), max_size=6),
       gaps_s=st.lists(st.sampled_from([0.05, 0.3, 0.7, 1.0, 1.5, 2.5]), min_size=5,
                       max_size=80),
       resets=st.lists(st.floats(0.5, 20.0), max_size=2).map(
           lambda rs: [r + 35.0 * i for i, r in enumerate(sorted(rs))]))
@example(steps=[], gaps_s=[0.05, 0.05, 1.0, 0.05, 0.05], resets=[1.1])  # a reset on a tick
def test_property_counter_energy_is_exact_and_never_negative(steps, gaps_s, resets) -> None:
    """Any step profile, tick spacing and resets: samples tile time from the baseline,
    every energy is >= 0, and energies without a reset equal the exact integral (a counter
    difference of floored mJ is within 1 mJ; the window ends are rebuilt from wall stamps,
    which costs float precision, hence 2 mJ). Resets are >= 35 s apart: a reset is seen as
    a decrease, which two resets within seconds could hide (as on real GPUs)."""
    clock = Clock()
    f = fake("1xV100", clock)
    uuid = f.uuids[0]
    f.script(uuid, sorted(steps))
    for r in resets:
        f.reset_counter(uuid, at_s=r)
    s = started(f)
    times = [0.0]
    for g in gaps_s:
        times.append(times[-1] + g)
    mine = samples(run(s, clock, times))
    start = 0.0
    for x in mine:
        end = x.t - WALL0
        assert x.interval_s == pytest.approx(end - start) and x.interval_s >= 1.0
        assert x.energy_mj is not None and x.energy_mj >= 0
        exact_mj = f.energy_j(uuid, start, end) * 1000
        if x.counter_reset:
            assert x.energy_source is EnergySource.INTEGRATED
            # the window's ends come back from wall stamps (~1e9 s: 2e-7 s apart), so a
            # reset on a tick can land a hair outside them
            assert any(start - 1e-6 < r <= end + 1e-6 for r in resets)
            # trapezoid over one window: off by at most a step's jump over the window
            assert abs(x.energy_mj - exact_mj) <= 215.0 * 1000 * x.interval_s
        else:
            assert x.energy_source is EnergySource.COUNTER
            assert abs(x.energy_mj - exact_mj) <= 2.0
        start = end


def test_a_shared_gpu_reports_each_process_sm_and_memory() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    s = started(f)
    run(s, clock, [0.0])
    f.set_busy(f.uuids[0], 90.0, [11, 22], memory_used_mib=6000, at_s=0.5,
               process_sm=[60.0, 30.0])
    (x,) = samples(run(s, clock, [1.0]))
    assert x.process_sm == ((11, 60.0), (22, 30.0))
    assert x.process_memory_mib == ((11, 3000), (22, 3000))
    (y,) = samples(run(s, clock, [2.0]))
    assert y.process_sm == ((11, 60.0), (22, 30.0))      # a new NVML sample each interval
    f.set_busy(f.uuids[0], 50.0, [11], at_s=2.5)
    (z,) = samples(run(s, clock, [3.0]))
    assert z.process_sm == () and z.process_memory_mib == ()   # one process: not read


def test_process_utilization_not_supported_falls_back_to_memory() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.set_not_supported(f.uuids[0], "process_utilization")
    f.set_busy(f.uuids[0], 100.0, [1, 2], at_s=0.0)
    s = started(f)
    items = run(s, clock, range(0, 4))
    x = samples(items)[-1]
    assert x.process_sm == () and x.process_memory_mib and not gaps(items)
