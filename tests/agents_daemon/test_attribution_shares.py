"""Attribution: job energy = its GPUs' energy + its share of host energy; idle GPUs stay
with the node; shares add up exactly; NVML's process list only checks Docker's word."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from agents.attribution import (ContainerJob, JobEnergyWindows, JobShare, ProcContainers,
                                attribute, split)
from agents.records import GpuGap, GpuSample, HostSample
from andreas.sources import EnergySource, PowerSource

GPUS = ("GPU-a", "GPU-b", "GPU-c", "GPU-d")
CID1, CID2 = "1" * 64, "2" * 64


def gpu(uuid: str, energy: int | None, pids: tuple[int, ...] = ()) -> GpuSample:
    return GpuSample(uuid=uuid, t=100.0, interval_s=1.0, power_w=energy / 1000 if energy else None,
                     power_source=PowerSource.INSTANT, energy_mj=energy,
                     energy_source=EnergySource.COUNTER if energy is not None else None,
                     pids=pids)


def host(energy: int | None) -> HostSample:
    return HostSample(t=100.0, interval_s=1.0, cpu_utilization=10.0, memory_used_mib=100,
                      host_power_w=None, power_source=None, energy_mj=energy,
                      energy_source=EnergySource.RAPL if energy is not None else None)


def job(cid: str, name: str, *uuids: str) -> ContainerJob:
    return ContainerJob(container_id=cid, job_id=name, attempt=1, gpu_uuids=uuids)


@given(st.integers(0, 10**12), st.lists(st.integers(0, 16), min_size=1, max_size=8))
def test_split_is_exact_and_proportional(total, weights):
    parts = split(total, weights)
    assert len(parts) == len(weights)
    if sum(weights) == 0:
        assert parts == [0] * len(weights)
        return
    assert sum(parts) == total
    for p, w in zip(parts, weights):
        assert abs(p - total * w / sum(weights)) < 1.0 + 1e-9


def test_gpu_energy_of_assigned_gpus_host_by_busy_share_idle_stays_with_node():
    readings = [gpu("GPU-a", 250_000), gpu("GPU-b", 240_000), gpu("GPU-c", 245_000),
                gpu("GPU-d", 40_000)]          # GPU-d idle: nobody's
    jobs = [job(CID1, "j1", "GPU-a", "GPU-b"), job(CID2, "j2", "GPU-c")]
    shares, findings = attribute(readings, host(300_001), jobs, GPUS)
    assert findings == []
    assert shares == [
        JobShare(job_id="j1", attempt=1, gpu_uuids=("GPU-a", "GPU-b"), gpu_energy_mj=490_000,
                 host_energy_mj=200_001),
        JobShare(job_id="j2", attempt=1, gpu_uuids=("GPU-c",), gpu_energy_mj=245_000,
                 host_energy_mj=100_000)]
    attributed = sum(s.gpu_energy_mj for s in shares)
    assert 250_000 + 240_000 + 245_000 + 40_000 - attributed == 40_000   # the idle GPU


def test_unknown_readings_stay_unknown_never_zero():
    readings = [gpu("GPU-a", 250_000), GpuGap(uuid="GPU-b", t=100.0, reason="lost"),
                gpu("GPU-c", None)]
    jobs = [job(CID1, "j1", "GPU-a", "GPU-b"), job(CID2, "j2", "GPU-c")]
    shares, _ = attribute(readings, host(None), jobs, GPUS)
    assert [(s.gpu_energy_mj, s.host_energy_mj) for s in shares] == [(None, None), (None, None)]
    # a GPU without a sample in this interval (its window is not complete yet) is not
    # unknown: its energy arrives with a later interval
    shares, _ = attribute([gpu("GPU-a", 1000)], host(10), [job(CID1, "j1", "GPU-a", "GPU-b")],
                          GPUS)
    assert (shares[0].gpu_energy_mj, shares[0].host_energy_mj) == (1000, 10)


def test_process_check_reports_mismatches_but_docker_owns_the_gpus():
    owner = {101: CID1, 102: CID2, 103: None}.get
    readings = [gpu("GPU-a", 100, pids=(101,)), gpu("GPU-b", 100, pids=(101, 102)),
                gpu("GPU-c", 100, pids=(103,)), gpu("GPU-d", 100)]
    shares, findings = attribute(readings, host(100), [job(CID1, "j1", "GPU-a", "GPU-b")],
                                 GPUS, pid_container=owner)
    assert shares[0].gpu_energy_mj == 200 and shares[0].host_energy_mj == 100
    messages = sorted(f.message for f in findings)
    assert len(messages) == 2
    assert "GPU GPU-b is assigned to job j1 but NVML lists processes outside its " \
           "container: 102 (container 222222222222)" in messages[0]
    assert "GPU GPU-c is assigned to no andreas job" in messages[1]
    assert "103 (not in a container)" in messages[1]


def test_shared_and_foreign_gpus_are_findings_and_never_counted_twice():
    readings = [gpu("GPU-a", 1001)]
    jobs = [job(CID1, "j1", "GPU-a"), job(CID2, "j2", "GPU-a", "GPU-x")]
    shares, findings = attribute(readings, host(9), jobs, GPUS)
    assert sum(s.gpu_energy_mj for s in shares) == 1001
    assert sorted(s.gpu_energy_mj for s in shares) == [500, 501]
    assert sum(s.host_energy_mj for s in shares) == 9
    assert {f.key[0] for f in findings} == {"shared-gpu", "unknown-gpu"}


def test_windows_sum_intervals_and_close_on_exit_gaps_and_size():
    w = JobEnergyWindows(window_s=3.0)
    share = JobShare(job_id="j", attempt=1, gpu_uuids=("GPU-a",), gpu_energy_mj=10,
                     host_energy_mj=1)
    assert w.add(1.0, 1.0, [share]) == []
    assert w.add(2.0, 1.0, [share]) == []
    (row,) = w.add(3.0, 1.0, [share])                      # 3 s covered: closed
    assert (row.t, row.interval_s, row.gpu_energy_mj, row.host_energy_mj) == (3.0, 3.0, 30, 3)
    assert w.add(4.0, 1.0, [share]) == []
    unknown = JobShare(job_id="j", attempt=1, gpu_uuids=("GPU-a",), gpu_energy_mj=None,
                       host_energy_mj=1)
    (row,) = w.add(5.0, 1.0, [unknown])                    # a gap: no row mixes the two
    assert (row.t, row.gpu_energy_mj) == (4.0, 10)
    (row,) = w.add(6.0, 1.0, [])                           # the container is gone
    assert (row.t, row.interval_s, row.gpu_energy_mj, row.host_energy_mj) == (5.0, 1.0, None, 1)
    assert w.add(7.0, 1.0, [share]) == []
    (row,) = w.flush()
    assert row.t == 7.0 and w.flush() == []


def test_pid_to_container_from_proc_cgroup(tmp_path):
    cid = "ab" * 32
    for pid, text in ((10, f"0::/system.slice/docker-{cid}.scope\n"),
                      (11, f"12:memory:/docker/{cid}\n1:name=systemd:/docker/{cid}\n"),
                      (12, "0::/user.slice/user-1000.slice/session-3.scope\n")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    lookup = ProcContainers(tmp_path)
    assert (lookup(10), lookup(11), lookup(12), lookup(13)) == (cid, cid, None, None)


def test_a_shared_gpu_is_split_by_the_jobs_shares_and_so_is_host_energy():
    a = ContainerJob(container_id=CID1, job_id="a", attempt=1, gpu_uuids=("GPU-a",),
                     gpu_milli=600)
    b = ContainerJob(container_id=CID2, job_id="b", attempt=1, gpu_uuids=("GPU-a",),
                     gpu_milli=200)
    c = ContainerJob(container_id="3" * 64, job_id="c", attempt=1, gpu_uuids=("GPU-b",))
    shares, findings = attribute([gpu("GPU-a", 200_000), gpu("GPU-b", 300_000)], host(90_000),
                                 [a, b, c], GPUS)
    assert findings == []                                # 600 + 200 <= 1000: as planned
    by = {s.job_id: s for s in shares}
    assert (by["a"].gpu_energy_mj, by["b"].gpu_energy_mj) == (150_000, 50_000)
    assert by["c"].gpu_energy_mj == 300_000
    # host by held GPU: 600 : 200 : 1000
    assert [by[j].host_energy_mj for j in "abc"] == [30_000, 10_000, 50_000]


def test_a_gpu_given_beyond_its_whole_is_a_finding():
    a = ContainerJob(container_id=CID1, job_id="a", attempt=1, gpu_uuids=("GPU-a",),
                     gpu_milli=700)
    b = ContainerJob(container_id=CID2, job_id="b", attempt=1, gpu_uuids=("GPU-a",),
                     gpu_milli=700)
    shares, findings = attribute([gpu("GPU-a", 140_000)], None, [a, b], GPUS)
    assert [f.key[0] for f in findings] == ["shared-gpu"]
    assert "beyond its whole" in findings[0].message
    assert sum(s.gpu_energy_mj for s in shares) == 140_000


def test_a_shared_gpu_follows_what_its_processes_used():
    a = ContainerJob(container_id=CID1, job_id="a", attempt=1, gpu_uuids=("GPU-a",),
                     gpu_milli=500)
    b = ContainerJob(container_id=CID2, job_id="b", attempt=1, gpu_uuids=("GPU-a",),
                     gpu_milli=500)
    owner = {10: CID1, 20: CID2}.get
    used = GpuSample(uuid="GPU-a", t=100.0, interval_s=1.0, power_w=200.0,
                     power_source=PowerSource.INSTANT, energy_mj=200_000,
                     energy_source=EnergySource.COUNTER, pids=(10, 20),
                     process_sm=((10, 75.0), (20, 25.0)),
                     process_memory_mib=((10, 1000), (20, 3000)))
    shares, findings = attribute([used], None, [a, b], GPUS, pid_container=owner)
    assert [s.gpu_energy_mj for s in shares] == [150_000, 50_000]     # by SM time
    no_sm = dataclasses.replace(used, process_sm=())
    shares, _ = attribute([no_sm], None, [a, b], GPUS, pid_container=owner)
    assert [s.gpu_energy_mj for s in shares] == [50_000, 150_000]     # by memory
    shares, _ = attribute([used], None, [a, b], GPUS)                 # no PID map: shares
    assert [s.gpu_energy_mj for s in shares] == [100_000, 100_000]
    assert findings == []
