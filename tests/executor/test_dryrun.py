"""The dry-run executor: records and logs what it would do, and a Manager can drive it."""

from __future__ import annotations

import logging

import pytest

from andreas.config import ExecutorSettings
from andreas.executor.base import NodeRef, StartRequest
from andreas.executor.dryrun import DryRunAction, DryRunExecutor
from andreas.executor.errors import ContainerConflict, ImageNotAllowed
from andreas.store import JobState
from andreas.service.submit import cancel
from tests.manager.helpers import Clock, add_job, add_node, attempts, make, state_of

NODE = NodeRef(name="n1", docker_endpoint="ssh://n1")


def req(job_id: str = "j1", attempt: int = 1, **fields) -> StartRequest:
    values = dict(job_id=job_id, attempt=attempt, image="reg.example/train:1", epochs=5,
                  gpu_uuids=("GPU-a", "GPU-b"))
    return StartRequest(**{**values, **fields})


def test_actions_are_recorded_logged_and_change_the_containers(caplog):
    clock = Clock(100.0)
    ex = DryRunExecutor(clock=clock)
    caplog.set_level(logging.INFO, logger="andreas.executor")
    c1 = ex.start(NODE, req("j1"))
    c2 = ex.start(NODE, req("j2"))
    (s1, s2) = ex.containers(NODE)
    assert s1.running and s1.job_id == "j1" and s1.gpu_uuids == ("GPU-a", "GPU-b")
    assert s1.started_s == 100.0 and s1.name == "andreas-j1-1"
    clock.advance(5)
    ex.signal(NODE, c1, "SIGTERM")
    ex.kill(NODE, c2)
    codes = {c.job_id: (c.running, c.exit_code, c.finished_s) for c in ex.containers(NODE)}
    assert codes == {"j1": (False, 143, 105.0), "j2": (False, 137, 105.0)}
    ex.remove(NODE, c1)
    assert [c.job_id for c in ex.containers(NODE)] == ["j2"]
    assert ex.containers(NodeRef(name="other", docker_endpoint="unix:///x")) == []
    assert ex.actions == [
        DryRunAction(kind="start", node="n1", container_id=c1, job_id="j1", attempt=1,
                     detail="gpus=GPU-a,GPU-b image=reg.example/train:1"),
        DryRunAction(kind="start", node="n1", container_id=c2, job_id="j2", attempt=1,
                     detail="gpus=GPU-a,GPU-b image=reg.example/train:1"),
        DryRunAction(kind="signal", node="n1", container_id=c1, job_id="j1", attempt=1,
                     detail="SIGTERM"),
        DryRunAction(kind="kill", node="n1", container_id=c2, job_id="j2", attempt=1,
                     detail="SIGKILL"),
        DryRunAction(kind="remove", node="n1", container_id=c1, job_id="j1", attempt=1)]
    lines = [r.getMessage() for r in caplog.records if r.name == "andreas.executor"]
    assert lines[0] == ("would start job=j1 attempt=1 node=n1 gpus=GPU-a,GPU-b "
                        "image=reg.example/train:1")
    assert lines[2].startswith(f"would send SIGTERM to container {c1} (job=j1)")
    assert lines[3].startswith(f"would send SIGKILL to container {c2} (job=j2)")
    assert len(lines) == 5


def test_conflict_allowlist_and_gone_containers():
    ex = DryRunExecutor(settings=ExecutorSettings(image_allowlist=("reg.example/*",)))
    ex.start(NODE, req())
    with pytest.raises(ContainerConflict, match="andreas-j1-1 exists on node n1"):
        ex.start(NODE, req())
    with pytest.raises(ImageNotAllowed, match="evil.example/x"):
        ex.start(NODE, req("j2", image="evil.example/x"))
    ex.remove(NODE, "nope")
    ex.kill(NODE, "nope")                   # gone: recorded, no error
    ex.ping(NODE)
    assert [a.kind for a in ex.actions] == ["start", "kill"]


def test_complete_after_s_finishes_jobs_with_exit_0():
    clock = Clock(0.0)
    ex = DryRunExecutor(clock=clock,
                        complete_after_s=lambda r: 10.0 * r.epochs if r.job_id != "x" else None)
    a = ex.start(NODE, req("j1"))
    ex.start(NODE, req("x"))
    clock.advance(49)
    assert all(c.running for c in ex.containers(NODE))
    clock.advance(1)
    states = {c.job_id: c for c in ex.containers(NODE)}
    assert not states["j1"].running and states["j1"].exit_code == 0
    assert states["j1"].finished_s == 50.0 and states["x"].running
    assert b"".join(ex.logs(NODE, a, tail=5)).startswith(b"dry run: container andreas-j1-1")


def test_a_manager_drives_the_dry_run_executor(sqlite_store):
    add_node(sqlite_store, "n1", gpus=2)
    add_job(sqlite_store, "j1", epochs=10)
    clock = Clock()
    ex = DryRunExecutor(clock=clock, complete_after_s=600.0)
    m, _, _ = make(sqlite_store, clock=clock, executor=ex)
    m.start()
    assert state_of(sqlite_store, "j1") is JobState.RUNNING
    (a,) = attempts(sqlite_store, "j1")
    (start,) = ex.actions
    assert start.kind == "start" and a.container_id == start.container_id
    assert start.detail.startswith("gpus=" + ",".join(f"GPU-fake-n1-{i}" for i in a.gpu_ids))
    m.tick()
    assert len(ex.actions) == 1                  # a repeated tick changes nothing
    clock.advance(601)
    report = m.tick()
    assert "complete" in report.triggers
    assert state_of(sqlite_store, "j1") is JobState.COMPLETED
    (a,) = attempts(sqlite_store, "j1")
    assert a.exit_code == 0 and a.reason == "completed"
    m.close()


def test_a_manager_stops_a_cancelled_job_through_the_dry_run(sqlite_store):
    add_node(sqlite_store, "n1", gpus=2)
    add_job(sqlite_store, "j1")
    clock = Clock()
    ex = DryRunExecutor(clock=clock)
    m, _, _ = make(sqlite_store, clock=clock, executor=ex)
    m.start()
    cancel(sqlite_store, "j1", reason="test", now_s=clock())
    m.tick()
    kinds = [x.kind for x in ex.actions]
    assert kinds[:2] == ["start", "signal"] and ex.actions[1].detail == "SIGTERM"
    m.tick()
    (a,) = attempts(sqlite_store, "j1")
    assert a.exit_code == 143 and a.end_s is not None
    assert state_of(sqlite_store, "j1") is JobState.CANCELLED
    m.close()
