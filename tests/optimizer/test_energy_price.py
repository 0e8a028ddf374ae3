"""The ``energy_price`` option: on premise ``above-idle`` charges a job's run what its GPUs
add to the node's draw (``compile_problem``); ``node``, the default, ANDREAS' c_ng."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from andreas.costs import evaluate
from andreas.errors import InputError
from andreas.model import Config, Job, Node, Snapshot
from andreas.optimizer import decide
from andreas.optimizer.problem import TAIL_ALLOWANCE, compile_problem
from andreas.policies import POLICIES, EnergyPrice
from andreas.synthetic import random_snapshot

# 1 GPU: 100 s per epoch, 2 GPUs: 60 s. The node draws 200 W idle, 300 W with one busy
# GPU, 400 W with two: c_ng makes 2 GPUs cheaper (400 x 60 < 300 x 100), the draw above
# idle makes 1 GPU cheaper (100 x 100 < 200 x 60).
TIMES = {"V100": (100.0, 60.0)}
POWER = (200.0, 300.0, 400.0)


def _snapshot() -> Snapshot:
    """A job with slack on an empty node, and a long job running on a second node."""
    nodes = tuple(Node(name=f"n{i}", gpu_type="V100", gpus=2, power_w=POWER) for i in (0, 1))
    new = Job(id="new", submit_s=0.0, due_s=1e6, weight=1.0, epochs=10, epoch_time_s=TIMES)
    long = Job(id="long", submit_s=0.0, due_s=1e6, weight=1.0, epochs=1000,
               epoch_time_s=TIMES, running=Config(node="n1", gpus=2))
    return Snapshot(now_s=0.0, nodes=nodes, jobs=(new, long))


def _gpus(plan, job: str) -> int:
    return next(a.gpus for a in plan.assignments if a.job == job)


@pytest.mark.parametrize("policy", ["greedy", "rg", "pr"])
def test_above_idle_runs_a_job_with_slack_on_fewer_gpus(policy):
    snap = _snapshot()
    rng = np.random.default_rng
    assert _gpus(decide(snap, rng(0), policy, iterations=20) if policy != "greedy"
                 else decide(snap, rng(0), policy), "new") == 2
    options = {"energy_price": "above-idle"} | ({"iterations": 20} if policy != "greedy"
                                                 else {})
    assert _gpus(decide(snap, rng(0), policy, **options), "new") == 1


def test_above_idle_prices_the_draw_above_idle():
    snap = _snapshot()
    node, above = (compile_problem(snap, energy_price=p) for p in EnergyPrice)
    assert node.class_cost_h[0, 0] > 0
    assert np.allclose(above.class_cost_h, node.class_cost_h - node.class_cost_h[:, :1])
    # the new job ends before the running one: its pi is its GPUs' draw above idle alone
    rise = (np.array(POWER[1:]) - POWER[0]) / np.array(POWER[1:])
    assert np.allclose(above.pi[0], node.pi[0] * rise)
    assert above.pi[0, 0] < above.pi[0, 1] and node.pi[0, 1] < node.pi[0, 0]


def test_above_idle_charges_every_node_idle_beyond_the_last_running_job():
    """Alone on the cluster, a run keeps every node on until it ends: with one node that
    is c_ng again beyond TAIL_ALLOWANCE x its fastest run (600 s on 2 GPUs), so the job
    takes both GPUs as under ``node``."""
    snap = _snapshot()
    alone = Snapshot(now_s=0.0, nodes=snap.nodes[:1], jobs=snap.jobs[:1])
    node, above = (compile_problem(alone, energy_price=p) for p in EnergyPrice)
    free_s = 600.0 * (1.0 + TAIL_ALLOWANCE)
    idle = node.class_cost_h[0, 0] / 3600.0
    expected = node.pi - idle * node.t + idle * np.maximum(0.0, node.t - free_s)
    assert np.allclose(above.pi, expected) and above.pi[0, 0] > above.pi[0, 1]
    assert _gpus(decide(alone, np.random.default_rng(0), "greedy",
                        energy_price="above-idle"), "new") == 2


def test_the_longest_running_job_pays_for_staying_slow():
    """A running job is not the end it is measured against: alone on one GPU of the
    cluster it pays both nodes' idle draw beyond 1.3 x its fastest run, and above idle
    it speeds up to 2 GPUs (measured against its own run, 1 GPU would draw less)."""
    snap = _snapshot()
    slow = replace(snap.jobs[1], running=Config(node="n1", gpus=1), epochs_done=500.0)
    alone = Snapshot(now_s=0.0, nodes=snap.nodes, jobs=(slow,))
    node, above = (compile_problem(alone, energy_price=p) for p in EnergyPrice)
    t1, t2 = above.t[0]
    beyond = t1 - t2 * (1.0 + TAIL_ALLOWANCE)
    assert beyond > 0
    idle_h = 2 * node.class_cost_h[0, 0]
    assert above.pi[0, 0] == pytest.approx((t1 * above.class_cost_h[0, 1]
                                            + beyond * idle_h) / 3600.0)
    assert _gpus(decide(alone, np.random.default_rng(0), "greedy",
                        energy_price="above-idle"), "long") == 2


def test_unset_prices_above_idle_with_keep_node_only_where_restarts_cost_an_overhead():
    """The default: the node's whole draw on a bare snapshot (the papers' mode's, no
    overhead); above idle with keep_node on premise where a restart costs an overhead."""
    bare = random_snapshot(np.random.default_rng(5), 8, 30)
    costly = replace(bare, params=replace(bare.params, restart_overhead_s=10.0))
    for name in ("greedy", "rg", "pr"):
        assert POLICIES[name].options["energy_price"] is None
        assert POLICIES[name].options["keep_node"] is None
        for snap, price, keep in ((bare, "node", False), (costly, "above-idle", True)):
            a = decide(snap, np.random.default_rng(1), name)
            b = decide(snap, np.random.default_rng(1), name, energy_price=price,
                       keep_node=keep)
            assert a.assignments == b.assignments and a.objective == b.objective
        # chosen above idle, the plan reports f_obj all the same
        assert a.objective == pytest.approx(evaluate(costly, a).f_mix, rel=1e-9)


def test_a_bad_energy_price_is_named():
    with pytest.raises(InputError, match="energy_price: must be one of node, above-idle"):
        decide(_snapshot(), np.random.default_rng(0), "greedy", energy_price="idle")


def test_above_idle_wants_time_to_spare_before_the_due_date():
    """1 GPU ends at 1 000 s, before the due date of 1 100 s but with less than 15 % of
    its time to spare: above idle the job takes 2 GPUs (600 s)."""
    snap = _snapshot()
    tight = Snapshot(now_s=0.0, nodes=snap.nodes,
                     jobs=(replace(snap.jobs[0], due_s=1100.0), snap.jobs[1]))
    assert _gpus(decide(tight, np.random.default_rng(0), "greedy",
                        energy_price="above-idle"), "new") == 2
