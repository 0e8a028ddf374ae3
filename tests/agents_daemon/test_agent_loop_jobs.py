"""The daemon's loop in-process, with fake GPUs and a stand-in for the container tracker:
utilization follows the containers, energies reach the store exactly, a job gets its
GPU's energy and the host's, an idle GPU's energy stays with the node, epochs arrive, a
lost GPU becomes gaps (not zeros)."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

import pytest

from agents.config import AgentConfig
from agents.daemon import Agent
from agents.epochs import ContainerExit, ContainerInfo
from agents.gpu import GpuSampler
from agents.host import HostPowerModel, HostSampler
from agents.nvml_fake import make_fake_nvml
from agents.records import EpochRecord
from andreas.store.engine import make_engine

from .helpers_agent import sqlite_store

CID = "c" * 64


class StubClient:
    class containers:
        @staticmethod
        def get(cid):
            return type("C", (), {"attrs": {"State": {"Pid": 4242}}})()


class StubTracker:
    """Stands in for agents.epochs.EpochTracker (same callbacks and followed())."""

    def __init__(self, on_epoch, on_start, on_exit, client):
        self.on_epoch, self.on_start, self.on_exit, self.client = (on_epoch, on_start,
                                                                   on_exit, client)
        self.running: dict[str, ContainerInfo] = {}

    def start(self):
        return self

    def stop(self):
        pass

    def followed(self):
        return list(self.running.values())

    def launch(self, info: ContainerInfo):
        self.running[info.container_id] = info
        self.on_start(info)

    def finish(self, cid: str):
        info = self.running.pop(cid)
        self.on_exit(ContainerExit(container_id=cid, job_id=info.job_id, attempt=info.attempt,
                                   gpu_uuids=info.gpu_uuids, exit_code=0, t=time.time(),
                                   epochs=1, open_epoch=None))


def store_with_running_job(tmp_path, node: str):
    """An SQLite store with job j1 running, and a fast agent configuration for ``node``."""
    url = sqlite_store(tmp_path)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, due_s, "
            "weight, application, grace_s, state) VALUES ('j1', 'img', '[]', '{}', 3, 0, 0, "
            "1, 1, 'a', 120, 'running')")
    cfg = AgentConfig(node_name=node, db_url=url, docker_url="unix:///stub.sock",
                      spool_dir=str(tmp_path / "spool"), interval_s=0.1,
                      min_energy_interval_s=0.1, heartbeat_s=0.5, job_energy_window_s=0.5,
                      batch_s=0.1)
    return engine, cfg


@pytest.mark.slow
def test_jobs_get_their_gpus_and_host_share_and_the_store_gets_exact_energy(tmp_path):
    engine, cfg = store_with_running_job(tmp_path, "loop")
    fake = make_fake_nvml("2xV100", node="loop")
    gpu0, gpu1 = fake.uuids
    trackers: list[StubTracker] = []
    ticks: list[float] = []
    mono = time.monotonic

    def clock() -> float:
        ticks.append(mono())
        return ticks[-1]

    agent = Agent(cfg, fake=fake, gpu_sampler=GpuSampler(fake, min_interval_s=0.1),
                  host_sampler=HostSampler(tmp_path / "no-powercap",
                                           fallback_model=HostPowerModel(idle_w=100, busy_w=300,
                                                                         label="test")),
                  tracker_factory=lambda **kw: trackers.append(StubTracker(**kw)) or trackers[-1],
                  docker_client_factory=lambda url: StubClient(),
                  pid_container={4242: CID}.get, mono=clock)
    agent.start()
    stop = threading.Event()
    loop = threading.Thread(target=agent.run, args=(stop,))
    loop.start()
    time.sleep(0.5)
    tracker = trackers[0]
    tracker.launch(ContainerInfo(container_id=CID, name="j1", job_id="j1", attempt=1,
                                 gpu_uuids=(gpu0,), started_s=time.time()))
    launched = mono()
    time.sleep(1.5)
    tracker.on_epoch(EpochRecord(job_id="j1", attempt=1, epoch=1, start_s=time.time() - 1,
                                 end_s=time.time(), container_id=CID, gpu_uuids=(gpu0,)))
    tracker.finish(CID)
    finished = mono()
    fake.lose_gpu(gpu1)
    time.sleep(0.6)
    stop.set()
    loop.join()
    agent.close()

    with engine.connect() as conn:
        q = lambda sql: conn.execute(sa.text(sql)).all()  # noqa: E731
        ids = dict(q("SELECT uuid, id FROM gpus"))
        by_gpu = {uuid: q(f"SELECT t, power_w, energy_mj, utilization, busy_gpus FROM "
                          f"power_samples WHERE gpu_id = {ids[uuid]} ORDER BY t")
                  for uuid in (gpu0, gpu1)}
        jobs = q("SELECT t, interval_s, gpus, gpu_energy_mj, host_energy_mj FROM job_energy "
                 "WHERE job_id = 'j1' ORDER BY t")
        epochs = q("SELECT epoch, gpu_type, gpus FROM epoch_events")
        gaps = q(f"SELECT COUNT(*), MIN(reason) FROM gpu_gaps WHERE gpu_id = {ids[gpu1]}")
        host_total = q("SELECT SUM(energy_mj) FROM host_samples")[0][0]
        health = dict(q("SELECT uuid, healthy FROM gpus"))
    engine.dispose()

    # utilization followed the container: GPU0 busy (250 W) while it ran, GPU1 idle (35 W)
    assert max(r[1] for r in by_gpu[gpu0]) == 250.0 and max(r[3] for r in by_gpu[gpu0]) == 100
    assert max(r[1] for r in by_gpu[gpu1]) == 35.0
    assert {r[4] for r in by_gpu[gpu0]} == {0, 1}
    # exact energy through sampling, delivery and the store (counter differences telescope)
    stored = sum(r[2] for r in by_gpu[gpu0])
    truth = fake.energy_j(gpu0, ticks[0], ticks[-1]) * 1000
    assert abs(stored - truth) <= 0.01 * truth
    # the job: GPU0's energy while it ran (250 W), all of the host's share (1 of 1 busy GPU)
    assert jobs and all(g == 1 for _, _, g, _, _ in jobs)
    job_gpu = sum(r[3] for r in jobs)
    assert abs(job_gpu / 1000 - 250.0 * (finished - launched)) < 0.2 * 250.0 * (finished -
                                                                              launched)
    assert job_gpu < stored                        # GPU0's idle time stayed with the node
    job_host = sum(r[4] for r in jobs)
    assert 0 < job_host < host_total
    covered = sum(r[1] for r in jobs)
    # the model host draws 200 W with 1 of 2 GPUs busy (the exit interval: 100 W)
    assert abs(job_host / 1000 / covered - (100 + 200 * 0.5)) < 20
    assert epochs == [(1, "V100", 1)]
    # the lost GPU: gaps, no zero samples
    assert gaps[0][0] >= 2 and "lost" in gaps[0][1].lower()
    assert health == {gpu0: 1, gpu1: 0}            # SQLite: the agent keeps gpus.healthy
