"""Start, complete, preempt, move and resize through the tick, with a fake engine."""

from __future__ import annotations

import pytest

from andreas.manager.plandoc import Target
from andreas.model import Config
from andreas.store import JobState
from tests.manager.helpers import (add_job, add_node, attempts, check_capacity, dump, job,
                                   make, state_of)


def set_target(m, assignments, postponed=(), decision_id=None):
    """Replace the manager's target by hand (what a decision would have said)."""
    a = {j: Config(node=n, gpus=g) for j, (n, g) in assignments.items()}
    m.target = Target(decision_id=decision_id, assignments=a, postponed=frozenset(postponed),
                      order=tuple(a))
    m._target_loaded = True


def test_queued_job_is_started_on_the_planned_gpus_and_completes(mstore):
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "j1")
    m, ex, clock = make(mstore)
    report = m.start()
    assert "start" in report.triggers and report.decision_id is not None
    assert state_of(mstore, "j1") is JobState.RUNNING
    (a,) = attempts(mstore, "j1")
    c = ex.find("j1")
    assert a.container_id == c.id and a.start_s == clock() and a.decision_id == report.decision_id
    assert c.request.gpu_uuids == tuple(f"GPU-fake-n1-{i}" for i in a.gpu_ids)
    assert c.request.fake_gpus and c.request.restart_count == 0 and c.request.epochs == 10
    assert a.gpu_ids == sorted(a.gpu_ids) and a.gpu_ids[0] == 0     # lowest indexes first
    assert job(mstore, "j1").predicted_cost > 0
    clock.advance(600)
    ex.exit("j1", 0)
    report = m.tick()
    assert "complete" in report.triggers
    assert state_of(mstore, "j1") is JobState.COMPLETED
    assert job(mstore, "j1").epochs_done == 10
    (a,) = attempts(mstore, "j1")
    assert a.exit_code == 0 and a.end_s == clock() and a.reason == "completed"
    assert ex.find("j1") is not None            # the latest container stays for `andreas logs`


def test_ticks_are_idempotent(mstore):
    add_node(mstore, "n1", gpus=4)
    add_node(mstore, "n2", gpus=2, gpu_type="T4")
    for i in range(5):
        add_job(mstore, f"j{i}", due_s=1_000_000.0 + 5000 * (i + 1))
    m, ex, clock = make(mstore)
    m.start()
    m.tick()
    before, calls = dump(mstore), len(ex.actions())
    for _ in range(3):
        report = m.tick()
        assert report.triggers == frozenset() and report.decision_id is None
    assert dump(mstore) == before
    assert len(ex.actions()) == calls
    check_capacity(mstore, ex)


def test_move_stops_with_sigterm_then_starts_elsewhere_from_the_checkpoint(mstore):
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "b", gpus=2)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)}, decision_id=None)
    m.tick()
    (first,) = attempts(mstore, "j")
    ex.sigterm_exit = None                      # the job takes its time to checkpoint
    set_target(m, {"j": ("b", 2)})
    clock.advance(10)
    m.tick()
    assert state_of(mstore, "j") is JobState.PREEMPTING
    (first,) = attempts(mstore, "j")
    assert first.stop_requested_s == clock() and first.end_s is None
    assert ex.find("j", 1).signals == ["SIGTERM"]
    m.tick()                                     # no second SIGTERM, no kill yet
    assert ex.find("j", 1).signals == ["SIGTERM"]
    ex.exit("j", 143)
    clock.advance(5)
    m.tick()
    assert state_of(mstore, "j") is JobState.RUNNING    # preempted, then started on b
    a1, a2 = attempts(mstore, "j")
    assert a1.exit_code == 143 and a1.reason.startswith("stopped on request")
    node_b = ex.find("j", 2)
    assert ex.node_of(node_b) == "b" and node_b.request.restart_count == 1
    assert len(a2.gpu_ids) == 2
    assert job(mstore, "j").failures == 0


