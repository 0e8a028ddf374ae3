"""GPU sharing in the manager: jobs submitted with a share of one GPU run side by side on it,
never beyond the GPU's whole, under the policies that plan shares; the others leave them
waiting and say why."""

from __future__ import annotations

import pytest

from andreas.manager.snapshot import build_snapshot
from andreas.manager.state import load_state
from andreas.store import JobState
from andreas.store.decisions import latest_decision
from tests.manager.helpers import (add_job, add_node, attempts, check_capacity, make,
                                   state_of)


def test_shares_run_side_by_side_on_one_gpu(mstore):
    add_node(mstore, "n1", gpus=1)
    for j in ("a", "b"):
        add_job(mstore, j, gpu_milli=400, gpu_memory_mib=4096)
    m, ex, _ = make(mstore, policy="ojpp-heuristic")
    m.start()
    for j in ("a", "b"):
        assert state_of(mstore, j) is JobState.RUNNING
        (a,) = attempts(mstore, j)
        assert a.gpu_ids == [0] and a.gpu_milli == 400
        assert ex.find(j).request.gpu_milli == 400
    check_capacity(mstore, ex)


def test_a_share_never_overfills_a_gpu_and_a_whole_job_never_joins_one(mstore):
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "s1", gpu_milli=600, submit_s=1.0)
    add_job(mstore, "s2", gpu_milli=600, submit_s=2.0)
    add_job(mstore, "w", submit_s=3.0)                   # whole GPU, elastic
    m, ex, clock = make(mstore, policy="ojpp-heuristic")
    m.start()
    for _ in range(3):
        clock.advance(5)
        m.tick()
        check_capacity(mstore, ex)
    running = {j: attempts(mstore, j)[-1] for j in ("s1", "s2", "w")
               if state_of(mstore, j) is JobState.RUNNING}
    assert len(running) == 2                             # 600 + 600 > 1000: one waits
    held = [g for a in running.values() for g in a.gpu_ids]
    assert sorted(held) == [0, 1]                        # each on a GPU of its own


@pytest.mark.parametrize("policy", ["rg", "greedy"])
def test_energy_policies_plan_shares(mstore, policy):
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "s1", gpu_milli=300)
    add_job(mstore, "s2", gpu_milli=300)
    add_job(mstore, "w")
    m, ex, _ = make(mstore, policy=policy)
    m.start()
    assert {state_of(mstore, j) for j in ("s1", "s2", "w")} == {JobState.RUNNING}
    check_capacity(mstore, ex)
    shared = {a["job"]: a["gpu_ids"] for a in _plan(mstore)["assignments"]}
    assert len(shared["s1"]) == 1 and len(shared["s2"]) == 1


def test_a_policy_of_whole_gpus_leaves_shares_waiting_and_says_why(mstore):
    add_node(mstore, "n1", gpus=2)
    add_job(mstore, "s", gpu_milli=500)
    add_job(mstore, "w")
    m, ex, _ = make(mstore, policy="pr")
    m.start()
    assert state_of(mstore, "w") is JobState.RUNNING
    assert state_of(mstore, "s") is JobState.QUEUED
    doc = _plan(mstore)
    assert "s" in doc["postponed"]
    (wait,) = [a for a in doc["actions"] if a["job"] == "s"]
    assert "GPU share" in wait["reason"] and "pr" in wait["reason"]


def _plan(store):
    with store.session() as s:
        return latest_decision(s).plan


def test_snapshot_names_held_gpus_as_positions_among_the_usable_ones(mstore):
    add_node(mstore, "n1", gpus=3, unhealthy=(0,))      # usable: indexes 1, 2
    add_job(mstore, "a", gpu_milli=250)
    m, ex, clock = make(mstore, policy="ojpp-heuristic")
    m.start()
    (a,) = attempts(mstore, "a")
    assert a.gpu_ids[0] in (1, 2)
    with mstore.session() as s:
        build = build_snapshot(s, load_state(s), m.estimator, m.settings.manager, clock())
    (job,) = build.snapshot.jobs
    assert job.demand is not None and job.demand.gpu_milli == 250 and job.demand.gpus == 1
    assert job.running.gpu_ids == (a.gpu_ids[0] - 1,)
    (node,) = build.snapshot.nodes
    assert node.gpus == 2 and node.gpu_memory_mib == 16384
    assert all(len(t) == 1 for t in job.epoch_time_s.values())   # a share runs on one GPU


def _epochs(store, job_id, attempt, node_id, seconds, n=3, t0=1_000_000.0):
    from andreas.store import insert_epoch_events
    with store.session() as s:
        insert_epoch_events(s, [dict(job_id=job_id, attempt=attempt, epoch=e,
                                     start_s=t0 + e * seconds, end_s=t0 + (e + 1) * seconds,
                                     node_id=node_id, gpu_type="V100", gpus=1)
                                for e in range(1, n + 1)])


def test_a_share_measures_its_slowdown_from_its_own_epochs(mstore):
    node_id = add_node(mstore, "n1", gpus=1)
    add_job(mstore, "a", gpu_milli=500)
    add_job(mstore, "b", gpu_milli=500)
    m, ex, clock = make(mstore, policy="ojpp-heuristic")
    m.start()
    _epochs(mstore, "a", 1, node_id, 900.0)         # resnet50 on one V100 alone: 600 s
    with mstore.session() as s:
        build = build_snapshot(s, load_state(s), m.estimator, m.settings.manager, clock())
    jobs = {j.id: j for j in build.snapshot.jobs}
    assert jobs["a"].running.slowdown == pytest.approx(0.5)
    assert jobs["b"].running.slowdown == 0.0        # no epoch yet: not measured
    # a share's slowed epochs never pass for the application's own speed
    assert build.epochs[("resnet50", "V100")][0].source != "measured"


def test_ojpap_moves_a_share_off_a_gpu_whose_measured_slowdown_breaks_the_bound(mstore):
    node_id = add_node(mstore, "n1", gpus=2)
    add_job(mstore, "a", gpu_milli=500, epochs=50)
    add_job(mstore, "b", gpu_milli=500, epochs=50)
    m, ex, clock = make(mstore, policy="ojpap")
    m.start()
    first = {j: attempts(mstore, j)[-1] for j in ("a", "b")}
    assert first["a"].gpu_ids == first["b"].gpu_ids       # packed on one GPU
    for j in ("a", "b"):                                  # both measure theta = 1.0
        _epochs(mstore, j, 1, node_id, 1200.0)
    clock.advance(60)
    m.reschedule("period")
    for _ in range(4):
        clock.advance(40)
        m.tick()
        check_capacity(mstore, ex)
    moved = [j for j in ("a", "b") if len(attempts(mstore, j)) == 2]
    assert len(moved) == 1, {j: attempts(mstore, j) for j in ("a", "b")}
    (j,) = moved
    old, new = attempts(mstore, j)
    assert old.stop_decision_id is not None and new.gpu_ids != old.gpu_ids
    assert state_of(mstore, j) is JobState.RUNNING
    other = "b" if j == "a" else "a"
    assert attempts(mstore, other)[-1].gpu_ids == old.gpu_ids   # the other stays put
    stop = [x for x in _plan_of(mstore, old.stop_decision_id)["actions"] if x["job"] == j]
    assert stop[0]["kind"] == "move" and "interference" in stop[0]["reason"], stop


def _plan_of(store, decision_id):
    from andreas.store.models import Decision
    with store.session() as s:
        return s.get(Decision, decision_id).plan
