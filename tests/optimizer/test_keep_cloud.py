"""``keep_node`` in the cloud (``keep_cloud.py``): the plan's jobs are swapped among its
VMs of their type at their GPU count so that the most stay on the VM they run on; every
job's configuration and every VM's type and load are the plan's own."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from andreas.costs import evaluate
from andreas.feasibility import check_plan
from andreas.model import CatalogEntry, Config, Energy, Job, Node, Params, Snapshot
from andreas.optimizer import decide
from andreas.optimizer.keep_cloud import _assign
from andreas.optimizer.problem import compile_problem
from andreas.optimizer.solution import to_plan
from andreas.policies import POLICIES
from andreas.synthetic import random_snapshot

EPOCH = Params(progress="epoch", restart_overhead_s=10.0)


def _pairs() -> Snapshot:
    """VMs v1 (jobs a, c) and v2 (jobs b, d), both of type A (2 GPUs); each job runs on
    one GPU, half an epoch into it."""
    catalog = (CatalogEntry(name="A", gpu_type="M60", gpus=2, cost_per_hour=2.0),)
    jobs = tuple(Job(id=n, submit_s=0.0, due_s=1e6, weight=1.0, epochs=100,
                     epochs_done=10.5, epoch_time_s={"M60": (100.0, 60.0)},
                     running=Config(node=vm, gpus=1))
                 for n, vm in (("a", "v1"), ("b", "v2"), ("c", "v1"), ("d", "v2")))
    nodes = (Node(name="v1", config="A"), Node(name="v2", config="A"), Node(name="v3"))
    return Snapshot(now_s=1000.0, nodes=nodes, jobs=jobs, params=EPOCH,
                    energy=Energy(pue=1.0, price_per_kwh=1.0), catalog=catalog)


def _where(plan) -> dict[str, str]:
    return {a.job: a.node for a in plan.assignments}


def test_a_solution_that_splits_two_vms_pairs_is_put_back() -> None:
    """The solution packs a with b and c with d: any relabelling moves two of the four;
    swapping b and c (same type, same GPU count) keeps all four where they run."""
    snap = _pairs()
    cls = np.array([snap.catalog[0].name == n for n in
                    compile_problem(snap).class_name]).argmax()
    for keep in (False, True):
        p = compile_problem(snap, keep_node=keep)
        node = np.array([0, 0, 1, 1])                      # a, b on 0; c, d on 1
        cfg = p.run_cfg.copy()
        plan = to_plan(p, node, cfg, np.full(p.n_nodes, cls), policy="rg", objective=0.0,
                       objective_name="f_mix")
        check_plan(snap, plan)
        where = _where(plan)
        moved = sum(where[j.id] != j.running.node for j in snap.jobs)
        assert moved == (0 if keep else 2)
        assert sorted(Counter(where.values()).values()) == [2, 2]
        if keep:     # the objective drops by the two relocations' cost the kernel priced
            assert plan.objective == pytest.approx(-2 * p.mv_same[0])


def test_assign_is_the_least_cost_matching() -> None:
    cost = np.array([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0]])
    assert list(_assign(cost)) == [1, 0]


@pytest.mark.parametrize("seed", range(4))
def test_kept_cloud_plans_keep_every_configuration_and_cost_no_more(seed: int) -> None:
    rng = np.random.default_rng(seed)
    snap = random_snapshot(rng, 6, 14, cloud=True, running_share=0.6)
    jobs = tuple(dataclasses.replace(j, epochs_done=j.epochs_done + float(rng.uniform(0, 0.9)))
                 if j.running is not None else j for j in snap.jobs)
    snap = dataclasses.replace(snap, jobs=jobs, params=EPOCH)
    for name in ("greedy", "rg", "pr"):
        extra = POLICIES[name].accepted({"iterations": 30, "fallback": 0.0})
        off = decide(snap, np.random.default_rng(1), name, **extra)
        on = decide(snap, np.random.default_rng(1), name, keep_node=True, **extra)
        check_plan(snap, on)
        margin = 0.0 if name == "greedy" else 3.0
        ev_on = evaluate(snap, on, move_margin=margin)
        assert on.objective == pytest.approx(ev_on.f_mix, rel=1e-9, abs=1e-9)
        ev_off = evaluate(snap, off, move_margin=margin)
        assert ev_on.f_mix <= ev_off.f_mix + 1e-9
        conf = {a.job: (on.node_configs[a.node], a.gpus) for a in on.assignments}
        assert conf == {a.job: (off.node_configs[a.node], a.gpus) for a in off.assignments}
        loads = Counter((on.node_configs[a.node], a.node) for a in on.assignments)
        loads_off = Counter((off.node_configs[a.node], a.node) for a in off.assignments)
        assert sorted((t, n) for (t, _), n in loads.items()) == sorted(
            (t, n) for (t, _), n in loads_off.items())
