"""The fake NVML itself: spec parsing, units, exact counter, 1-s average, faults, errors."""

from __future__ import annotations

import math

import pynvml
import pytest

from agents.nvml_fake import FakeNvml, make_fake_nvml, parse_spec
from andreas.errors import InputError

from .gpu_helpers import Clock, fake


def test_spec_parsing_counts_types_and_profile_power() -> None:
    gpus = parse_spec("8xT4,2xV100")
    assert [g.gpu_type for g in gpus] == ["T4"] * 8 + ["V100"] * 2
    assert (gpus[0].idle_w, gpus[0].busy_w) == (10.0, 70.0)     # profiles/gpus.toml
    assert (gpus[-1].idle_w, gpus[-1].busy_w) == (35.0, 250.0)
    assert [g.gpu_type for g in parse_spec("V100")] == ["V100"]
    assert len(parse_spec(" 2 x V100 ")) == 2


@pytest.mark.parametrize("spec, words", [
    ("2xA999", ["unknown GPU type 'A999'", "known:", "V100"]),
    ("0xV100", ["must be >= 1"]),
    ("", ["COUNTxTYPE"]),
    ("2xV100,,", ["is not COUNTxTYPE"]),
])
def test_bad_spec_is_one_clear_input_error(spec: str, words: list[str]) -> None:
    with pytest.raises(InputError) as e:
        parse_spec(spec)
    for w in words:
        assert w in str(e.value)


def test_uuids_and_permuted_indices() -> None:
    clock = Clock()
    f = fake("3xV100", clock, index_order=[2, 0, 1])
    f.nvmlInit()
    assert f.uuids == ["GPU-fake-n1-0", "GPU-fake-n1-1", "GPU-fake-n1-2"]
    by_index = [f.nvmlDeviceGetUUID(f.nvmlDeviceGetHandleByIndex(i)) for i in range(3)]
    assert by_index == ["GPU-fake-n1-2", "GPU-fake-n1-0", "GPU-fake-n1-1"]
    assert f.nvmlDeviceGetIndex(f.nvmlDeviceGetHandleByUUID("GPU-fake-n1-2")) == 0
    with pytest.raises(InputError, match="permutation"):
        fake("2xV100", clock, index_order=[0, 0])


def test_errors_are_pynvml_classes_with_real_codes() -> None:
    clock = Clock()
    f = fake("1xK80", clock)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        f.nvmlDeviceGetCount()
    f.nvmlInit()
    h = f.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as e:
        f.nvmlDeviceGetTotalEnergyConsumption(h)   # Kepler: no energy counter
    assert e.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED == 3
    with pytest.raises(pynvml.NVMLError_NotSupported):
        f.nvmlDeviceGetMigMode(h)                  # not MIG-capable
    f.raise_unknown(f.uuids[0], at_s=0.0, until_s=1.0)
    with pytest.raises(pynvml.NVMLError_Unknown) as e2:
        f.nvmlDeviceGetPowerUsage(h)
    assert e2.value.value == 999
    f.lose_gpu(f.uuids[0], at_s=2.0)
    clock.t = 2.0
    for call in (lambda: f.nvmlDeviceGetUUID(h), lambda: f.nvmlDeviceGetHandleByIndex(0),
                 lambda: f.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_INSTANT])):
        with pytest.raises(pynvml.NVMLError_GpuIsLost) as e3:
            call()
        assert e3.value.value == 15 and isinstance(e3.value, pynvml.NVMLError)
    assert f.NVML_FI_DEV_POWER_INSTANT == pynvml.NVML_FI_DEV_POWER_INSTANT
    with pytest.raises(AttributeError):
        f.nvmlDeviceGetClockInfo  # noqa: B018 - not offered: not silently faked


def test_counter_is_the_exact_integral_from_a_nonzero_start() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.nvmlInit()
    h = f.nvmlDeviceGetHandleByIndex(0)
    uuid = f.uuids[0]
    f.script(uuid, [(10.0, 100.0), (25.5, 30.0)])
    c0 = f.nvmlDeviceGetTotalEnergyConsumption(h)
    assert c0 > 0                                   # counts since "driver load"
    clock.t = 40.0
    c1 = f.nvmlDeviceGetTotalEnergyConsumption(h)
    exact_j = 10 * 35.0 + 15.5 * 250.0 + 14.5 * (35.0 + 215.0 * 0.3)
    assert f.energy_j(uuid, 0.0, 40.0) == pytest.approx(exact_j)
    assert abs((c1 - c0) - exact_j * 1000) <= 1     # floor of the exact integral, in mJ


