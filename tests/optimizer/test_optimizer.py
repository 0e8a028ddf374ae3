"""Every policy is feasible, reproducible and agrees with the reference cost model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from andreas.costs import evaluate
from andreas.feasibility import check_plan
from andreas.model import ActionKind, Config, Job, Node, Snapshot
from andreas.errors import InputError
from andreas.optimizer import decide
from andreas.policies import POLICIES
from andreas.synthetic import node_power_w, random_snapshot
from tests import strategies

ALL = sorted(POLICIES)
HEURISTICS = ["greedy", "rg", "pr"]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


snapshots = strategies.snapshots(max_nodes=8, max_jobs=30)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots, seed=st.integers(0, 1000))
def test_every_policy_returns_a_feasible_plan(snapshot: Snapshot, seed: int) -> None:
    for name in ALL:
        if snapshot.cloud and not POLICIES[name].cloud:
            with pytest.raises(InputError, match="on-premise"):
                decide(snapshot, np.random.default_rng(seed), name)
            continue
        plan = decide(snapshot, np.random.default_rng(seed), name,
                      **POLICIES[name].accepted({"iterations": 50}))
        check_plan(snapshot, plan)
        assert _close(plan.objective, _reference(snapshot, plan)), (name, plan.objective)


def _reference(snapshot: Snapshot, plan) -> float:
    """The plan's objective recomputed from its assignments alone."""
    if plan.objective_name in ("f_obj", "f_bar", "f_mix"):
        return getattr(evaluate(snapshot, plan), plan.objective_name)
    gpus = {n.name: n.gpus for n in snapshot.nodes}
    if plan.objective_name == "devices":          # GPUs holding at least one task
        return float(len({(a.node, g) for a in plan.assignments for g in a.gpu_ids}))
    assert plan.objective_name == "gpu_allocation", plan.objective_name
    milli = {j.id: (j.demand.gpu_milli if j.demand else 1000) for j in snapshot.jobs}
    held = sum(a.gpus * milli[a.job] for a in plan.assignments)
    return held / (1000 * sum(gpus.values()))


@settings(max_examples=25, deadline=None)
@given(snapshot=snapshots, seed=st.integers(0, 1000))
def test_rg_never_worse_than_greedy_and_pr_within_its_slack_of_rg(
        snapshot: Snapshot, seed: int) -> None:
    from andreas.optimizer.relinking import DEFAULT_SLACK
    greedy = decide(snapshot, np.random.default_rng(seed), "greedy")
    rg = decide(snapshot, np.random.default_rng(seed), "rg", iterations=100)
    assert rg.objective <= greedy.objective * (1 + 1e-12) + 1e-9
    pr = decide(snapshot, np.random.default_rng(seed), "pr", iterations=100)
    # same seed, same constructions: pr's lowest f_obj is rg's, its choice within the slack
    assert _close(pr.stats["best_objective"], rg.objective)
    assert pr.objective <= rg.objective * (1 + DEFAULT_SLACK) + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("policy", ALL)
def test_seeded_runs_are_reproducible_bit_for_bit(policy: str) -> None:
    snapshot = random_snapshot(np.random.default_rng(7), 20, 60, scenario=2)
    # a solver stopped by its clock returns what it had: under load that differs, so the
    # hierarchical controllers get time to finish (milp's default is already 60 s)
    options = {"time_limit_s": 60.0} if policy == "hierarchical" else {}
    if policy == "horizon":     # a node limit the clock does not reach
        options = {"time_limit_s": 60.0, "max_nodes": 20}
    a = decide(snapshot, np.random.default_rng(42), policy,
               **POLICIES[policy].accepted({"iterations": 200, **options}))
    b = decide(snapshot, np.random.default_rng(42), policy,
               **POLICIES[policy].accepted({"iterations": 200, **options}))
    untimed = lambda p: dataclasses.replace(p, stats={  # noqa: E731  (milp reports seconds)
        k: v for k, v in p.stats.items() if k not in ("build_s", "solver_s", "wall_s")})
    assert untimed(a) == untimed(b)
    assert a.objective.hex() == b.objective.hex()


def test_different_seeds_explore_different_solutions() -> None:
    from andreas.optimizer.construction import construct
    from andreas.optimizer.problem import compile_problem

    problem = compile_problem(random_snapshot(np.random.default_rng(3), 20, 80, scenario=2))
    batches = [construct(problem, 40, np.random.default_rng(s)) for s in range(3)]
    randomized = [b.cfg[len(b.names):] for b in batches]   # after one row per strategy
    assert all(len({row.tobytes() for row in r}) > 1 for r in randomized)
    assert randomized[0].tobytes() != randomized[1].tobytes()
    deterministic = [b.cfg[:len(b.names)] for b in batches]
    assert deterministic[0].tobytes() == deterministic[1].tobytes()


