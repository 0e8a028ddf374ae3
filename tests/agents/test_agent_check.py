"""What `andreas-agent --check` prints about GPUs and host power (agents/check.py)."""

from __future__ import annotations

from pathlib import Path

from agents.check import gpu_report, host_report
from agents.gpu import GpuSampler
from agents.host import HostPowerModel, HostSampler

from .gpu_helpers import Clock, fake
from .host_helpers import FakePsutil, make_domain


def test_gpu_report_lists_every_gpu_with_counter_and_mig() -> None:
    f = fake("1xV100,1xK80,1xV100", Clock())
    f.set_mig(f.uuids[2], True)
    lines = gpu_report(GpuSampler(f))
    text = "\n".join(lines)
    assert lines[0].startswith("NVML bindings: FAKE NVML")
    assert "GPUs: 3 found, 2 sampled, 1 refused (MIG)" in text
    v100, k80, mig = (next(line for line in lines if u in line) for u in f.uuids)
    assert "Tesla V100-PCIE-16GB" in v100 and "16384 MiB" in v100
    assert "power limit 250 W" in v100 and "energy counter: yes" in v100
    assert "power: instant field" in v100 and "MIG: off" in v100
    assert "energy counter: no" in k80 and "1-s average" in k80
    assert "MIG: ENABLED: refused" in mig


def test_gpu_report_when_nvml_cannot_start() -> None:
    f = fake("1xV100", Clock())
    f.fail_init()
    lines = gpu_report(GpuSampler(f))
    assert lines[-1].startswith("GPUs: none readable: NVML cannot be initialised")


def test_host_report_rapl_and_model(tmp_path: Path) -> None:
    make_domain(tmp_path / "pc", "intel-rapl:0", "package-0", 5)
    ok = host_report(HostSampler(tmp_path / "pc", psutil=FakePsutil()))
    assert ok == [f"Host power: RAPL readable under {tmp_path / 'pc'}: package-0 (intel-rapl:0) "
                  "(CPU packages only; sub-domains and psys not added)"]
    model = host_report(HostSampler(tmp_path / "none", psutil=FakePsutil(),
                                    fallback_model=HostPowerModel.from_profiles("V100")))
    assert model[0].startswith("Host power: RAPL not usable:")
    assert "idle 200 W, busy 240 W (ESTIMATED" in model[1]
    bare = host_report(HostSampler(tmp_path / "none", psutil=FakePsutil()))
    assert "not recorded" in bare[1]


def test_as_root_the_report_says_what_the_service_user_will_see(tmp_path: Path) -> None:
    """`sudo andreas-agent --check` reads RAPL as root; the service runs as andreas-agent,
    for whom a root-only energy_uj means the model (issue 34)."""
    make_domain(tmp_path / "pc", "intel-rapl:0", "package-0", 5)
    energy = tmp_path / "pc" / "intel-rapl:0" / "energy_uj"
    sampler = HostSampler(tmp_path / "pc", psutil=FakePsutil())
    energy.chmod(0o400)                      # root-only, as current kernels make it
    root = host_report(sampler, euid=lambda: 0)
    assert root[0].startswith("Host power: RAPL readable by root under")
    assert "NOT by the service user andreas-agent" in root[1]
    assert "host power model instead" in root[1] and "-r--------" in root[1]
    energy.chmod(0o444)                      # readable by everyone: nothing to add
    assert len(host_report(sampler, euid=lambda: 0)) == 1
    energy.chmod(0o400)                      # as the service user itself: its own view
    assert len(host_report(sampler, euid=lambda: 1000)) == 1


def test_check_writes_to_find_out_whether_the_spool_is_writable(tmp_path: Path) -> None:
    """Issue 16: os.access says yes to root on a read-only file system and to a path that
    is not a directory; --check now writes a probe file and calls such a spool unusable."""
    from types import SimpleNamespace

    from agents.diagnose import CheckReport, _spool

    good = CheckReport()
    _spool(SimpleNamespace(spool_dir=str(tmp_path / "spool"), spool_max_bytes=1 << 20), good)
    assert good.usable and list(tmp_path.iterdir()) == []      # the probe is gone
    a_file = tmp_path / "file"
    a_file.write_text("x")
    bad = CheckReport()
    _spool(SimpleNamespace(spool_dir=str(a_file), spool_max_bytes=1 << 20), bad)
    assert not bad.usable
    assert bad.failures[0].endswith(f"NOT writable by this user ({a_file}: not a directory)")