def test_kill_after_grace_period(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j", grace_s=60.0)
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 2)})
    m.tick()
    ex.sigterm_exit = None
    set_target(m, {"j": ("a", 1)})               # resize: stop, restart with 1 GPU
    m.tick()
    clock.advance(59)
    m.tick()
    assert ex.calls_of("kill") == []
    clock.advance(2)
    m.tick()                                     # grace over: SIGKILL (exit 137)
    assert len(ex.calls_of("kill")) == 1
    m.tick()                                     # exit recorded, restarted with 1 GPU
    a1, a2 = attempts(mstore, "j")
    assert a1.exit_code == 137 and len(a2.gpu_ids) == 1
    assert state_of(mstore, "j") is JobState.RUNNING and job(mstore, "j").failures == 0


def test_postponed_running_job_is_preempted_and_gpus_go_to_the_next(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "low")
    add_job(mstore, "urgent")
    m, ex, clock = make(mstore)
    set_target(m, {"low": ("a", 2)}, postponed=("urgent",))
    m.tick()
    assert state_of(mstore, "low") is JobState.RUNNING
    set_target(m, {"urgent": ("a", 2)}, postponed=("low",))
    m.tick()        # SIGTERM -> exits 143 at once in the fake; GPUs free only next tick
    assert state_of(mstore, "urgent") is JobState.QUEUED
    m.tick()
    assert state_of(mstore, "low") is JobState.PREEMPTED
    assert state_of(mstore, "urgent") is JobState.RUNNING
    check_capacity(mstore, ex)


def test_continue_keeps_the_container(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    m.reschedule("period")
    m.tick()
    # whatever the policy chose, a job whose target is its own config is not touched
    if m.target.assignments["j"] == Config(node="a", gpus=1):
        assert ex.calls_of("signal") == []


def test_period_refits_the_runtime_models_from_production_epochs(mstore):
    """A period rescheduling refits app_models from the epochs jobs really ran (here 4 epochs
    of 30 s on 1 V100), so the other GPU counts get a model from production data."""
    from sqlalchemy import select

    from andreas.store.models import AppModel
    from andreas.store.samples import insert_epoch_events

    node_id = add_node(mstore, "n", gpus=2)
    add_job(mstore, "done", application="newapp", state=JobState.COMPLETED)
    m, _, clock = make(mstore)
    now = clock()
    with mstore.session() as s:
        insert_epoch_events(s, [dict(job_id="done", attempt=1, epoch=k, start_s=now - 400 + 60 * k,
                                     end_s=now - 370 + 60 * k, node_id=node_id, gpu_type="V100",
                                     gpus=1) for k in range(1, 5)])
    m.tick()
    with mstore.session() as s:
        assert s.execute(select(AppModel).where(AppModel.application == "newapp")).first() is None
    m.request("period")
    m.tick()
    with mstore.session() as s:
        model = s.execute(select(AppModel).where(AppModel.application == "newapp")).scalar_one()
    assert model.gpu_type == "V100" and model.source == "measured"
    assert model.t1_s * (model.serial_fraction + (1 - model.serial_fraction)) == \
        pytest.approx(30.0)


def test_a_tick_reads_the_store_again_only_after_writing_it_itself(mstore, monkeypatch):
    """Settling that wrote nothing leaves the observed store current, so the tick plans on
    it without a second read; settling that wrote (an exit closed an attempt) is read
    back, and the tick plans on what it wrote."""
    import andreas.manager.manager as manager_module

    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "j1")
    m, ex, clock = make(mstore)
    m.start()
    reads, seen = [], []
    real_load, real_refresh = manager_module.load_state, m.engine_view.refresh
    monkeypatch.setattr(manager_module, "load_state", lambda s: reads.append(1) or real_load(s))
    monkeypatch.setattr(m.engine_view, "refresh",
                        lambda state: seen.append(state) or real_refresh(state))
    m.tick()
    assert reads == [] and seen[-1].jobs["j1"].state is JobState.RUNNING
    clock.advance(600)
    ex.exit("j1", 0)
    report = m.tick()
    assert "complete" in report.triggers and reads == [1]
    assert "j1" not in seen[-1].jobs or seen[-1].jobs["j1"].state is JobState.COMPLETED
