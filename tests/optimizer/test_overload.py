"""Under overload the queue order decides the lateness the cluster owes: the ATC order,
late-atc (late jobs first, the others by ATC) and ``wspt-atc``, the default, which uses
late-atc only on premise in the default mode while the greedy plan leaves a job waiting
(the same plans as wspt-late otherwise)."""

from __future__ import annotations

import numpy as np

import dataclasses

import pytest

from andreas.model import Energy, Job, Node, Params, Snapshot
from andreas.optimizer import decide
from andreas.optimizer.construction import compile_ordered, short_of_gpus
from andreas.optimizer.problem import ATC_K, DEFAULT_ORDER, compile_problem, queue_order
from andreas.policies import POLICIES

ENERGY = Energy(pue=1.0, price_per_kwh=1.0)
EPOCH = Params(progress="epoch", restart_overhead_s=10.0)


def test_atc_lets_a_short_heavy_job_with_little_slack_pass_a_late_light_one() -> None:
    # A is late (no slack), long and light: w / p = 1e-5. B has 10 s of slack, short and
    # heavy: 2e-4 * exp(-10 / (K * 400)) ~ 1.8e-4. C is as heavy and short with a day of
    # slack: its index vanishes. wspt-late and late-atc serve every late job first.
    pressure = np.array([500.0, -10.0, -86_400.0])
    weight = np.array([0.01, 0.02, 0.02])
    t_min = np.array([1000.0, 100.0, 100.0])
    assert ATC_K * t_min.mean() < 86_400.0 / 50
    assert queue_order(pressure, weight, t_min, "atc").tolist() == [1, 0, 2]
    assert queue_order(pressure, weight, t_min, "wspt-late").tolist() == [0, 1, 2]
    assert queue_order(pressure, weight, t_min, "late-atc").tolist() == [0, 1, 2]
    # wspt-atc's queue alone is wspt-late's: the switch is compile_ordered's
    assert queue_order(pressure, weight, t_min, "wspt-atc").tolist() == [0, 1, 2]


def test_late_atc_orders_jobs_with_slack_by_atc_not_least_slack() -> None:
    # L is late; D has 50 s of slack, long and light; E 100 s, short and heavy:
    # D 1e-6 * exp(-50 / 137.5) against E 2e-4 * exp(-100 / 137.5) (K p_mean = 0.25 * 550)
    pressure = np.array([-50.0, -100.0, 10.0])
    weight = np.array([0.001, 0.02, 0.001])
    t_min = np.array([1000.0, 100.0, 550.0])
    assert queue_order(pressure, weight, t_min, "wspt-late").tolist() == [2, 0, 1]
    assert queue_order(pressure, weight, t_min, "late-atc").tolist() == [2, 1, 0]


def one_gpu(nodes: int) -> Snapshot:
    """``nodes`` one-GPU nodes at t = 1000 s and two jobs that can both be on time: d (1000
    s of work, 50 s of slack, weight 0.001) and e (100 s, 100 s of slack, weight 0.02)."""
    node = tuple(Node(name=f"n{i}", gpu_type="V100", gpus=1, power_w=(100.0, 300.0))
                 for i in range(nodes))
    d = Job(id="d", submit_s=0.0, due_s=2_050.0, weight=0.001, epochs=10,
            epoch_time_s={"V100": (100.0,)})
    e = Job(id="e", submit_s=900.0, due_s=1_200.0, weight=0.02, epochs=1,
            epoch_time_s={"V100": (100.0,)})
    return Snapshot(now_s=1000.0, nodes=node, jobs=(d, e), energy=ENERGY, params=EPOCH)


def test_wspt_atc_is_the_default_of_the_constructions() -> None:
    assert DEFAULT_ORDER == "wspt-atc"
    for name in ("greedy", "rg", "pr", "ga-energy"):
        assert POLICIES[name].options["order"] == "wspt-atc"


@pytest.mark.parametrize("policy", ["greedy", "rg", "pr"])
def test_short_of_gpus_wspt_atc_serves_the_short_heavy_job_first(policy: str) -> None:
    snap, rng = one_gpu(1), np.random.default_rng(0)
    assert short_of_gpus(compile_problem(snap), rng)
    least_slack = decide(snap, np.random.default_rng(0), policy, order="wspt-late")
    atc = decide(snap, np.random.default_rng(0), policy)
    assert [x.job for x in least_slack.assignments] == ["d"]    # e waits
    assert [x.job for x in atc.assignments] == ["e"]            # d waits 100 s
    assert compile_ordered(snap, rng, order="wspt-atc").queue.tolist() == [1, 0]


def test_in_the_papers_mode_wspt_atc_plans_as_wspt_late() -> None:
    # no move costs anything there: the switch is off, the plans are wspt-late's
    snap = dataclasses.replace(one_gpu(1), params=Params(progress="exact",
                                                         restart_overhead_s=0.0))
    assert compile_ordered(snap, np.random.default_rng(0)).queue.tolist() == [0, 1]
    assert decide(snap, np.random.default_rng(0), "greedy") == \
        decide(snap, np.random.default_rng(0), "greedy", order="wspt-late")


def test_with_gpus_for_every_job_wspt_atc_plans_as_wspt_late() -> None:
    snap, rng = one_gpu(2), np.random.default_rng(0)
    assert not short_of_gpus(compile_problem(snap), rng)
    assert compile_ordered(snap, rng, order="wspt-atc").queue.tolist() == \
        compile_problem(snap).queue.tolist()
    for policy in ("greedy", "rg"):
        plans = [decide(snap, np.random.default_rng(3), policy, order=o)
                 for o in ("wspt-late", "wspt-atc")]
        assert plans[0] == plans[1]
