"""A plan's revisit time: when a running job could switch to a configuration it pays less
on and still end on time, the simulator and the manager decide again."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.costs import switch_share
from andreas.manager.plandoc import Target
from andreas.model import CatalogEntry, Energy, Job, Node, Params, Plan, Snapshot, Trace
from andreas.optimizer import decide
from andreas.optimizer.problem import compile_problem
from andreas.optimizer.solution import REVISIT_MARGIN_S, revisit_s
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
from tests.simulator.test_simulator import random_trace

CATALOG = (CatalogEntry(name="one", gpu_type="K80", gpus=1, cost_per_hour=0.60),
           CatalogEntry(name="two", gpu_type="K80", gpus=2, cost_per_hour=1.00))
EXACT = Params(progress="exact")


def job(due_s: float) -> Job:
    # 10 epochs: 360 s each on 1 GPU (3600 s in all), 240 s each on 2 GPUs (2400 s)
    return Job(id="a", submit_s=100.0, due_s=due_s, weight=0.01, epochs=10,
               epoch_time_s={"K80": (360.0, 240.0)})


def cloud_snapshot(due_s: float) -> Snapshot:
    return Snapshot(now_s=100.0, nodes=(Node(name="vm1"),), jobs=(job(due_s),),
                    catalog=CATALOG, params=EXACT)


def test_a_job_that_must_run_fast_now_is_revisited_when_the_slow_configuration_is_on_time() -> None:
    # 3000 s to its due date: 1 GPU (3600 s) is late, 2 GPUs (2400 s) on time. After tau
    # on 2 GPUs, 1 GPU needs 3600 (1 - tau / 2400) <= 3000 - tau: tau = 600 / 0.5 = 1200.
    plan = decide(cloud_snapshot(3100.0), np.random.default_rng(0), "greedy")
    assert plan.assignments[0].gpus == 2
    assert plan.revisit_s == pytest.approx(100.0 + 1200.0 + REVISIT_MARGIN_S)
    # then the slow configuration is on time, a second before it was not
    for t, on_time in ((plan.revisit_s, True), (plan.revisit_s - 2.0, False)):
        ran = (t - 100.0) / 240.0
        later = Snapshot(now_s=t, nodes=(Node(name="vm1", config="two"),),
                         jobs=(replace(job(3100.0), epochs_done=ran),), catalog=CATALOG,
                         params=EXACT)
        p = compile_problem(later)
        one = [c for c in range(len(p.cfg_g)) if p.cfg_g[c] == 1]
        assert bool(p.in_dstar[0, one].any()) is on_time


def test_with_epoch_checkpoints_the_revisit_waits_for_the_epoch_end() -> None:
    # 2900 s to its due date: tau = (3600 - 2900) / 0.5 = 1400 s on 2 GPUs, in its 6th
    # epoch (240 s each); with epoch checkpoints the plan looks again when that epoch
    # ends, 1440 s from now, so a switch then throws no partial epoch away
    exact = decide(cloud_snapshot(3000.0), np.random.default_rng(0), "greedy")
    assert exact.revisit_s == pytest.approx(100.0 + 1400.0 + REVISIT_MARGIN_S)
    epoch = decide(replace(cloud_snapshot(3000.0), params=Params(progress="epoch")),
                   np.random.default_rng(0), "greedy")
    assert epoch.revisit_s == pytest.approx(100.0 + 1440.0 + REVISIT_MARGIN_S)


@pytest.mark.parametrize("due_s", [100.0 + 10_000, 2100.0])
def test_no_revisit_when_nothing_cheaper_can_become_on_time(due_s: float) -> None:
    # ample slack: it runs on its cheapest configuration already; too little: it is late
    # on every configuration, and running on does not make a slower one on time
    plan = decide(cloud_snapshot(due_s), np.random.default_rng(0), "greedy")
    assert plan.assignments and plan.revisit_s is None


def test_the_papers_dp_baselines_keep_their_own_decision_points() -> None:
    plan = decide(cloud_snapshot(3100.0), np.random.default_rng(0), "dp-wct")
    assert plan.assignments and plan.revisit_s is None


def test_the_simulator_switches_at_the_revisit_and_bills_the_mix() -> None:
    trace = Trace(nodes=(Node(name="vm1"),), jobs=(job(3100.0),), catalog=CATALOG, name="mix")
    on = simulate(trace, "greedy", SimOptions(period_s=0, progress="exact"))
    off = simulate(trace, "greedy", SimOptions(period_s=0, progress="exact", revisit=False))
    # events only: 2 GPUs ("two", 1.00 $/h) for the whole 2400 s
    assert off.revisits == 0 and off.total_cost == pytest.approx(1.00 * 2400 / 3600)
    # revisit: 1201 s on "two", then the rest (1 - 1201/2400 of 3600 s) on "one" (0.60 $/h)
    slow_s = (1 - 1201.0 / 2400.0) * 3600.0
    assert on.revisits == 1 and on.tardiness_cost == 0.0
    assert on.total_cost == pytest.approx(1.00 * 1201 / 3600 + 0.60 * slow_s / 3600)
    assert on.total_cost < off.total_cost
    assert [(a.gpus, a.end_s - a.start_s) for a in on.attempts] == [
        (2, pytest.approx(1201.0)), (1, pytest.approx(slow_s))]


def test_on_premise_plans_carry_no_revisit() -> None:
    # one GPU busy draws 200 W for 3600 s (0.72 MJ), two draw 350 W for 2400 s (0.84 MJ):
    # pi says one GPU is cheaper, but the node's static draw is shared and a stop redoes
    # the partial epoch, so on premise the plan leaves it to the events and the period
    node = Node(name="n1", gpu_type="K80", gpus=2, power_w=(50.0, 200.0, 350.0))
    snap = Snapshot(now_s=100.0, nodes=(node,), jobs=(job(3100.0),), params=EXACT,
                    energy=Energy(pue=1.0, price_per_kwh=0.2))
    plan = decide(snap, np.random.default_rng(0), "rg")
    assert plan.assignments[0].gpus == 2 and plan.revisit_s is None
    problem = compile_problem(snap)
    on_two = np.array([int(np.flatnonzero(problem.cfg_g == 2)[0])])
    # the rule itself would say when (what the cloud does with its own prices)
    assert revisit_s(problem, np.array([0]), on_two) == pytest.approx(
        100.0 + 1200.0 + REVISIT_MARGIN_S)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["greedy", "rg", "pr"]),
       cloud=st.booleans())
def test_a_revisit_lies_between_now_and_the_end_of_the_longest_placed_job(
        seed: int, policy: str, cloud: bool) -> None:
    trace = random_trace(seed, 3, 10, cloud=cloud)
    snap = Snapshot(now_s=0.0, nodes=trace.nodes,
                    jobs=tuple(replace(j, submit_s=0.0) for j in trace.jobs),
                    energy=trace.energy, params=trace.params, catalog=trace.catalog)
    plan = decide(snap, np.random.default_rng(seed), policy)
    if plan.revisit_s is None:
        return
    p = compile_problem(snap)
    index = {j.id: i for i, j in enumerate(snap.jobs)}
    longest = max(float(p.max_t[index[a.job]]) for a in plan.assignments)   # M_j
    assert 0.0 < plan.revisit_s <= longest + REVISIT_MARGIN_S
    assert math.isfinite(plan.revisit_s)


def test_the_stored_plan_document_carries_the_revisit_time() -> None:
    base = Plan(policy="rg", assignments=(), postponed=(), objective=0.0, objective_name="f_obj")
    assert Target.from_doc(1, {"revisit_s": 1234.5}).revisit_s == 1234.5
    for bad in ("soon", float("nan"), True, None):
        assert Target.from_doc(1, {"revisit_s": bad}).revisit_s is None
    assert base.revisit_s is None


# Two GPU types priced per GPU as the path-relinking paper's catalog (K80 0.56, M60 0.62 $/h)
TWO_TYPES = (CatalogEntry(name="NC24", gpu_type="K80", gpus=4, cost_per_hour=2.24),
             CatalogEntry(name="NV24", gpu_type="M60", gpus=4, cost_per_hour=2.48),
             CatalogEntry(name="NC48", gpu_type="K80", gpus=8, cost_per_hour=4.48),
             CatalogEntry(name="NV48", gpu_type="M60", gpus=8, cost_per_hour=4.96))
# a job of the published-code benchmark (N = 20, seed 1, j00190): 191 epochs, seconds each
BIG = Job(id="big", submit_s=0.0, due_s=212_865.328, weight=0.011095, epochs=191,
          epoch_time_s={"K80": (2880.0, 1654.125, 1245.5, 1041.188),
                        "M60": (2610.0, 1499.051, 1128.735, 943.576)})


def test_the_cloud_ranks_an_on_time_configuration_by_the_mix_it_starts() -> None:
    # On time now: M60 x4 (180 223 s, 124.15 $) and K80 x4 (198 867 s, 123.74 $); late:
    # M60 x3 (215 588 s, 111.39 $), K80 x3 (237 890 s, 111.02 $). K80 x4 has the lower pi but
    # lies above the hull: M60 x4 then M60 x3 ends on time for 112.37 $, K80 x4 then M60 x3
    # for 113.40 $.
    snap = Snapshot(now_s=0.0, nodes=(Node(name="vm1"),), jobs=(BIG,), catalog=TWO_TYPES,
                    params=EXACT)
    p = compile_problem(snap)

    def cfg(name: str, g: int) -> int:
        k = p.class_name.index(name)
        return int(p.cfg_index[k, g])

    m60x4, k80x4, m60x3 = cfg("NV48", 4), cfg("NC48", 4), cfg("NV48", 3)
    assert p.pi[0, k80x4] < p.pi[0, m60x4]
    assert p.rank[0, m60x4] == pytest.approx(112.37, abs=0.01)
    assert p.rank[0, k80x4] == pytest.approx(113.40, abs=0.01)
    assert not p.in_dstar[0, m60x3] and p.rank[0, m60x3] == p.pi[0, m60x3]
    plan = decide(snap, np.random.default_rng(0), "greedy")
    (a,) = plan.assignments
    assert a.gpus == 4 and plan.node_configs[a.node] == "NV24"
    # it runs there until M60 x3 is on time: (215 588 - 212 865) / (215 588 / 180 223 - 1)
    assert plan.revisit_s == pytest.approx(13_877.0 + REVISIT_MARGIN_S, abs=2.0)


@given(t_cur=st.floats(10.0, 1e5), slower=st.floats(1.01, 5.0), where=st.floats(0.01, 0.99))
def test_the_switch_share_is_both_the_mix_and_the_revisit_moment(
        t_cur: float, slower: float, where: float) -> None:
    # on time on the current configuration, late on the slower one: the share of the work
    # done fast ends the two-step mix on the due date, and after share * t_cur seconds
    # the slower one needs exactly the time left (the revisit moment)
    t_slow = t_cur * slower
    left = t_cur + where * (t_slow - t_cur)
    share = float(switch_share(np.float64(t_cur), np.float64(t_slow), np.float64(left)))
    assert 0.0 < share < 1.0
    assert share * t_cur + (1.0 - share) * t_slow == pytest.approx(left, rel=1e-9)
    tau = share * t_cur
    assert t_slow * (1.0 - tau / t_cur) == pytest.approx(left - tau, rel=1e-9)


def test_on_premise_ranks_by_pi() -> None:
    node = Node(name="n1", gpu_type="K80", gpus=2, power_w=(50.0, 200.0, 350.0))
    snap = Snapshot(now_s=100.0, nodes=(node,), jobs=(job(3100.0),), params=EXACT,
                    energy=Energy(pue=1.0, price_per_kwh=0.2))
    p = compile_problem(snap)
    assert np.array_equal(p.rank, p.pi)
