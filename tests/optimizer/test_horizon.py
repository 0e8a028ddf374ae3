"""The rolling-horizon policy: its model's plans respect capacity and give each job one
column, its decisions are feasible and never valued above greedy's plan, an urgent job is
not delayed, the solver gets what is left of the time limit, and a model too big falls
back to the constructions; under shortage on premise the greedy plan stands."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.feasibility import check_plan
from andreas.model import Energy, Job, Node, Params, Snapshot
from andreas.optimizer import decide
from andreas.optimizer import horizon as hz
from andreas.optimizer.problem import compile_problem
from andreas.synthetic import random_snapshot

EPOCH = Params(progress="epoch", restart_overhead_s=10.0)


def snapshot(seed: int, nodes: int, jobs: int, cloud: bool = False) -> Snapshot:
    from dataclasses import replace
    snap = random_snapshot(np.random.default_rng(seed), nodes, jobs, running_share=0.4,
                           scenario=1 + seed % 2, cloud=cloud)
    return replace(snap, params=EPOCH)


def occupancy_per_row(cols: hz.Columns, choice: np.ndarray) -> np.ndarray:
    oc, orow, ov = hz.occupancy(cols)
    picked = np.zeros(len(cols), dtype=bool)
    picked[choice[choice >= 0]] = True
    return np.bincount(orow[picked[oc]], weights=ov[picked[oc]],
                       minlength=cols.n_slots * len(cols.capacity))


@pytest.mark.parametrize("cloud", [False, True])
def test_the_model_gives_each_job_one_column_within_capacity(cloud: bool) -> None:
    p = compile_problem(snapshot(3, 4, 14, cloud=cloud))
    cols = hz.build_columns(p)
    choice, figures = hz.solve(cols, p.n_jobs, None, time_limit_s=2.0)
    assert choice is not None
    jobs = np.unique(cols.job)
    assert (choice[jobs] >= 0).all()                       # every modelled job: one column
    assert (cols.job[choice[jobs]] == jobs).all()          # ... of its own
    used = occupancy_per_row(cols, choice)
    assert (used <= np.tile(cols.capacity, cols.n_slots) * (1 + 1e-6)).all()
    assert figures["value"] == pytest.approx(hz.value_of(cols, choice)[0])
    # slot 0 counts what starts now: at most the resource's count
    now = choice[(choice >= 0)]
    now = now[cols.slot[now] == 0]
    per_res = np.bincount(cols.res[now], weights=cols.use[now], minlength=len(cols.capacity))
    assert (per_res <= cols.capacity + 1e-6).all()


def test_the_continuation_respects_capacity_too() -> None:
    p = compile_problem(snapshot(5, 3, 16))
    cols = hz.build_columns(p)
    choice, value = hz.Continuation(cols, p.queue).complete({})
    assert (choice[np.unique(cols.job)] >= 0).all()
    assert (occupancy_per_row(cols, choice)
            <= np.tile(cols.capacity, cols.n_slots) * (1 + 1e-6)).all()
    assert value == pytest.approx(hz.value_of(cols, choice)[0])


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), cloud=st.booleans())
def test_a_decision_is_feasible_and_never_valued_above_greedy(seed: int, cloud: bool) -> None:
    snap = snapshot(seed, 3, 12, cloud=cloud)
    plan = decide(snap, np.random.default_rng(seed), "horizon", time_limit_s=1.0,
                  plan_shortage=True)
    check_plan(snap, plan)
    assert plan.policy == "horizon"
    assert plan.stats["value"] <= plan.stats["greedy_value"] * (1 + 1e-12)
    assert hz.CHOICES[int(plan.stats["chosen"])] in hz.CHOICES


def test_a_job_near_its_due_date_starts_now() -> None:
    # one 1-GPU node; "urgent" has just its run time before its due date, "relaxed" a
    # day of slack and a higher weight: the plan must not make "urgent" wait
    node = Node(name="n", gpu_type="V100", gpus=1, power_w=(100.0, 300.0))
    jobs = (Job(id="relaxed", submit_s=0.0, due_s=1000.0 + 86_400, weight=0.05, epochs=10,
                epoch_time_s={"V100": (360.0,)}),
            Job(id="urgent", submit_s=0.0, due_s=1000.0 + 3700.0, weight=0.01, epochs=10,
                epoch_time_s={"V100": (360.0,)}))
    snap = Snapshot(now_s=1000.0, nodes=(node,), jobs=jobs, params=EPOCH,
                    energy=Energy(pue=1.0, price_per_kwh=1.0))
    plan = decide(snap, np.random.default_rng(0), "horizon", plan_shortage=True)
    check_plan(snap, plan)
    assert plan.stats["shortage"] == 1 and plan.stats["solved"] >= 0   # the model decided
    assert [a.job for a in plan.assignments] == ["urgent"]
    assert plan.postponed == ("relaxed",)


def test_the_solver_gets_what_is_left_of_the_time_limit(monkeypatch) -> None:
    seen: list[float] = []
    real = hz.solve

    def spy(*args, time_limit_s: float, **kw):
        seen.append(time_limit_s)
        return real(*args, time_limit_s=time_limit_s, **kw)

    monkeypatch.setattr(hz, "solve", spy)
    snap = snapshot(11, 6, 40)
    plan = decide(snap, np.random.default_rng(1), "horizon", time_limit_s=0.5,
                  plan_shortage=True)
    check_plan(snap, plan)
    assert len(seen) == 1 and 0 < seen[0] <= 0.5
    assert plan.stats["value"] <= plan.stats["greedy_value"] * (1 + 1e-12)


def test_a_model_too_big_falls_back_to_the_constructions(monkeypatch) -> None:
    def never(*args, **kw):
        raise AssertionError("the solver ran on a model above max_columns")

    monkeypatch.setattr(hz, "solve", never)
    snap = snapshot(2, 4, 20)
    plan = decide(snap, np.random.default_rng(2), "horizon", max_columns=10,
                  plan_shortage=True)
    check_plan(snap, plan)
    assert plan.stats["solved"] == -1 and plan.stats["columns"] > 10
    assert hz.CHOICES[int(plan.stats["chosen"])] in ("greedy", "rg", "keep")
    assert plan.stats["value"] <= plan.stats["greedy_value"]


def test_under_shortage_on_premise_the_greedy_plan_stands(monkeypatch) -> None:
    def never(*args, **kw):
        raise AssertionError("the model was solved under shortage")

    monkeypatch.setattr(hz, "solve", never)
    snap = snapshot(4, 2, 30)                  # 30 jobs on 2 nodes: some must wait
    plan = decide(snap, np.random.default_rng(4), "horizon")
    check_plan(snap, plan)
    assert plan.stats["shortage"] == 1 and plan.postponed
    assert hz.CHOICES[int(plan.stats["chosen"])] == "greedy"
