"""Under overload the queue order decides the lateness the cluster owes: the ATC order,
and ``wspt-atc``, which uses it only while some job is late anyway and the greedy plan
leaves a job waiting (unchanged plans otherwise)."""

from __future__ import annotations

import numpy as np

from andreas.model import Energy, Job, Node, Params, Snapshot
from andreas.optimizer import decide
from andreas.optimizer.construction import compile_ordered, overloaded
from andreas.optimizer.problem import ATC_K, compile_problem, queue_order

ENERGY = Energy(pue=1.0, price_per_kwh=1.0)
EPOCH = Params(progress="epoch", restart_overhead_s=10.0)


def test_atc_lets_a_short_heavy_job_with_little_slack_pass_a_late_light_one() -> None:
    # A is late (no slack), long and light: w / p = 1e-5. B has 10 s of slack, short and
    # heavy: 2e-4 * exp(-10 / (K * 400)) ~ 1.9e-4. C is as heavy and short with a day of
    # slack: its index vanishes. wspt-late serves every late job first: A, B, C.
    pressure = np.array([500.0, -10.0, -86_400.0])
    weight = np.array([0.01, 0.02, 0.02])
    t_min = np.array([1000.0, 100.0, 100.0])
    assert ATC_K * t_min.mean() < 86_400.0 / 50
    assert queue_order(pressure, weight, t_min, "atc").tolist() == [1, 0, 2]
    assert queue_order(pressure, weight, t_min, "wspt-late").tolist() == [0, 1, 2]
    # wspt-atc's queue alone is wspt-late's: the switch is compile_ordered's
    assert queue_order(pressure, weight, t_min, "wspt-atc").tolist() == [0, 1, 2]


def one_gpu(nodes: int, a_due_s: float = 5_000.0) -> Snapshot:
    """``nodes`` one-GPU nodes at t = 1000 s; job a is late whatever runs it (10 000 s of
    work, due at 5 000 s, weight 0.01), job b is on time if it starts now (100 s of work,
    due in 150 s, weight 0.02)."""
    node = tuple(Node(name=f"n{i}", gpu_type="V100", gpus=1, power_w=(100.0, 300.0))
                 for i in range(nodes))
    a = Job(id="a", submit_s=0.0, due_s=a_due_s, weight=0.01, epochs=100,
            epoch_time_s={"V100": (100.0,)})
    b = Job(id="b", submit_s=900.0, due_s=1_150.0, weight=0.02, epochs=1,
            epoch_time_s={"V100": (100.0,)})
    return Snapshot(now_s=1000.0, nodes=node, jobs=(a, b), energy=ENERGY, params=EPOCH)


def test_under_overload_wspt_atc_runs_the_job_it_can_still_save() -> None:
    snap, rng = one_gpu(1), np.random.default_rng(0)
    assert overloaded(compile_problem(snap), rng)
    late_first = decide(snap, np.random.default_rng(0), "greedy")
    atc = decide(snap, np.random.default_rng(0), "greedy", order="wspt-atc")
    assert [x.job for x in late_first.assignments] == ["a"]     # b waits and ends late
    assert [x.job for x in atc.assignments] == ["b"]            # b ends on time, a waits
    assert compile_ordered(snap, rng, order="wspt-atc").queue.tolist() == [1, 0]


def test_without_overload_wspt_atc_plans_as_wspt_late() -> None:
    rng = np.random.default_rng(0)
    # a job waits, but none is late whatever runs it: no overload
    assert not overloaded(compile_problem(one_gpu(1, a_due_s=1e6)), rng)
    snap = one_gpu(2)      # both jobs run: nothing waits, the order stays wspt-late's
    assert not overloaded(compile_problem(snap), rng)
    assert compile_ordered(snap, rng, order="wspt-atc").queue.tolist() == \
        compile_problem(snap).queue.tolist()
    for policy in ("greedy", "rg"):
        plans = [decide(snap, np.random.default_rng(3), policy, order=o)
                 for o in ("wspt-late", "wspt-atc")]
        assert plans[0] == plans[1]
