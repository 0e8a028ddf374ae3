"""Automatic profiling (andreas.manager.profiling): a job of an application nobody measured
runs on the profiling node, once per GPU count, from its own checkpoint, before any policy
plans it; the fit is stored and the job is planned with measured estimates. SQLite and
MariaDB."""

from __future__ import annotations

import logging

import pytest

from andreas.config import ProfilerSettings
from andreas.manager.profiling import Profiling
from andreas.store import JobState, insert_epoch_events
from andreas.store.decisions import latest_decision
from andreas.store.epochs import max_epochs
from andreas.store.models import NodeState
from andreas.store.nodes import operator_move
from andreas.store.profiles import app_models, app_profiles, recent_epochs
from tests.manager.helpers import (add_job, add_node, attempts, check_capacity, job, make,
                                   state_of)

APP = "brand-new-app"        # in no profiles/ entry: the estimator only has the guess


def _manager(store, **profiler):
    m, ex, clock = make(store, policy="rg")
    m.profiling = Profiling(ProfilerSettings(**{"epochs": 3, **profiler}), m.estimator)
    return m, ex, clock


def _epochs(store, job_id, attempt, node_id, gpus, seconds, first, t0):
    """Finished epochs ``first``.. of one attempt, as the node agent stores them."""
    with store.session() as s:
        insert_epoch_events(s, [dict(job_id=job_id, attempt=attempt, epoch=first + k,
                                     start_s=t0 + sum(seconds[:k]),
                                     end_s=t0 + sum(seconds[:k + 1]), node_id=node_id,
                                     gpu_type="V100", gpus=gpus)
                                for k in range(len(seconds))])


def _doc(store):
    with store.session() as s:
        return latest_decision(s).plan


def _ticks(m, n=4):
    for _ in range(n):
        m.tick()


def test_a_new_application_is_profiled_per_gpu_count_then_planned_from_its_checkpoint(
        mstore, caplog):
    p1 = add_node(mstore, "p1", gpus=2, profiling=True)
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "a", application=APP, epochs=20, submit_s=0.0)
    add_job(mstore, "b", application=APP, epochs=20, submit_s=1.0)
    m, ex, clock = _manager(mstore)

    m.tick()
    assert state_of(mstore, "a") is JobState.PROFILING
    [a1] = attempts(mstore, "a")
    assert a1.profiling and a1.node_id == p1 and len(a1.gpu_ids) == 1
    assert ex.find("a", 1) is not None and ex.node_of(ex.find("a", 1)) == "p1"
    doc = _doc(mstore)
    [action] = [x for x in doc["actions"] if x["job"] == "a"]
    assert action["kind"] == "profile" and action["node"] == "p1" and action["gpus"] == 1
    # b waits for a's run: held back from the optimizer, with the reason in the plan
    assert state_of(mstore, "b") is JobState.QUEUED and not attempts(mstore, "b")
    assert "b" in doc["postponed"]
    assert any(x["job"] == "b" and "being profiled on p1" in x["reason"]
               for x in doc["actions"])

    # the agent stores three epochs of run 1 (g=1): the first is warm-up
    _epochs(mstore, "a", 1, p1, 1, [30.0, 10.0, 10.4], first=1, t0=clock())
    clock.advance(60)
    _ticks(m, 3)          # stop requested (SIGTERM -> exit 143), then run 2 starts
    a1, a2 = attempts(mstore, "a")
    assert a1.stop_requested_s is not None and a1.exit_code == 143
    assert state_of(mstore, "a") is JobState.PROFILING       # between runs it stays so
    assert a2.profiling and a2.node_id == p1 and len(a2.gpu_ids) == 2
    assert ex.find("a", 2).request.restart_count == 1       # resumes from its checkpoint

    _epochs(mstore, "a", 2, p1, 2, [12.0, 6.0, 6.2], first=4, t0=clock())
    clock.advance(60)
    with caplog.at_level(logging.INFO, logger="andreas.manager"):
        _ticks(m, 4)
    fits = [r for r in caplog.records if "profiled application" in r.getMessage()]
    assert len(fits) == 1, [r.getMessage() for r in fits]      # was logged three times
    with mstore.session() as s:
        rows = app_profiles(s, [APP])
        models = app_models(s, [APP])
        done = max_epochs(s, ["a"])
    assert rows[(APP, "V100", 1)].epoch_time_s == pytest.approx(10.2)   # warm-up dropped
    assert rows[(APP, "V100", 2)].epoch_time_s == pytest.approx(6.1)
    assert rows[(APP, "V100", 1)].source == "profiler"
    assert (APP, "V100") in models
    assert done["a"] == 6                                  # epoch history unbroken
    # a (and b, no longer held) are planned on the worker node with profiled estimates
    assert state_of(mstore, "a") is JobState.RUNNING
    assert attempts(mstore, "a")[-1].node_id != p1 and not attempts(mstore, "a")[-1].profiling
    assert ex.find("a", 3).request.restart_count == 2
    assert not m.review.held and not m.review.starts
    doc = _doc(mstore)
    sources = {a["job"]: a["estimate_source"] for a in doc["assignments"]}
    assert "a" in sources
    assert not any(x["job"] == "b" and "profil" in x["reason"] for x in doc["actions"])
    assert all(src in ("profiler", "measured") or src.startswith("model")
               for src in sources.values()), sources
    check_capacity(mstore, ex)


