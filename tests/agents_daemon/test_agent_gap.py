"""An agent killed and started again 3 s later (in-process, fake GPUs whose driver, the
shared FakeNvml, keeps counting meanwhile, as NVML's does): the gap is charged from the
energy counters to the node (one sample over the gap, exact) and to the job that ran on
(its windows stay contiguous), and recorded in ``agent_gaps``; with the driver reloaded
(a new fake: counters back near zero) the gap is recorded as not measured."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

import pytest

from agents.daemon import Agent
from agents.epochs import ContainerInfo
from agents.gpu import GpuSampler
from agents.host import HostPowerModel, HostSampler
from agents.nvml_fake import make_fake_nvml

from .test_agent_loop_jobs import CID, StubClient, StubTracker, store_with_running_job

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

GAP_S = 3.0


class Tracker(StubTracker):
    def wait_connected(self, timeout=None):
        return True


def agent(cfg, fake, tmp_path, trackers):
    return Agent(cfg, fake=fake, gpu_sampler=GpuSampler(fake, min_interval_s=0.1),
                 host_sampler=HostSampler(tmp_path / "no-powercap", fallback_model=HostPowerModel(
                     idle_w=100, busy_w=300, label="test")),
                 tracker_factory=lambda **kw: trackers.append(Tracker(**kw)) or trackers[-1],
                 docker_client_factory=lambda url: StubClient(), pid_container={4242: CID}.get)


def live(a, seconds, launch=None):
    """Run the agent's loop for ``seconds`` (the container launched first, if given)."""
    a.start()
    if launch is not None:
        a.tracker.launch(launch)
    stop = threading.Event()
    loop = threading.Thread(target=a.run, args=(stop,))
    loop.start()
    time.sleep(seconds)
    stop.set()
    loop.join()


def killed(a):
    """As SIGKILL leaves it: the open job window lost, nothing flushed after it (the
    delivery already stored what was queued; closing only releases the spool)."""
    a.windows._open.clear()
    a.close()


def test_the_gap_is_charged_from_the_counters(tmp_path):
    engine, cfg = store_with_running_job(tmp_path, "gap")
    fake = make_fake_nvml("1xV100", node="gap")
    (gpu,) = fake.uuids
    job = ContainerInfo(container_id=CID, name="j1", job_id="j1", attempt=1,
                        gpu_uuids=(gpu,), started_s=time.time())
    first: list = []
    a1 = agent(cfg, fake, tmp_path, first)
    live(a1, 1.5, launch=job)
    killed(a1)
    down_at = time.time()
    time.sleep(GAP_S)                      # the job runs on; the driver counts on
    second: list = []
    a2 = agent(cfg, fake, tmp_path, second)
    live(a2, 1.5, launch=job)
    a2.close()

    with engine.connect() as conn:
        q = lambda sql: conn.execute(sa.text(sql)).all()  # noqa: E731
        samples = q("SELECT t AS at, energy_mj, energy_source, power_source, power_w FROM "
                    "power_samples ORDER BY t")
        windows = q("SELECT t AS at, interval_s, gpu_energy_mj, host_energy_mj FROM job_energy "
                    "WHERE job_id = 'j1' ORDER BY t")
        (row,) = q("SELECT start_s, end_s, charged, reason FROM agent_gaps")
    engine.dispose()
    assert row.charged and row.end_s - row.start_s >= GAP_S
    assert row.start_s < down_at < row.end_s
    assert "charged to j1/1" in row.reason and "host energy not measured" in row.reason
    (gap,) = [s for s in samples if s.at == row.end_s]
    assert gap.energy_source == "counter" and gap.power_source is None
    assert abs(gap.power_w - 250.0) < 0.01 * 250.0           # busy all along: 250 W mean
    times = [s.at for s in samples]
    assert times[times.index(gap.at) - 1] == row.start_s       # it follows the last stored one
    # the job's windows are contiguous through the gap: nothing of its energy is missing
    for (t0, _, _, _), (t1, dt1, _, _) in zip(windows, windows[1:]):
        assert abs((t1 - dt1) - t0) < 0.15, (t0, t1, dt1)
    (charged,) = [w for w in windows if w.at == row.end_s]
    assert charged.host_energy_mj is None
    assert abs(charged.gpu_energy_mj / 1000 / charged.interval_s - 250.0) < 0.02 * 250.0


def test_a_reloaded_driver_leaves_the_gap_recorded_as_not_measured(tmp_path):
    engine, cfg = store_with_running_job(tmp_path, "gap")
    fake = make_fake_nvml("1xV100", node="gap")
    a1 = agent(cfg, fake, tmp_path, [])
    live(a1, 1.0)
    killed(a1)
    time.sleep(GAP_S)
    reloaded = make_fake_nvml("1xV100", node="gap")       # counters start afresh
    a2 = agent(cfg, reloaded, tmp_path, [])
    live(a2, 1.0)
    a2.close()
    with engine.connect() as conn:
        (row,) = conn.execute(sa.text("SELECT end_s - start_s AS s, charged, reason "
                                      "FROM agent_gaps")).all()
        sources = conn.execute(sa.text("SELECT COUNT(*) FROM power_samples WHERE "
                                       "power_source IS NULL")).scalar()
    engine.dispose()
    assert not row.charged and row.s >= GAP_S and sources == 0
    assert "energy counter went down" in row.reason
