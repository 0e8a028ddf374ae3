"""NVML faults through the fake: a GPU lost mid-run, NotSupported fields, counter resets."""

from __future__ import annotations

import logging

import pytest

from agents.gpu import GpuSampler, NvmlUnavailable
from agents.records import GpuGap
from andreas.sources import EnergySource, PowerSource

from .gpu_helpers import Clock, energy_j, fake, gaps, run, samples, started


def test_gpu_lost_mid_run_gaps_others_go_on_reinit_backoff_rebaseline(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    f = fake("3xV100", clock)
    a, lost, c = f.uuids
    for u in f.uuids:
        f.set_busy(u, 100.0, at_s=0.0)
    f.lose_gpu(lost, at_s=29.5, until_s=60.0)   # back at 60 s with its counter reset to 0
    s = started(f)
    v0 = s.inventory_version
    with caplog.at_level(logging.INFO, logger="agents.gpu"):
        items = run(s, clock, range(0, 60))
        assert s.unhealthy == frozenset({lost}) and s.inventory_version == v0 + 1
        items += run(s, clock, range(60, 121))
    assert s.inventory_version == v0 + 2

    # The healthy GPUs never miss a tick, re-initialisations included.
    for u in (a, c):
        assert [x.t - 1_700_000_000.0 for x in samples(items, u)] == list(range(1, 121))
        assert energy_j(items, u) == pytest.approx(120 * 250.0, rel=1e-6)
        assert not gaps(items, u)
    # The lost GPU: samples until 29, a gap per second from 30 to 59, a new baseline at the
    # re-initialisation at 60, samples again from 61.
    t_samples = [round(x.t - 1_700_000_000.0) for x in samples(items, lost)]
    t_gaps = [round(x.t - 1_700_000_000.0) for x in gaps(items, lost)]
    assert t_samples == list(range(1, 30)) + list(range(61, 121))
    assert t_gaps == list(range(30, 60))
    assert all("GPU is lost" in g.reason for g in gaps(items, lost))
    # Back-off: lost seen at 30, re-init at 32, 36, 44, 60 (2, 4, 8, 16 s).
    assert f.init_calls == [0.0, 32.0, 36.0, 44.0, 60.0]
    # Re-baselined: no reset flag, no negative or abs() energy, the counter is trusted again.
    after = [x for x in samples(items, lost) if x.t >= 1_700_000_061.0]
    assert all(x.energy_mj is not None and x.energy_mj > 0 for x in after)
    assert {x.energy_source for x in after} == {EnergySource.COUNTER}
    assert not any(x.counter_reset for x in after)
    assert sum(x.energy_mj for x in after) / 1000 == pytest.approx(f.energy_j(lost, 60, 120),
                                                                    rel=1e-6)
    assert s.unhealthy == frozenset()
    assert "marked unhealthy" in caplog.text and "is back" in caplog.text


def test_unhealthy_while_lost_and_backoff_is_capped() -> None:
    clock = Clock()
    f = fake("2xV100", clock)
    f.lose_gpu(f.uuids[1], at_s=5.0)            # never comes back
    s = started(f, backoff_initial_s=1.0, backoff_max_s=8.0)
    items = run(s, clock, range(0, 60))
    assert s.unhealthy == frozenset({f.uuids[1]})
    intervals = [b - a for a, b in zip(f.init_calls[1:], f.init_calls[2:])]
    assert intervals[:4] == [2.0, 4.0, 8.0, 8.0] and set(intervals[3:]) == {8.0}
    assert len(samples(items, f.uuids[0])) == 59
    assert len(gaps(items, f.uuids[1])) == 55


def test_unknown_error_is_a_gap_then_recovers_without_reset_flag() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.raise_unknown(f.uuids[0], at_s=10.0, until_s=11.5)
    s = started(f)
    items = run(s, clock, range(0, 21))
    assert [round(g.t % 100) for g in gaps(items)] == [10, 11]
    assert all("Unknown" in g.reason for g in gaps(items))
    t_samples = [round(x.t - 1_700_000_000.0) for x in samples(items)]
    assert t_samples == list(range(1, 10)) + list(range(13, 21))   # re-init at 12, baseline
    assert not any(x.counter_reset for x in samples(items))


def test_nvml_init_failing_during_reinit_gaps_every_gpu_until_it_works() -> None:
    clock = Clock()
    f = fake("2xT4", clock)
    f.lose_gpu(f.uuids[0], at_s=5.0, until_s=6.0)
    s = started(f)
    f.fail_init(until_s=20.0)                   # the driver is being reloaded: re-inits fail
    items = run(s, clock, range(0, 41))
    for u in f.uuids:
        assert all(isinstance(x, GpuGap) for x in items if x.uuid == u
                   and 8 <= x.t - 1_700_000_000.0 < 20)
    assert s.unhealthy == frozenset()
    assert samples(items, f.uuids[1])[-1].t == 1_700_000_040.0
    assert any("nvmlInit" in g.reason for g in gaps(items, f.uuids[1]))


@pytest.mark.parametrize("fields", [("utilization",), ("memory",), ("processes",),
                                    ("utilization", "memory", "processes", "power_limit")])
def test_not_supported_field_is_none_not_a_crash(fields: tuple[str, ...]) -> None:
    clock = Clock()
    f = fake("2xV100", clock)
    f.set_not_supported(f.uuids[0], *fields)
    f.set_busy(f.uuids[0], 100.0, [9], at_s=0.0)
    s = started(f)
    items = run(s, clock, range(0, 6))
    x = samples(items, f.uuids[0])[-1]
    assert (x.utilization is None) == ("utilization" in fields)
    assert (x.memory_used_mib is None) == ("memory" in fields)
    assert (x.pids == ()) == ("processes" in fields)
    assert (s.inventory[0].power_limit_w is None) == ("power_limit" in fields)
    assert x.energy_mj == 250_000 and x.energy_source is EnergySource.COUNTER
    assert not gaps(items)


def test_no_power_and_no_counter_is_no_reading_never_zero_joules() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.set_not_supported(f.uuids[0], "energy", "power_instant", "power_usage")
    s = started(f)
    items = run(s, clock, range(0, 5))
    assert len(samples(items)) == 4
    for x in samples(items):
        assert x.energy_mj is None and x.energy_source is None
        assert x.power_w is None and x.power_source is None
        assert x.utilization == 0.0


def test_counter_reset_is_flagged_and_interval_energy_is_integrated() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    uuid = f.uuids[0]
    f.set_busy(uuid, 100.0, at_s=0.0)
    f.reset_counter(uuid, at_s=50.4)
    s = started(f)
    items = run(s, clock, range(0, 101))
    xs = samples(items)
    reset = [x for x in xs if x.counter_reset]
    assert len(reset) == 1
    (r,) = reset
    assert r.t == 1_700_000_051.0
    assert r.energy_source is EnergySource.INTEGRATED and r.power_source is PowerSource.INSTANT
    assert r.energy_mj == 250_000                 # the integral, not a negative difference
    assert all(x.energy_mj is not None and x.energy_mj >= 0 for x in xs)
    assert {x.energy_source for x in xs if not x.counter_reset} == {EnergySource.COUNTER}
    assert energy_j(items, uuid) == pytest.approx(100 * 250.0, rel=1e-6)


def test_reset_without_power_readings_leaves_the_interval_without_energy() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.set_not_supported(f.uuids[0], "power_instant", "power_usage")
    f.reset_counter(f.uuids[0], at_s=3.5)
    s = started(f)
    xs = samples(run(s, clock, range(0, 8)))
    r = next(x for x in xs if x.counter_reset)
    assert r.energy_mj is None and r.energy_source is None
    assert [x.energy_mj for x in xs if not x.counter_reset] == [35_000] * 6


def test_unexpected_exception_is_a_gap_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    f = fake("2xV100", clock)
    s = started(f)
    run(s, clock, [0.0])
    real = f.nvmlDeviceGetTotalEnergyConsumption

    def flaky(handle):
        if f.nvmlDeviceGetUUID(handle) == f.uuids[0]:
            raise OSError("ctypes went wrong")
        return real(handle)
    monkeypatch.setattr(f, "nvmlDeviceGetTotalEnergyConsumption", flaky)
    items = run(s, clock, [1.0])
    assert [type(x).__name__ for x in items] == ["GpuGap", "GpuSample"]
    assert "ctypes went wrong" in items[0].reason


def test_start_refuses_when_nvml_cannot_initialise() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.fail_init()
    with pytest.raises(NvmlUnavailable, match="Driver Not Loaded"):
        GpuSampler(f).start()
    with pytest.raises(RuntimeError, match="before start"):
        GpuSampler(f).sample(0.0, 0.0)


def test_gpu_lost_at_start_joins_the_inventory_when_it_comes_back() -> None:
    clock = Clock()
    f = fake("2xV100", clock)
    f.lose_gpu(f.uuids[1], at_s=0.0, until_s=5.0)
    s = started(f)
    assert [g.uuid for g in s.inventory] == [f.uuids[0]]
    items = run(s, clock, range(0, 12))
    assert {g.uuid for g in s.inventory} == set(f.uuids)
    assert samples(items, f.uuids[1])
    s.close()
    s.close()
    assert len(f.shutdown_calls) >= 2


def test_implausible_counter_jump_is_flagged_and_integrated(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    s = started(f)
    run(s, clock, [0.0, 1.0])
    real = f.nvmlDeviceGetTotalEnergyConsumption
    monkeypatch.setattr(f, "nvmlDeviceGetTotalEnergyConsumption",
                        lambda h: real(h) + 10_000_000)      # +10 kJ in 1 s: impossible
    (x,) = samples(run(s, clock, [2.0]))
    assert x.counter_reset and x.energy_source is EnergySource.INTEGRATED
    assert x.energy_mj == 35_000
    monkeypatch.undo()
    run(s, clock, [3.0])
    (y,) = samples(run(s, clock, [4.0]))
    assert not y.counter_reset and y.energy_source is EnergySource.COUNTER
