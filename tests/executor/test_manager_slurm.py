"""The Job Manager with the Slurm executor on the real Slurm test cluster (the store is a
SQLite file: these tests are about Slurm; tests/e2e/test_slurm_end_to_end.py runs the
whole site on MariaDB).

A run left by a crash is adopted, never submitted twice; a pending attempt carries
Slurm's reason and is cancelled and replanned past its bound; GPUs other jobs hold are
pinned; Slurm's commands hanging or failing, a node Slurm does not know, a partition
that does not exist, sbatch refusing: one line each, no node wrongly marked down, the
job queued or replanned, the manager never crashes.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update

from andreas.config import ExecutorSettings, Settings, SlurmSettings
from andreas.executor.base import StartRequest
from andreas.executor.slurm import LISTING_TTL_S, SlurmExecutor
from andreas.executor.slurm_cli import SlurmCli
from andreas.manager import Manager
from andreas.store import Job, JobState, Store
from andreas.store.attempts import open_attempt
from andreas.store.jobs import transition
from andreas.store.models import NodeState
from tests.manager.helpers import add_job, add_node, attempts, node_state, settings, state_of
from tests.slurm_cluster import SlurmCluster

QUICK = 'echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID epoch=1 of=1 event=start t=1"; ' \
        'sleep 1; echo "ANDREAS-PROGRESS v1 job=$ANDREAS_JOB_ID epoch=1 of=1 event=end t=2"'


class Site:
    def __init__(self, store: Store, cluster: SlurmCluster, tmp: Path) -> None:
        self.store, self.cluster, self.tmp = store, cluster, tmp
        self.made: list[str] = []
        self.managers: list[Manager] = []
        for d in ("out", "ckpt"):
            (tmp / d).mkdir(exist_ok=True)

    def settings(self, pending_timeout_s: float = 60.0, **slurm) -> Settings:
        base = settings(policy="greedy", max_retries=1)
        return replace(base, executor=ExecutorSettings(
            checkpoint_root=str(self.tmp / "ckpt"), kind="slurm", stop_grace_s=5.0,
            pending_timeout_s=pending_timeout_s, slurm=SlurmSettings(**{
                "partition": self.cluster.partition, "output_dir": str(self.tmp / "out"),
                "command_timeout_s": 10.0, **slurm})))

    def manager(self, s: Settings | None = None, *, cli: SlurmCli | None = None) -> Manager:
        s = s or self.settings()
        m = Manager(self.store, SlurmExecutor(s.executor, cli=cli), s,
                    rng=np.random.default_rng(0))
        m.reconciler.observer.probe_backoff_s = 0.0
        self.managers.append(m)
        return m

    def job(self, script: str = QUICK, **kw) -> str:
        job_id = f"ms-{os.urandom(4).hex()}"
        self.made.append(job_id)
        add_job(self.store, job_id, image="", epochs=1, **kw)
        with self.store.session() as s:
            s.execute(update(Job).where(Job.id == job_id).values(command=["sh", "-c", script]))
        return job_id

    def slurm_jobs(self, name_prefix: str) -> list[tuple[str, str]]:
        out = self.cluster.squeue("--noheader", "--states=all", "--format=%i|%j|%T")
        return [(i, st) for i, n, st in (line.split("|") for line in out.splitlines())
                if n.startswith(name_prefix)]

    def foreign(self, node: str, *args: str) -> str:
        """A job that is not andreas' (partition ``other``), holding what ``args`` ask."""
        return subprocess.run(["sbatch", "--parsable", "--partition=other", "--job-name=foreign",
                               f"--nodelist={node}", "--output=/dev/null", *args,
                               "--wrap=sleep 300"], env=self.cluster.env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def close(self) -> None:
        for m in self.managers:
            m.close()
        ids = [i for j in self.made for i, st in self.slurm_jobs(f"andreas-{j}-")
               if st in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")]
        if ids:
            subprocess.run(["scancel", *ids], env=self.cluster.env, capture_output=True)


@pytest.fixture
def site(sqlite_store: Store, slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Site]:
    s = Site(sqlite_store, slurm_cluster, tmp_path)
    try:
        yield s
    finally:
        s.close()


def tick_until(m: Manager, what: str, predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        m.tick()
        time.sleep(0.2)


def test_a_run_left_by_a_crash_is_adopted_not_submitted_again(site: Site):
    """The manager crashed after sbatch and before recording the Slurm job id: the next
    manager finds the job by its name and adopts it; nothing is submitted twice."""
    node = site.cluster.nodes[1]
    add_node(site.store, node, gpus=2)
    job = site.job(max_gpus=1)
    with site.store.session() as s:
        open_attempt(s, job_id=job, attempt=1, node_id=1, gpu_ids=[0], decision_id=None)
        transition(s, job, JobState.RUNNING, expected=JobState.QUEUED, now_s=time.time())
    s = site.settings()
    crashed = SlurmExecutor(s.executor)
    slurm_id = crashed.start(crashed_ref(site, node), StartRequest(
        job_id=job, attempt=1, image="", command=("sh", "-c", QUICK), epochs=1,
        gpu_uuids=(f"GPU-fake-{node}-0",)))
    m = site.manager(s)
    m.start()
    tick_until(m, "the job completed", lambda: state_of(site.store, job) is JobState.COMPLETED)
    (a,) = attempts(site.store, job)
    assert a.container_id == slurm_id and a.exit_code == 0 and a.start_s is not None
    assert site.slurm_jobs(f"andreas-{job}-") == [(slurm_id, "COMPLETED")]


def crashed_ref(site: Site, node: str):
    from andreas.manager.state import load_state, node_ref
    with site.store.session() as s:
        return node_ref(load_state(s).nodes[node])


def test_a_pending_attempt_shows_slurms_reason_and_is_replanned_past_its_bound(
        site: Site, caplog: pytest.LogCaptureFixture):
    node = site.cluster.nodes[0]
    add_node(site.store, node, gpus=2)
    hog = site.foreign(node, "--cpus-per-task=4")    # every CPU: andreas' job must wait
    try:
        job = site.job()
        m = site.manager(site.settings(pending_timeout_s=3.0))
        caplog.set_level(logging.INFO, logger="andreas")
        m.start()
        tick_until(m, "the attempt pending with a reason", lambda: any(
            a.end_s is None and (a.reason or "").startswith("pending: ")
            for a in attempts(site.store, job)), 30)
        assert attempts(site.store, job)[0].start_s is None        # not started: pending
        tick_until(m, "the attempt cancelled after pending_timeout_s",
                   lambda: attempts(site.store, job)[0].end_s is not None, 30)
        first = attempts(site.store, job)[0]
        assert re.fullmatch(r"pending: (Resources|Priority) for \d+ s \(pending_timeout_s 3\); "
                            r"cancelled", first.reason), first.reason
        assert first.exit_code is None
        assert "pending_timeout_s 3" in caplog.text
    finally:
        subprocess.run(["scancel", hog], env=site.cluster.env, capture_output=True)
    tick_until(m, "the job completed once the node is free",
               lambda: state_of(site.store, job) is JobState.COMPLETED)
    assert [a.exit_code for a in attempts(site.store, job)][-1] == 0
    assert site.store is not None and all(
        st in ("CANCELLED", "COMPLETED") for _, st in site.slurm_jobs(f"andreas-{job}-"))


def test_gpus_other_jobs_hold_are_pinned(site: Site, caplog: pytest.LogCaptureFixture):
    node = site.cluster.nodes[2]
    add_node(site.store, node, gpus=2)
    other = site.foreign(node, "--gres=gpu:1")
    try:
        deadline = time.monotonic() + 30
        while "RUNNING" not in site.cluster.squeue("--noheader", "-j", other, "--format=%T"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        job = site.job(max_gpus=2)
        m = site.manager()
        caplog.set_level(logging.INFO, logger="andreas")
        m.start()
        tick_until(m, "the job running", lambda: any(
            a.start_s is not None for a in attempts(site.store, job)), 30)
        from andreas.executor.slurm_cli import parse_job_detail
        held = parse_job_detail(site.cluster.scontrol("-o", "-d", "show", "job", other),
                                node).gpu_idx
        (a,) = attempts(site.store, job)
        assert len(held) == 1 and len(a.gpu_ids) == 1 and held[0] not in a.gpu_ids
        assert f"GPU(s) {held[0]} held by jobs of others" in caplog.text
    finally:
        subprocess.run(["scancel", other], env=site.cluster.env, capture_output=True)


class Breakable:
    """subprocess.run for the Slurm commands, which can be made to hang or fail."""

    def __init__(self) -> None:
        self.mode = ""

    def __call__(self, argv, **kw):
        if self.mode == "hang":
            raise subprocess.TimeoutExpired(argv, kw.get("timeout") or 0)
        if self.mode == "missing":
            raise FileNotFoundError(2, "No such file or directory")
        return subprocess.run(argv, **kw)


def test_slurm_hanging_or_missing_marks_no_node_down(site: Site,
                                                     caplog: pytest.LogCaptureFixture):
    node = site.cluster.nodes[0]
    add_node(site.store, node, gpus=2)
    runner = Breakable()
    s = site.settings()
    m = site.manager(s, cli=SlurmCli(s.executor.slurm, runner=runner))
    job = site.job('sleep 4; ' + QUICK)
    caplog.set_level(logging.INFO, logger="andreas")
    m.start()
    tick_until(m, "the job running", lambda: any(
        a.start_s is not None for a in attempts(site.store, job)), 30)
    for mode in ("hang", "missing"):
        runner.mode = mode
        for _ in range(3):
            time.sleep(LISTING_TTL_S)                     # past the shared listing
            m.tick()                                      # never raises
        assert node_state(site.store, node) is NodeState.UP
        assert state_of(site.store, job) is JobState.RUNNING
        assert attempts(site.store, job)[0].end_s is None
        runner.mode = ""
        time.sleep(LISTING_TTL_S)
        m.tick()
    assert caplog.text.count("the engine does not answer") == 2
    assert "did not answer within 10 s" in caplog.text and "cannot run sinfo" in caplog.text
    tick_until(m, "the job completed", lambda: state_of(site.store, job) is JobState.COMPLETED)


def test_a_node_slurm_does_not_know_is_down_in_one_line(site: Site,
                                                       caplog: pytest.LogCaptureFixture):
    add_node(site.store, "sn-nowhere", gpus=2)
    add_node(site.store, site.cluster.nodes[1], gpus=2)
    job = site.job()
    m = site.manager()
    caplog.set_level(logging.INFO, logger="andreas")
    m.start()
    tick_until(m, "the job completed", lambda: state_of(site.store, job) is JobState.COMPLETED)
    assert node_state(site.store, "sn-nowhere") is NodeState.DOWN
    assert [a.node_id for a in attempts(site.store, job)] == [2]
    lines = [r.getMessage() for r in caplog.records if "sn-nowhere" in r.getMessage()]
    assert any("not a node of Slurm partition" in x for x in lines), lines
    assert len(lines) <= 3 and all("\n" not in x for x in lines), lines


def test_a_partition_slurm_lacks_keeps_jobs_queued(site: Site,
                                                   caplog: pytest.LogCaptureFixture):
    add_node(site.store, site.cluster.nodes[0], gpus=2)
    job = site.job()
    m = site.manager(site.settings(partition="nosuch"))
    caplog.set_level(logging.INFO, logger="andreas")
    m.start()
    for _ in range(5):
        m.tick()
    assert state_of(site.store, job) is JobState.QUEUED and not attempts(site.store, job)
    assert "not a node of Slurm partition 'nosuch'" in caplog.text


def test_sbatch_refusing_is_one_line_on_the_job(site: Site, caplog: pytest.LogCaptureFixture):
    add_node(site.store, site.cluster.nodes[1], gpus=2)
    job = site.job()
    m = site.manager(site.settings(sbatch_args=("--constraint=nosuchfeature",)))
    caplog.set_level(logging.INFO, logger="andreas")
    m.start()
    tick_until(m, "the job failed after its retries",
               lambda: state_of(site.store, job) is JobState.FAILED, 30)
    reasons = [a.reason for a in attempts(site.store, job)]
    assert len(reasons) == 2 and all(r.startswith("start failed: Slurm: sbatch")
                                     for r in reasons), reasons
    with site.store.session() as s:
        stored = s.get(Job, job)
        assert "Invalid feature specification" in stored.reason
