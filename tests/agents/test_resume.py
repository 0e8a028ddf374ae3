"""agents/resume.py: the time an agent was not running, charged from the GPUs' energy
counters when the previous run's last stored sample and counter are known, else
recorded as not measured, with the reason."""

from __future__ import annotations

import json

from agents.attribution import ContainerJob
from agents.entries import to_entry
from agents.records import GpuSample, JobEnergy
from agents.resume import STATE_FILE, Resume
from andreas.sources import EnergySource

JOB = ContainerJob(container_id="c1", job_id="j", attempt=2, gpu_uuids=("GPU-0",))


def sample(uuid: str, t: float, counter: int) -> dict:
    return to_entry(GpuSample(uuid=uuid, t=t, interval_s=1.0, power_w=100.0,
                              power_source=None, energy_mj=100_000,
                              energy_source=EnergySource.COUNTER, counter_mj=counter),
                    busy_gpus=1)


def window(t: float) -> dict:
    return to_entry(JobEnergy(job_id="j", attempt=2, t=t, interval_s=5.0,
                              gpu_energy_mj=500_000, host_energy_mj=1000,
                              gpu_uuids=("GPU-0",)))


def run_before(tmp_path, boot: str = "boot-1") -> None:
    """A previous run: samples every second, a job window ending at t = 104."""
    r = Resume(tmp_path, boot=boot)
    r.holding = (JOB,)
    for k in range(6):
        r.stored([sample("GPU-0", 100.0 + k, 1_000_000 + 100_000 * k),
                  sample("GPU-1", 100.0 + k, 5_000_000 + 50_000 * k)])
        if k == 4:
            r.stored([window(104.0)])
    assert json.loads((tmp_path / STATE_FILE).read_text())["gpus"]["GPU-0"] == [105.0, 1_500_000]


def test_the_gap_is_charged_from_the_counters_to_the_node_and_the_job(tmp_path):
    run_before(tmp_path)
    r = Resume(tmp_path, boot="boot-1")                  # restarted 30 s later
    gap = r.gap(135.0, {"GPU-0": 4_500_000, "GPU-1": 6_750_000}, [JOB],
                power_limits_w={"GPU-0": 300.0, "GPU-1": 300.0})
    assert gap is not None and gap.row.charged
    by_gpu = {s.uuid: s for s in gap.samples}
    assert by_gpu["GPU-0"].energy_mj == 3_000_000 and by_gpu["GPU-0"].interval_s == 30.0
    assert by_gpu["GPU-1"].energy_mj == 1_500_000 and by_gpu["GPU-0"].power_w is None
    (job,) = gap.jobs                 # from its last stored window (t = 104, counter there)
    assert (job.job_id, job.attempt, job.t, job.interval_s) == ("j", 2, 135.0, 31.0)
    assert job.gpu_energy_mj == 4_500_000 - 1_400_000 and job.host_energy_mj is None
    assert (gap.row.start_s, gap.row.end_s) == (105.0, 135.0)
    assert "agent not running for 30 s" in gap.row.reason and "j/2" in gap.row.reason
    assert r.gap(140.0, {}, []) is None                  # charged once


def test_what_cannot_be_charged_is_recorded_with_the_reason(tmp_path):
    run_before(tmp_path)
    other = ContainerJob(container_id="c9", job_id="j", attempt=2, gpu_uuids=("GPU-0",))
    gap = Resume(tmp_path, boot="boot-1").gap(
        135.0, {"GPU-0": 4_500_000, "GPU-1": 10}, [other], power_limits_w={})
    assert gap is not None and not gap.row.charged
    assert [s.uuid for s in gap.samples] == ["GPU-0"]    # the other GPU's counter reset
    assert "GPU GPU-1: energy counter went down" in gap.row.reason
    assert "j/2 ended while the agent was down: not attributed" in gap.row.reason
    assert gap.jobs == ()


def test_a_reboot_or_no_state_charges_nothing(tmp_path):
    run_before(tmp_path)
    gap = Resume(tmp_path, boot="boot-2").gap(500.0, {"GPU-0": 10, "GPU-1": 10}, [JOB])
    assert gap is not None and not gap.row.charged and gap.samples == () and gap.jobs == ()
    assert "the machine was restarted" in gap.row.reason
    assert Resume(tmp_path / "fresh", boot="boot-1").gap(500.0, {"GPU-0": 1}, []) is None
    (tmp_path / STATE_FILE).write_text("{not json")
    broken = Resume(tmp_path, boot="boot-1").gap(500.0, {"GPU-0": 1}, [])
    assert broken is not None and not broken.row.charged


def test_an_implausible_rise_and_a_short_pause(tmp_path):
    run_before(tmp_path)
    gap = Resume(tmp_path, boot="boot-1").gap(
        135.0, {"GPU-0": 1_500_000 + 10**9, "GPU-1": 6_000_000}, [JOB],
        power_limits_w={"GPU-0": 300.0, "GPU-1": 300.0})
    assert gap is not None and not gap.row.charged
    assert "more than the board can draw" in gap.row.reason
    assert Resume(tmp_path, boot="boot-1").gap(106.0, {"GPU-0": 1_600_000}, []) is None


def test_a_replayed_older_batch_does_not_move_the_mark_back(tmp_path):
    r = Resume(tmp_path, boot="b")
    r.stored([sample("GPU-0", 200.0, 2_000_000)])
    r.stored([sample("GPU-0", 150.0, 1_000_000)])        # the spool replayed after a write
    assert json.loads((tmp_path / STATE_FILE).read_text())["gpus"]["GPU-0"] == [200.0, 2_000_000]