def test_power_usage_is_a_one_second_average_and_instant_field_is_instant() -> None:
    clock = Clock()
    f = fake("1xV100", clock)
    f.nvmlInit()
    h = f.nvmlDeviceGetHandleByIndex(0)
    f.set_busy(f.uuids[0], 100.0, [4242], at_s=10.0)
    clock.t = 10.25
    assert f.nvmlDeviceGetPowerUsage(h) == round((0.75 * 35.0 + 0.25 * 250.0) * 1000)
    fv = f.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_INSTANT, 9999])
    assert fv[0].nvmlReturn == pynvml.NVML_SUCCESS and fv[0].value.uiVal == 250_000
    assert fv[0].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    assert fv[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED   # unknown field: per field
    assert f.nvmlDeviceGetUtilizationRates(h).gpu == 100
    assert [p.pid for p in f.nvmlDeviceGetComputeRunningProcesses(h)] == [4242]
    assert f.nvmlDeviceGetMemoryInfo(h).used > 0
    assert f.nvmlDeviceGetPowerManagementLimit(h) == 250_000


def test_faults_reset_not_supported_mig_and_init() -> None:
    clock = Clock()
    f = fake("2xV100", clock)
    a, b = f.uuids
    f.fail_init(until_s=5.0)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        f.nvmlInit()
    clock.t = 5.0
    f.nvmlInit()
    ha, hb = (f.nvmlDeviceGetHandleByUUID(u) for u in (a, b))
    f.reset_counter(a, at_s=6.0)
    clock.t = 7.0
    assert f.nvmlDeviceGetTotalEnergyConsumption(ha) == 35_000   # 1 s at idle since reset
    f.set_not_supported(b, "power_instant", "utilization")
    fv = f.nvmlDeviceGetFieldValues(hb, [pynvml.NVML_FI_DEV_POWER_INSTANT])
    assert fv[0].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    with pytest.raises(pynvml.NVMLError_NotSupported):
        f.nvmlDeviceGetUtilizationRates(hb)
    with pytest.raises(ValueError, match="unknown fake NVML field"):
        f.set_not_supported(b, "temperature")
    f.set_mig(a)
    assert f.nvmlDeviceGetMigMode(ha) == [pynvml.NVML_DEVICE_MIG_ENABLE] * 2
    f.lose_gpu(b, at_s=8.0, until_s=9.0)
    clock.t = 9.5
    assert f.nvmlDeviceGetTotalEnergyConsumption(hb) == 17_500    # back, counter reset at 9
    f.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        f.nvmlDeviceGetName(ha)
    assert f.init_calls == [0.0, 5.0]


def test_steps_must_come_in_time_order() -> None:
    clock = Clock()
    f = fake("1xT4", clock)
    f.set_busy(f.uuids[0], 50.0, at_s=10.0)
    with pytest.raises(ValueError, match="time order"):
        f.set_busy(f.uuids[0], 20.0, at_s=5.0)
    with pytest.raises(ValueError, match="utilization"):
        f.set_busy(f.uuids[0], 150.0, at_s=11.0)
    with pytest.raises(KeyError):
        f.set_busy("GPU-nope", 10.0)


def test_factory_is_explicit_and_wall_clock_stamps_fields() -> None:
    clock = Clock(100.0)
    f = make_fake_nvml("1xV100", node="host a", clock=clock, wall_clock=lambda: 1234.5)
    assert isinstance(f, FakeNvml) and f.IS_FAKE
    assert f.uuids == ["GPU-fake-host-a-0"]
    f.nvmlInit()
    fv = f.nvmlDeviceGetFieldValues(f.nvmlDeviceGetHandleByIndex(0),
                                    [pynvml.NVML_FI_DEV_POWER_INSTANT])
    assert fv[0].timestamp == 1_234_500_000
    assert f.energy_j(f.uuids[0], 100.0, 100.0) == 0.0
    assert math.isclose(f.power_w(f.uuids[0]), 35.0)
