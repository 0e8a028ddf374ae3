"""The manager decides with the rolling-horizon policy on a cluster with running jobs."""

from __future__ import annotations

from sqlalchemy import select

from andreas.optimizer.horizon import CHOICES
from andreas.store import Decision, JobState
from tests.manager.helpers import add_job, add_node, check_capacity, make, state_of

NOW = 1_000_000.0


def test_a_horizon_decision_with_running_jobs(mstore):
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "t", gpus=1, gpu_type="T4")
    for i in range(3):
        add_job(mstore, f"j{i}", due_s=NOW + 4000 * (i + 1), epochs=20)
    m, ex, clock = make(mstore, policy="horizon")
    m.start()
    running = {f"j{i}" for i in range(3) if state_of(mstore, f"j{i}") is JobState.RUNNING}
    assert running                                  # the first decision started jobs
    clock.advance(600)
    add_job(mstore, "late", due_s=NOW + 600 + 3000, epochs=5, submit_s=NOW + 600)
    decision_id = m.reschedule("submit")
    m.tick()
    check_capacity(mstore, ex)
    with mstore.session() as s:
        d = s.scalars(select(Decision).where(Decision.id == decision_id)).one()
    assert d.policy == "horizon" and d.objective_name == "f_obj"
    stats = d.plan["stats"]
    assert stats["jobs"] == 4 and CHOICES[int(stats["chosen"])] in CHOICES
    assert stats["shortage"] == 1 or stats["value"] <= stats["greedy_value"] * (1 + 1e-12)
    placed = {a["job"] for a in d.plan["assignments"]} | set(d.plan["postponed"])
    assert placed == {"j0", "j1", "j2", "late"}
    kinds = {a["job"]: a["kind"] for a in d.plan["actions"]}
    assert all(kinds[j] in ("continue", "move", "resize", "preempt") for j in running)