def test_greedy_picks_the_cheapest_configuration_that_meets_the_due_date() -> None:
    # One V100x2 node: 1 GPU finishes in 1000 s, 2 GPUs in 600 s; both meet the due date.
    node = Node(name="n1", gpu_type="V100", gpus=2, power_w=(280.0, 490.0, 700.0))
    job = Job(id="a", submit_s=0, due_s=5000, weight=0.01, epochs=10,
              epoch_time_s={"V100": (100.0, 60.0)})
    snap = Snapshot(now_s=0.0, nodes=(node,), jobs=(job,))
    plan = decide(snap, np.random.default_rng(0), "greedy")
    # energy 1 GPU: 1000 s * 490 W = 490 kJ; 2 GPUs: 600 s * 700 W = 420 kJ -> 2 GPUs
    assert plan.config_of("a") == Config(node="n1", gpus=2)
    late = Job(id="a", submit_s=0, due_s=500, weight=0.01, epochs=10,
               epoch_time_s={"V100": (100.0, 80.0)})
    # 2 GPUs: 800 s * 700 W = 560 kJ > 1 GPU: 1000 s * 490 W = 490 kJ, but neither meets
    # the due date, so the fastest wins.
    plan = decide(Snapshot(now_s=0.0, nodes=(node,), jobs=(late,)),
                  np.random.default_rng(0), "greedy")
    assert plan.config_of("a") == Config(node="n1", gpus=2)
    relaxed = Job(id="a", submit_s=0, due_s=5000, weight=0.01, epochs=10,
                  epoch_time_s={"V100": (100.0, 80.0)})
    plan = decide(Snapshot(now_s=0.0, nodes=(node,), jobs=(relaxed,)),
                  np.random.default_rng(0), "greedy")
    assert plan.config_of("a") == Config(node="n1", gpus=1)


def test_greedy_best_fit_fills_an_open_node_before_opening_another() -> None:
    nodes = tuple(Node(name=f"n{i}", gpu_type="V100", gpus=2,
                       power_w=node_power_w("V100", 2)) for i in range(2))
    jobs = tuple(Job(id=f"j{i}", submit_s=0, due_s=10_000, weight=0.01, epochs=10,
                     epoch_time_s={"V100": (100.0, 90.0)}) for i in range(2))
    plan = decide(Snapshot(now_s=0.0, nodes=nodes, jobs=jobs), np.random.default_rng(0),
                  "greedy")
    assert {a.node for a in plan.assignments} == {"n0"}
    assert all(a.gpus == 1 for a in plan.assignments)


def test_running_job_stays_on_its_node_when_an_identical_node_would_do() -> None:
    nodes = tuple(Node(name=f"n{i}", gpu_type="T4", gpus=1, power_w=(160.0, 220.0))
                  for i in range(3))
    job = Job(id="r", submit_s=0, due_s=10_000, weight=0.01, epochs=10, epochs_done=2,
              epoch_time_s={"T4": (100.0,)}, running=Config(node="n2", gpus=1))
    for policy in HEURISTICS:
        plan = decide(Snapshot(now_s=0.0, nodes=nodes, jobs=(job,)),
                      np.random.default_rng(0), policy,
                      **POLICIES[policy].accepted({"iterations": 20}))
        assert plan.config_of("r") == Config(node="n2", gpus=1)
        assert [a.kind for a in plan.actions(Snapshot(now_s=0.0, nodes=nodes, jobs=(job,)))] \
            == [ActionKind.CONTINUE]


def test_overloaded_cluster_postpones_and_actions_are_explicit() -> None:
    snap = random_snapshot(np.random.default_rng(11), 4, 30, scenario=1)
    plan = decide(snap, np.random.default_rng(0), "rg", iterations=50)
    actions = {a.job: a.kind for a in plan.actions(snap)}
    assert set(actions) == {j.id for j in snap.jobs}
    assert plan.postponed
    for job in snap.jobs:
        if job.running and job.id in plan.postponed:
            assert actions[job.id] is ActionKind.PREEMPT
        if not job.running and job.id in plan.postponed:
            assert actions[job.id] is ActionKind.WAIT


def test_cloud_plan_configures_every_used_node() -> None:
    snap = random_snapshot(np.random.default_rng(5), 6, 12, cloud=True)
    for policy in HEURISTICS:
        plan = decide(snap, np.random.default_rng(0), policy,
                      **POLICIES[policy].accepted({"iterations": 50}))
        used = {a.node for a in plan.assignments}
        assert used and set(plan.node_configs) == used
        check_plan(snap, plan)


def test_cloud_job_on_a_node_whose_vm_type_changes_is_moved_not_continued() -> None:
    from andreas.model import Assignment, CatalogEntry, Plan
    catalog = (CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=0.56),
               CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=1.13))
    job = Job(id="j", submit_s=0, due_s=10_000, weight=0.01, epochs=10,
              epoch_time_s={"K80": (100.0, 60.0)}, running=Config(node="n1", gpus=1))
    snap = Snapshot(now_s=0.0, nodes=(Node(name="n1", config="NC12"),), jobs=(job,),
                    catalog=catalog)
    plan = lambda vm: Plan(policy="x", assignments=(Assignment(job="j", node="n1", gpus=1),),  # noqa: E731
                           postponed=(), objective=0.0, objective_name="f_obj",
                           node_configs={"n1": vm})
    assert plan("NC6").actions(snap)[0].kind is ActionKind.MOVE
    assert plan("NC12").actions(snap)[0].kind is ActionKind.CONTINUE


def test_queue_order_puts_late_jobs_first_by_weight_over_time() -> None:
    from andreas.optimizer.problem import queue_order
    # A can still be on time (pressure < 0); B and C are late. The papers' order serves the
    # most late first (B, C, A); wspt-late serves C first: 0.01/100 s > 0.01/1000 s.
    pressure = np.array([-100.0, 500.0, 50.0])
    weight = np.array([0.02, 0.01, 0.01])
    t_min = np.array([300.0, 1000.0, 100.0])
    assert queue_order(pressure, weight, t_min, "pressure").tolist() == [1, 2, 0]
    assert queue_order(pressure, weight, t_min, "wspt-late").tolist() == [2, 1, 0]
    on_time = np.array([-5.0, -50.0, -1.0])   # nobody late: both orders agree
    assert queue_order(on_time, weight, t_min, "wspt-late").tolist() == \
        queue_order(on_time, weight, t_min, "pressure").tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="order"):
        queue_order(pressure, weight, t_min, "random")
