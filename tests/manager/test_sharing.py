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
