"""Heuristics against exhaustive search on tiny snapshots (<= 3 nodes, <= 5 jobs).

A bound for *any* plan needs the unrestricted enumeration (``work_conserving=False``):
rg's and pr's batches hold the baselines' one-job-per-node plans, which may leave a job
waiting next to free GPUs and so undercut the work-conserving optimum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.costs import evaluate
from andreas.feasibility import check_plan
from andreas.model import Assignment, Plan
from andreas.optimizer import decide
from andreas.policies import POLICIES
from andreas.optimizer.exact import enumerate_optimum, postponed_that_fit
from andreas.synthetic import random_snapshot

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop


def tiny(seed: int):
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 4))
    scenario = int(rng.integers(1, 3)) if nodes <= 2 else 1
    return random_snapshot(rng, nodes, int(rng.integers(1, 6)), scenario=scenario,
                           now_s=float(rng.uniform(0, 100_000)))


def _at_least(value: float, bound: float) -> bool:
    return value >= bound - 1e-9 * max(1.0, abs(bound))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_heuristics_are_feasible_and_bounded_by_the_optimum(seed: int) -> None:
    snap = tiny(seed)
    exact = enumerate_optimum(snap, work_conserving=False)
    conserving = enumerate_optimum(snap)
    assert _at_least(conserving.min_f_obj, exact.min_f_obj)
    for policy in ("greedy", "rg", "pr"):
        plan = decide(snap, np.random.default_rng(seed % 1000), policy,
                      **POLICIES[policy].accepted({"iterations": 200}))
        check_plan(snap, plan)
        ev = evaluate(snap, plan)
        assert _at_least(ev.f_obj, exact.min_f_obj)
        assert _at_least(exact.max_f_bar, ev.f_bar)
        if not postponed_that_fit(snap, plan):
            assert _at_least(ev.f_obj, conserving.min_f_obj), policy
    # the greedy construction postpones a job only when nothing has room for it
    greedy = decide(snap, np.random.default_rng(0), "greedy")
    assert postponed_that_fit(snap, greedy) == ()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
@pytest.mark.parametrize("work_conserving", [True, False])
def test_enumerator_optima_are_attained_by_the_plans_it_reports(seed: int,
                                                                work_conserving: bool) -> None:
    snap = tiny(seed)
    exact = enumerate_optimum(snap, work_conserving=work_conserving)
    assert exact.plans >= 1
    for chosen, field, value in ((exact.argmin_f_obj, "f_obj", exact.min_f_obj),
                                 (exact.argmax_f_bar, "f_bar", exact.max_f_bar)):
        plan = Plan(policy="exact", objective=value, objective_name=field,
                    assignments=tuple(Assignment(job=j.id, node=snap.nodes[n].name, gpus=g)
                                      for j, (n, g) in zip(snap.jobs, chosen) if n >= 0),
                    postponed=tuple(j.id for j, (n, _) in zip(snap.jobs, chosen) if n < 0))
        check_plan(snap, plan)
        got = getattr(evaluate(snap, plan), field)
        assert abs(got - value) <= 1e-9 * max(1.0, abs(value))
        if work_conserving:
            assert postponed_that_fit(snap, plan) == ()


def test_work_conservation_prunes_plans_and_only_raises_the_optimum() -> None:
    """Over fixed seeds the restriction drops plans on every snapshot with more jobs than
    room, and changes the optimum of f_obj on some (else the option would test nothing)."""
    changed = 0
    for seed in range(30):
        snap = tiny(seed)
        free = enumerate_optimum(snap, work_conserving=False)
        wc = enumerate_optimum(snap)
        assert 1 <= wc.plans <= free.plans
        assert _at_least(wc.min_f_obj, free.min_f_obj)
        assert _at_least(free.max_f_bar, wc.max_f_bar)
        changed += wc.min_f_obj > free.min_f_obj + 1e-9 * max(1.0, abs(free.min_f_obj))
    assert changed >= 3


@pytest.mark.parametrize("alpha", [None, 1.0])
def test_share_of_tiny_snapshots_where_heuristics_reach_the_optimum(alpha) -> None:
    """Against the work-conserving optimum of f_obj (the plans the heuristics build): with
    a wide candidate list (alpha = 1) rg reaches it on most tiny snapshots (95 % measured),
    pr less often (it trades f_obj for fewer restarts within its slack); the default
    (0.05, chosen for long-run cost in the simulator) reaches fewer (49 %), never fewer
    than the plain greedy (32 %). pr is always within its slack of the optimum it saw."""
    from andreas.optimizer.relinking import DEFAULT_SLACK
    opts = {} if alpha is None else {"alpha": alpha}
    seeds = range(100)
    hit = {"rg f_obj": 0, "pr f_obj": 0, "greedy f_obj": 0}
    for seed in seeds:
        snap = tiny(seed)
        exact = enumerate_optimum(snap)
        same = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))  # noqa: E731
        g = decide(snap, np.random.default_rng(0), "greedy")
        rg = decide(snap, np.random.default_rng(0), "rg", **opts)
        pr = decide(snap, np.random.default_rng(0), "pr", **opts)
        assert _at_least(rg.objective, exact.min_f_obj)
        assert _at_least(pr.objective, exact.min_f_obj)
        assert pr.objective <= pr.stats["best_objective"] * (1 + DEFAULT_SLACK) + 1e-9
        hit["greedy f_obj"] += same(g.objective, exact.min_f_obj)
        hit["rg f_obj"] += same(rg.objective, exact.min_f_obj)
        hit["pr f_obj"] += same(pr.objective, exact.min_f_obj)
    shares = {k: v / len(seeds) for k, v in hit.items()}
    print(f"alpha={alpha or 'default'}: optimum reached on tiny snapshots:", shares)
    assert shares["rg f_obj"] >= shares["greedy f_obj"]
    if alpha == 1.0:
        assert shares["rg f_obj"] > 0.8 and shares["pr f_obj"] > 0.5


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_cloud_f_mix_optimum_bounds_the_policies(seed: int) -> None:
    """In the cloud greedy, rg and pr minimise f_mix (``costs.evaluate``): each reports its
    plan's f_mix and none undercuts the enumerated optimum (that the optimum's plan
    re-evaluates to it: tests/optimizer/test_milp.py); on premise the enumerator's f_mix is its
    f_obj."""
    rng = np.random.default_rng(seed)
    snap = random_snapshot(rng, int(rng.integers(1, 3)), int(rng.integers(1, 5)), cloud=True,
                           scenario=int(rng.integers(1, 3)), now_s=float(rng.uniform(0, 1e5)),
                           running_share=float(rng.choice([0.0, 0.6])))
    exact = enumerate_optimum(snap, work_conserving=False)
    for policy in ("greedy", "rg", "pr"):
        plan = decide(snap, np.random.default_rng(seed % 1000), policy,
                      **POLICIES[policy].accepted({"iterations": 100}))
        check_plan(snap, plan)
        ev = evaluate(snap, plan)
        assert plan.objective_name == "f_mix"
        assert abs(plan.objective - ev.f_mix) <= 1e-9 * max(1.0, abs(ev.f_mix)), policy
        assert _at_least(ev.f_mix, exact.min_f_mix), policy
    premise = enumerate_optimum(tiny(seed))
    assert premise.min_f_mix == premise.min_f_obj
