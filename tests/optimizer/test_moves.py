"""Moves that pay for themselves: what a stop, move or resize costs in the objectives,
one definition in costs.evaluate and the kernels, zero in the papers' mode, and the
fallback to the greedy plan on premise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.costs import c_ng_per_hour, evaluate, job_move_costs
from andreas.feasibility import check_plan
from andreas.model import (Assignment, CatalogEntry, Config, Energy, Job, Node, Params, Plan,
                           Snapshot)
from andreas.policies import POLICIES
from andreas.optimizer import decide
from andreas.optimizer.problem import compile_problem
from andreas.synthetic import random_snapshot

ENERGY = Energy(pue=1.0, price_per_kwh=1.0)
EPOCH = Params(progress="epoch", restart_overhead_s=10.0)
PAPER = Params(progress="exact", restart_overhead_s=0.0)


def two_nodes(params: Params, due_s: float = 1e6) -> Snapshot:
    """Job r runs on n1, 2.5 of 10 epochs of 100 s done: a stop loses 50 s + 10 s."""
    nodes = tuple(Node(name=f"n{i}", gpu_type="V100", gpus=1, power_w=(100.0, 300.0))
                  for i in (1, 2))
    r = Job(id="r", submit_s=0.0, due_s=due_s, weight=0.01, epochs=10, epochs_done=2.5,
            epoch_time_s={"V100": (100.0,)}, running=Config(node="n1", gpus=1))
    return Snapshot(now_s=1000.0, nodes=nodes, jobs=(r,), energy=ENERGY, params=params)


def plan(node: str | None) -> Plan:
    return Plan(policy="t", objective=0.0, objective_name="f_obj",
                assignments=(Assignment(job="r", node=node, gpus=1),) if node else (),
                postponed=() if node else ("r",))


def test_a_move_to_an_identical_node_pays_the_lost_work() -> None:
    snap = two_nodes(EPOCH)
    money = 60.0 * c_ng_per_hour(200.0, ENERGY) / 3600.0   # 60 s at its 200 W above idle
    assert job_move_costs(snap, snap.jobs[0]) == pytest.approx((money, money, money))
    assert evaluate(snap, plan("n1")).move_cost == 0.0
    assert evaluate(snap, plan("n2")).move_cost == pytest.approx(money)
    assert evaluate(snap, plan(None)).move_cost == pytest.approx(money)
    # the stay costs f_obj less than the same run one node over
    assert evaluate(snap, plan("n2")).f_obj - evaluate(snap, plan("n1")).f_obj == \
        pytest.approx(money)


def test_a_move_that_makes_a_job_late_pays_that_lateness_too() -> None:
    # 7.5 epochs left = 750 s: due exactly then, a restart (800 s + 10 s) is 60 s late
    snap = two_nodes(EPOCH, due_s=1000.0 + 750.0)
    money = 60.0 * c_ng_per_hour(200.0, ENERGY) / 3600.0
    same, change, stop = job_move_costs(snap, snap.jobs[0])
    assert same == pytest.approx(money + 0.01 * 60.0)
    assert change == stop == pytest.approx(money)


def test_moves_are_free_in_the_papers_mode() -> None:
    snap = two_nodes(PAPER)
    assert job_move_costs(snap, snap.jobs[0]) == (0.0, 0.0, 0.0)
    assert not compile_problem(snap).has_moves
    assert evaluate(snap, plan("n2")).move_cost == 0.0


def _with_partial_epochs(snap: Snapshot, rng: np.random.Generator) -> Snapshot:
    jobs = tuple(dataclasses.replace(j, epochs_done=j.epochs_done + float(rng.uniform(0, 0.9)))
                 if j.running is not None else j for j in snap.jobs)
    return dataclasses.replace(snap, jobs=jobs, params=EPOCH)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cloud=st.booleans(),
       policy=st.sampled_from(["greedy", "rg", "pr"]), margin=st.sampled_from([0.0, 2.0]))
def test_the_policies_objective_is_evaluate_with_move_costs(seed: int, cloud: bool,
                                                            policy: str, margin: float) -> None:
    rng = np.random.default_rng(seed)
    snap = _with_partial_epochs(random_snapshot(rng, int(rng.integers(2, 6)),
                                                int(rng.integers(2, 14)), cloud=cloud,
                                                running_share=0.6), rng)
    p = decide(snap, np.random.default_rng(seed), policy,
               **POLICIES[policy].accepted({"iterations": 30, "fallback": 0.0,
                                            "move_margin": margin}))
    check_plan(snap, p)
    ev = evaluate(snap, p, move_margin=margin if policy != "greedy" else 0.0)
    assert p.objective == pytest.approx(ev.f_mix, rel=1e-9, abs=1e-9)


def cloud_pair(params: Params = EPOCH) -> Snapshot:
    """Job r runs alone on VM v1 (type A, 1.00 an hour), 50.5 of 100 epochs of 100 s done;
    type B runs it as fast for 0.90 an hour. Staying: 4 950 s at 1.00 = 1.375; moving to B:
    5 010 s (the half epoch again and the 10 s overhead) at 0.90 = 1.2525, a saving of
    0.1225 for 60 s of lost work worth 60 s x 1.00 = 0.01667."""
    catalog = (CatalogEntry(name="A", gpu_type="M60", gpus=1, cost_per_hour=1.0),
               CatalogEntry(name="B", gpu_type="K80", gpus=1, cost_per_hour=0.9))
    r = Job(id="r", submit_s=0.0, due_s=1e6, weight=1.0, epochs=100, epochs_done=50.5,
            epoch_time_s={"M60": (100.0,), "K80": (100.0,)}, running=Config(node="v1", gpus=1))
    nodes = (Node(name="v1", config="A"), Node(name="v2"))
    return Snapshot(now_s=1000.0, nodes=nodes, jobs=(r,), energy=ENERGY,
                    params=params, catalog=catalog)


def test_the_margin_counts_the_lost_work_one_plus_margin_times() -> None:
    snap = two_nodes(EPOCH)
    money = 60.0 * c_ng_per_hour(200.0, ENERGY) / 3600.0
    assert job_move_costs(snap, snap.jobs[0], 2.0) == pytest.approx((3 * money,) * 3)
    cloud = cloud_pair()
    money = 60.0 * 1.0 / 3600.0     # in the cloud t_jng holds the first "one" of a change
    assert job_move_costs(cloud, cloud.jobs[0], 2.0) == pytest.approx(
        (3 * money, 2 * money, 3 * money))
    assert job_move_costs(cloud, cloud.jobs[0]) == pytest.approx((money, 0.0, money))


@pytest.mark.parametrize("policy", ["rg", "pr"])
def test_a_move_that_saves_less_than_its_margin_is_not_made(policy: str) -> None:
    snap = cloud_pair()
    options = {"iterations": 20}
    moved = decide(snap, np.random.default_rng(0), policy, **options)
    assert moved.node_configs[moved.assignments[0].node] == "B"    # saves 0.1225 > 0.0167
    # margin 10: the move must save 11 x 0.0167 = 0.183 > 0.1225: the job stays on v1
    kept = decide(snap, np.random.default_rng(0), policy, move_margin=10.0, **options)
    assert kept.assignments == (Assignment(job="r", node="v1", gpus=1),)
    assert kept.node_configs == {"v1": "A"}
    # margin 6: 7 x 0.0167 = 0.117 < 0.1225: the move still pays
    assert decide(snap, np.random.default_rng(0), policy, move_margin=6.0,
                  **options).node_configs != {"v1": "A"}


@pytest.mark.parametrize("policy", ["rg", "pr"])
def test_unset_is_the_settings_default_and_the_papers_mode_ignores_the_margin(
        policy: str) -> None:
    from andreas.optimizer.greedy import CLOUD_MOVE_MARGIN
    rng = np.random.default_rng(11)
    for cloud in (True, False):
        snap = _with_partial_epochs(random_snapshot(rng, 4, 10, cloud=cloud,
                                                    running_share=0.6), rng)
        paper = dataclasses.replace(snap, params=PAPER)
        default = CLOUD_MOVE_MARGIN if cloud else 0.0
        for s, margin in ((snap, default), (paper, 5.0)):
            a = decide(s, np.random.default_rng(1), policy, iterations=30)
            b = decide(s, np.random.default_rng(1), policy, iterations=30, move_margin=margin)
            assert (a.assignments, a.postponed, dict(a.node_configs), a.objective) == \
                (b.assignments, b.postponed, dict(b.node_configs), b.objective)


def test_on_premise_rg_and_pr_fall_back_to_the_greedy_plan() -> None:
    rng = np.random.default_rng(7)
    short = 0
    for _ in range(8):
        snap = _with_partial_epochs(random_snapshot(rng, 4, 8, running_share=0.6), rng)
        greedy = decide(snap, np.random.default_rng(0), "greedy")
        short += bool(greedy.postponed)
        for policy in ("rg", "pr"):
            p = decide(snap, np.random.default_rng(0), policy,
                       **POLICIES[policy].accepted({"iterations": 30}))
            assert set(p.assignments) == set(greedy.assignments), policy
            assert p.objective == pytest.approx(greedy.objective)
            assert p.stats["iterations"] == 1, policy     # only the greedy row is built
            # a finite fallback margin searches, and lands on the same plan
            searched = decide(snap, np.random.default_rng(0), policy,
                              **POLICIES[policy].accepted({"iterations": 30,
                                                           "fallback": 1e300}))
            assert searched.stats["iterations"] == 30
            assert set(searched.assignments) == set(p.assignments), policy
    assert short >= 2          # also while GPUs are short


def test_no_fallback_in_the_cloud_nor_in_the_papers_mode() -> None:
    from andreas.optimizer.greedy import fallback_margin
    rng = np.random.default_rng(3)
    onprem = random_snapshot(rng, 3, 6, running_share=0.6)
    cloud = random_snapshot(rng, 3, 6, running_share=0.6, cloud=True)
    assert fallback_margin(compile_problem(dataclasses.replace(onprem, params=EPOCH)),
                           None, False) == float("inf")
    assert fallback_margin(compile_problem(dataclasses.replace(onprem, params=PAPER)),
                           None, True) == 0.0
    assert fallback_margin(compile_problem(dataclasses.replace(cloud, params=EPOCH)),
                           None, True) == 0.0
