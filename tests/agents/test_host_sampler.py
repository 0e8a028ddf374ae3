"""Host sampling: RAPL package domains only, wrap-around, unreadable/absent -> model."""

from __future__ import annotations

import pathlib
from pathlib import Path

import pytest

from agents.host import HostPowerModel, HostSampler, RaplReader, RaplUnavailable, \
    profile_gpu_type
from andreas.sources import EnergySource, PowerSource

from .host_helpers import MAX_UJ, FakePsutil, make_domain, set_energy

@pytest.fixture
def powercap(tmp_path: Path) -> dict[str, Path]:
    """Two packages with core/uncore/dram sub-domains, a psys domain and an MMIO copy."""
    root = tmp_path / "powercap"
    dirs = {
        "pkg0": make_domain(root, "intel-rapl:0", "package-0", 1_000_000),
        "core0": make_domain(root, "intel-rapl:0/intel-rapl:0:0", "core", 500_000),
        "dram0": make_domain(root, "intel-rapl:0/intel-rapl:0:1", "dram", 200_000),
        "pkg1": make_domain(root, "intel-rapl:1", "package-1", 3_000_000),
        "core1": make_domain(root, "intel-rapl:1:0", "core", 100_000),
        "psys": make_domain(root, "intel-rapl:2", "psys", 9_000_000),
        "mmio": make_domain(root, "intel-rapl-mmio:0", "package-0", 1_000_000),
    }
    (root / "intel-rapl").mkdir()       # the control-type directory itself
    dirs["root"] = root
    return dirs


def test_only_package_domains_are_read_and_summed(powercap: dict[str, Path]) -> None:
    ps = FakePsutil()
    s = HostSampler(powercap["root"], psutil=ps)
    assert [d.name for d in s.rapl.domains] == ["package-0", "package-1"]
    assert s.sample(10.0, 1000.0) is None                 # baseline
    set_energy(powercap["pkg0"], 1_000_000 + 60_000_000)        # 60 J
    set_energy(powercap["pkg1"], 3_000_000 + 40_000_000)        # 40 J
    for sub in ("core0", "dram0", "core1", "psys", "mmio"):
        set_energy(powercap[sub], 999_000_000_000)              # must not count
    x = s.sample(12.0, 1002.0)
    assert x.energy_mj == 100_000 and x.energy_source is EnergySource.RAPL
    assert x.host_power_w == pytest.approx(50.0) and x.power_source is PowerSource.RAPL
    assert x.interval_s == 2.0 and x.t == 1002.0
    assert x.cpu_utilization == 37.5 and x.memory_used_mib == 16_000
    assert x.agent_cpu_percent == 0.5 and x.agent_rss_mib == 40.0
    assert set(ps.cpu_calls) == {None} and set(ps.process.calls) == {None}   # non-blocking


def test_wrap_around_uses_max_energy_range(powercap: dict[str, Path]) -> None:
    s = HostSampler(powercap["root"], psutil=FakePsutil())
    set_energy(powercap["pkg0"], MAX_UJ - 1_000_000)
    s.sample(0.0, 0.0)
    set_energy(powercap["pkg0"], 2_000_000)                     # wrapped: 3 J, not -262 kJ
    set_energy(powercap["pkg1"], 3_000_000)                     # unchanged
    x = s.sample(1.0, 1.0)
    assert x.energy_mj == 3_000 and x.host_power_w == pytest.approx(3.0)


def test_sub_millijoule_remainders_are_carried_so_sums_stay_exact(
        powercap: dict[str, Path]) -> None:
    s = HostSampler(powercap["root"], psutil=FakePsutil())
    s.sample(0.0, 0.0)
    total = 0
    e = 1_000_000
    for i in range(1, 11):
        e += 1_234_567                                      # 1234.567 mJ per second
        set_energy(powercap["pkg0"], e)
        total += s.sample(float(i), float(i)).energy_mj
    assert total == (e - 1_000_000) // 1000


def test_unreadable_energy_falls_back_to_model(powercap: dict[str, Path],
                                               monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    real = pathlib.Path.read_text

    def guarded(self: Path, *a, **k) -> str:
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)
    monkeypatch.setattr(pathlib.Path, "read_text", guarded)
    model = HostPowerModel.from_profiles("V100")
    s = HostSampler(powercap["root"], psutil=FakePsutil(), fallback_model=model)
    assert s.rapl is None and "permission denied" in s.rapl_problem
    assert "CVE-2020-8694" in caplog.text or "permission denied" in caplog.text
    assert s.power_source is PowerSource.MODEL
    s.sample(0.0, 0.0)
    x = s.sample(2.0, 2.0, busy_fraction=0.5)
    assert x.power_source is PowerSource.MODEL and x.energy_source is EnergySource.MODEL
    assert x.host_power_w == pytest.approx(220.0)          # 200 + (240 - 200) * 0.5
    assert x.energy_mj == 440_000


def test_absent_powercap_is_model_or_nothing(tmp_path: Path) -> None:
    s = HostSampler(tmp_path / "nope", psutil=FakePsutil(),
                    fallback_model=HostPowerModel.from_profiles("T4"))
    assert "does not exist" in s.rapl_problem
    s.sample(0.0, 0.0)
    x = s.sample(1.0, 1.0, busy_fraction=1.0)
    assert x.host_power_w == 165.0 and x.energy_source is EnergySource.MODEL
    bare = HostSampler(tmp_path / "nope", psutil=FakePsutil())
    assert bare.power_source is None
    bare.sample(0.0, 0.0)
    y = bare.sample(1.0, 1.0)
    assert y.host_power_w is None and y.energy_mj is None and y.power_source is None
    (tmp_path / "empty").mkdir()
    with pytest.raises(RaplUnavailable, match="no RAPL package domain"):
        RaplReader(tmp_path / "empty")


def test_read_failure_mid_run_uses_model_for_that_interval(powercap: dict[str, Path]) -> None:
    s = HostSampler(powercap["root"], psutil=FakePsutil(),
                    fallback_model=HostPowerModel.from_profiles("V100"))
    s.sample(0.0, 0.0)
    (powercap["pkg1"] / "energy_uj").unlink()
    x = s.sample(1.0, 1.0)
    assert x.energy_source is EnergySource.MODEL and x.energy_mj == 200_000
    set_energy(powercap["pkg1"], 3_000_000)
    y = s.sample(2.0, 2.0)                                   # RAPL re-baselines: model once more
    assert y.energy_source is EnergySource.MODEL
    set_energy(powercap["pkg0"], 2_000_000)
    z = s.sample(3.0, 3.0)
    assert z.energy_source is EnergySource.RAPL and z.energy_mj == 1_000


def test_host_model_from_profiles_and_gpu_names() -> None:
    assert profile_gpu_type(["Tesla V100-PCIE-16GB", "Tesla V100-PCIE-16GB"]) == "V100"
    assert profile_gpu_type(["Tesla T4"]) == "T4"
    assert profile_gpu_type(["NVIDIA H100 80GB HBM3"]) is None
    m = HostPowerModel.for_gpu_models(["Tesla T4"])
    assert (m.idle_w, m.busy_w) == (150.0, 165.0) and "[T4]" in m.label
    d = HostPowerModel.for_gpu_models(["NVIDIA H100 80GB HBM3"])
    assert (d.idle_w, d.busy_w) == (200.0, 240.0) and "[default]" in d.label
    assert d.power_w(2.0) == 240.0 and d.power_w(-1.0) == 200.0
