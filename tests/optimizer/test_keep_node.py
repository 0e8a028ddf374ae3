"""The ``keep_node`` option: on premise a running job that the construction places at its
own (class, g) stays on its node (``keep._keep_fit``); unset, on premise where restarts
cost an overhead."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from andreas.model import Config, Job, Node, Params, Snapshot
from andreas.optimizer import decide
from andreas.optimizer.greedy import keep_node_of
from andreas.policies import POLICIES
from andreas.synthetic import random_snapshot

# As test_energy_price: above idle one GPU is the cheaper configuration of a job with slack.
TIMES = {"V100": (100.0, 60.0)}
POWER = (200.0, 300.0, 400.0)
ABOVE = {"energy_price": "above-idle"}


def _job(name: str, due_s: float, node: str | None = None, epochs: int = 100) -> Job:
    running = Config(node=node, gpus=1) if node else None
    return Job(id=name, submit_s=0.0, due_s=due_s, weight=1.0, epochs=epochs,
               epochs_done=3.5 if node else 0, epoch_time_s=TIMES, running=running)


def _snapshot(*jobs: Job, nodes: int = 3) -> Snapshot:
    return Snapshot(now_s=0.0, jobs=jobs, params=Params(restart_overhead_s=10.0),
                    nodes=tuple(Node(name=f"n{i}", gpu_type="V100", gpus=2, power_w=POWER)
                                for i in range(nodes)))


def _where(plan) -> dict[str, tuple[str, int]]:
    return {a.job: (a.node, a.gpus) for a in plan.assignments}


def test_one_gpu_jobs_on_two_nodes_stay_where_they_run():
    """Best fit packs the second one-GPU job onto the first one's node, so one of them
    restarts elsewhere (its partial epoch lost); with keep_node both stay."""
    snap = _snapshot(_job("a", 1e6, "n0"), _job("b", 1e6, "n1"))
    packed = _where(decide(snap, np.random.default_rng(0), "greedy", keep_node=False,
                           **ABOVE))
    assert packed["a"][1] == packed["b"][1] == 1 and packed["a"][0] == packed["b"][0]
    for policy, extra in (("greedy", {}), ("rg", {"iterations": 20}),
                          ("pr", {"iterations": 20})):
        kept = decide(snap, np.random.default_rng(0), policy, keep_node=True, **ABOVE, **extra)
        assert _where(kept) == {"a": ("n0", 1), "b": ("n1", 1)}


def test_a_job_ahead_in_the_queue_leaves_a_running_job_its_gpu():
    """a and c run on n0. Best fit packs the new job (between them in the queue) with one
    of them, so the other moves. With keep_node a stays on n0, whose other GPU is held
    for c: the new job does not take it but opens n1."""
    snap = _snapshot(_job("a", 20_000.0, "n0"), _job("new", 30_000.0, epochs=10),
                     _job("c", 1e6, "n0"), nodes=2)
    off = _where(decide(snap, np.random.default_rng(0), "greedy", keep_node=False, **ABOVE))
    assert {off["a"][0], off["c"][0]} != {"n0"}
    on = _where(decide(snap, np.random.default_rng(0), "greedy", keep_node=True, **ABOVE))
    assert on == {"a": ("n0", 1), "c": ("n0", 1), "new": ("n1", 1)}


def test_a_running_job_that_can_stay_takes_no_held_node_to_change():
    """a runs on one GPU of n1 beside c and would rather have 2 GPUs (on 1 it ends on
    time, but without the 15 % to spare); every GPU it could add is held: n0's for b,
    n1's other for c. a comes first in the queue but can continue where it runs: it
    stays, and nobody moves. Without that rule a took both GPUs of n1 and c waited."""
    a = _job("a", 10_000.0, "n1")
    b = replace(_job("b", 10_500.0, "n0"), running=Config(node="n0", gpus=2))
    snap = _snapshot(a, b, _job("c", 1e6, "n1"), nodes=2)
    plan = _where(decide(snap, np.random.default_rng(0), "greedy", keep_node=True, **ABOVE))
    assert plan == {"a": ("n1", 1), "b": ("n0", 2), "c": ("n1", 1)}


@pytest.mark.parametrize("seed", [3, 5])
def test_unset_it_is_on_only_where_restarts_cost_an_overhead(seed):
    snap = random_snapshot(np.random.default_rng(seed), 8, 30, running_share=0.5)
    costly = replace(snap, params=replace(snap.params, restart_overhead_s=10.0))
    assert not keep_node_of(None, snap) and keep_node_of(None, costly)
    cloud = random_snapshot(np.random.default_rng(seed), 4, 10, cloud=True)
    assert not keep_node_of(None, replace(cloud, params=costly.params))
    for name in ("greedy", "rg", "pr"):
        assert POLICIES[name].options["keep_node"] is None
        extra = {} if name == "greedy" else {"iterations": 30}
        for s, keep in ((snap, False), (costly, True)):
            a = decide(s, np.random.default_rng(1), name, **extra)
            b = decide(s, np.random.default_rng(1), name, keep_node=keep, **extra)
            assert a.assignments == b.assignments and a.objective == b.objective


def test_kept_plans_are_feasible_and_keep_more_jobs_in_place():
    """On random snapshots keep_node never oversubscribes a node and moves no more
    running jobs at their own configuration to another node than best fit does."""
    for seed in range(6):
        snap = random_snapshot(np.random.default_rng(seed), 8, 30, running_share=0.5)
        running = {j.id: j.running for j in snap.jobs if j.running is not None}
        moved = []
        for keep in (False, True):
            plan = decide(snap, np.random.default_rng(1), "greedy", keep_node=keep, **ABOVE)
            used: dict[str, int] = {}
            for x in plan.assignments:
                used[x.node] = used.get(x.node, 0) + x.gpus
            gpus = {n.name: n.gpus for n in snap.nodes}
            assert all(used[n] <= gpus[n] for n in used)
            kind = {n.name: (n.gpu_type, n.gpus) for n in snap.nodes}
            moved.append(sum(1 for x in plan.assignments if x.job in running
                             and x.gpus == running[x.job].gpus
                             and kind[x.node] == kind[running[x.job].node]
                             and x.node != running[x.job].node))
        assert moved[1] <= moved[0]