def test_a_failed_profiling_run_falls_back_to_the_guess_and_says_why(mstore):
    add_node(mstore, "p1", gpus=1, profiling=True)
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "a", application=APP)
    add_job(mstore, "b", application=APP, submit_s=1.0)
    m, ex, clock = _manager(mstore)
    m.tick()
    assert state_of(mstore, "a") is JobState.PROFILING
    ex.exit("a", 1, log="Traceback: boom")
    clock.advance(5)
    _ticks(m, 3)
    assert "profiling on p1 failed (exit 1" in (job(mstore, "a").reason or "")
    for j in ("a", "b"):                 # planned as before profiling existed, on the guess
        assert state_of(mstore, j) is JobState.RUNNING
    doc = _doc(mstore)
    assert {a["estimate_source"] for a in doc["assignments"]} == {"unprofiled"}


def test_a_run_that_outlasts_its_timeout_is_stopped_and_counts_as_failed(mstore):
    add_node(mstore, "p1", gpus=1, profiling=True)
    add_node(mstore, "n1", gpus=1)
    add_job(mstore, "a", application=APP)
    m, ex, clock = _manager(mstore, timeout_s=600.0)
    m.tick()
    clock.advance(601)
    _ticks(m, 4)
    assert "profiling on p1 failed (timeout: 0 of 3 epochs" in (job(mstore, "a").reason or "")
    assert attempts(mstore, "a")[0].stop_requested_s is not None
    assert state_of(mstore, "a") is JobState.RUNNING
    assert attempts(mstore, "a")[-1].node_id != attempts(mstore, "a")[0].node_id


def test_a_draining_profiling_node_holds_its_applications_with_the_reason(mstore):
    add_node(mstore, "p1", gpus=1, profiling=True)
    add_node(mstore, "n1", gpus=1)
    with mstore.session() as s:
        operator_move(s, "p1", NodeState.DRAINING)
    add_job(mstore, "a", application=APP)
    add_job(mstore, "c", application="resnet50")       # profiles/ knows it: planned at once
    m, ex, clock = _manager(mstore)
    _ticks(m, 2)
    assert state_of(mstore, "a") is JobState.QUEUED and not attempts(mstore, "a")
    assert state_of(mstore, "c") is JobState.RUNNING
    [why] = [x["reason"] for x in _doc(mstore)["actions"] if x["job"] == "a"]
    assert "profiled first, on p1, which is draining" in why


def test_without_profiling_nodes_nothing_is_held_and_the_estimate_is_a_guess(mstore):
    add_node(mstore, "n1", gpus=1)
    add_job(mstore, "a", application=APP)
    m, ex, clock = _manager(mstore)
    m.tick()
    assert state_of(mstore, "a") is JobState.RUNNING
    [a] = _doc(mstore)["assignments"]
    assert a["estimate_source"] == "unprofiled"


def test_profiling_warmup_epochs_stay_out_of_the_production_refit(mstore):
    p1 = add_node(mstore, "p1", gpus=1, profiling=True)
    add_job(mstore, "a", application=APP, state=JobState.PROFILING)
    with mstore.session() as s:
        from andreas.store.attempts import open_attempt
        open_attempt(s, job_id="a", attempt=1, node_id=p1, gpu_ids=[0], decision_id=None,
                     profiling=True)
        open_attempt(s, job_id="a", attempt=2, node_id=p1, gpu_ids=[0], decision_id=None)
    _epochs(mstore, "a", 1, p1, 1, [50.0, 10.0, 11.0], first=1, t0=1000.0)
    _epochs(mstore, "a", 2, p1, 1, [40.0, 12.0, 13.0], first=4, t0=2000.0)
    with mstore.session() as s:
        seconds = sorted(p.seconds for p in recent_epochs(s, 100))
    # the profiling run's warm-up (50) is dropped; a production attempt keeps its own
    assert seconds == pytest.approx([10.0, 11.0, 12.0, 13.0, 40.0])


def test_an_unknown_profiler_node_is_refused_at_manager_start(mstore):
    import dataclasses

    from andreas.errors import InputError

    add_node(mstore, "n1", gpus=1)
    m, ex, clock = _manager(mstore)
    m.settings = dataclasses.replace(m.settings, profiler=ProfilerSettings(nodes=("gpu99",)))
    with pytest.raises(InputError, match=r"\[profiler\] nodes: unknown node 'gpu99'"):
        m.mark_profiling_nodes()
    m.settings = dataclasses.replace(m.settings, profiler=ProfilerSettings(nodes=("n1",)))
    m.mark_profiling_nodes()
    m.tick()
    with mstore.session() as s:
        from andreas.store.nodes import profiling_of
        assert profiling_of(s, "n1")


def test_a_profiling_node_that_stops_answering_ends_the_profiling_with_the_reason(mstore):
    add_node(mstore, "p1", gpus=1, profiling=True)
    add_node(mstore, "n1", gpus=1)
    add_job(mstore, "a", application=APP, grace_s=5.0)
    m, ex, clock = _manager(mstore)
    m.tick()
    assert state_of(mstore, "a") is JobState.PROFILING
    ex.unreachable.add("p1")
    m.tick()
    assert attempts(mstore, "a")[0].reason == "node unreachable"
    clock.advance(5.0 + m.settings.manager.fence_after_s + 10)   # past the fence hold
    _ticks(m, 3)
    assert "profiling on p1 failed (node unreachable)" in (job(mstore, "a").reason or "")
    assert state_of(mstore, "a") is JobState.RUNNING
    assert attempts(mstore, "a")[-1].node_id != attempts(mstore, "a")[0].node_id


def test_a_job_left_profiling_when_the_node_is_unmarked_goes_back_to_the_queue(mstore):
    """No job is lost: unmarking the only profiling node mid-profiling stops the run and
    queues the job, which is then planned (on the guess) like any other."""
    add_node(mstore, "p1", gpus=1, profiling=True)
    add_node(mstore, "n1", gpus=1)
    add_job(mstore, "a", application=APP)
    m, ex, clock = _manager(mstore)
    m.tick()
    assert state_of(mstore, "a") is JobState.PROFILING
    with mstore.session() as s:
        from andreas.store.nodes import set_profiling_by_name
        set_profiling_by_name(s, "p1", False)
    _ticks(m, 4)
    assert attempts(mstore, "a")[0].stop_requested_s is not None
    assert "no profiling node any more" in (job(mstore, "a").reason or "")
    assert state_of(mstore, "a") is JobState.RUNNING


def test_a_one_gpu_profiling_node_fits_one_count_and_says_its_error_is_unknown(mstore,
                                                                             caplog):
    """One GPU count measured: the fit has no error of its own (mape None), which the log
    line says instead of failing the review with a TypeError."""
    p1 = add_node(mstore, "p1", gpus=1, profiling=True)
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "a", application=APP, epochs=20, submit_s=0.0)
    m, ex, clock = _manager(mstore)
    m.tick()
    [a1] = attempts(mstore, "a")
    assert a1.profiling and a1.node_id == p1 and len(a1.gpu_ids) == 1
    _epochs(mstore, "a", 1, p1, 1, [30.0, 10.0, 10.4], first=1, t0=clock())
    clock.advance(60)
    with caplog.at_level(logging.INFO, logger="andreas.manager"):
        _ticks(m, 4)
    [fit] = [r.getMessage() for r in caplog.records if "profiled application" in r.getMessage()]
    assert "g=1 10.2 s" in fit and "mape unknown (one GPU count)" in fit
    with mstore.session() as s:
        assert (APP, "V100") in app_models(s, [APP])
    assert state_of(mstore, "a") is JobState.RUNNING
