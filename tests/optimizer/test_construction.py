"""The compiled constructions: their objectives, the baselines' rows, cloud packing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from andreas.costs import evaluate
from andreas.feasibility import check_plan
from andreas.model import CatalogEntry, Config, Job, Node, Snapshot
from andreas.policies import POLICIES
from andreas.optimizer import decide
from andreas.optimizer.construction import FLOOR, construct
from andreas.optimizer.problem import compile_problem
from andreas.optimizer.solution import to_plan
from andreas.synthetic import random_snapshot
from tests import strategies

snapshots = strategies.snapshots(max_nodes=12, max_jobs=60)


def _plan(problem, batch, row):
    return to_plan(problem, batch.node[row], batch.cfg[row], batch.node_cls[row],
                   policy="row", objective=batch.f_obj[row], objective_name="f_obj")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots, seed=st.integers(0, 1000))
def test_every_row_is_feasible_and_its_objectives_are_the_reference_ones(snapshot, seed):
    problem = compile_problem(snapshot)
    batch = construct(problem, 24, np.random.default_rng(seed), floor=True)
    for row in range(len(batch.f_obj)):
        plan = _plan(problem, batch, row)
        check_plan(snapshot, plan)
        ev = evaluate(snapshot, plan)
        assert ev.f_obj == pytest.approx(batch.f_obj[row], rel=1e-9, abs=1e-9)
        assert ev.f_bar == pytest.approx(batch.f_bar[row], rel=1e-9, abs=1e-9)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots)
def test_the_floor_rows_are_the_baselines_plans(snapshot):
    """The compiled exclusive rows reproduce baselines.py's plans, job for job."""
    problem = compile_problem(snapshot)
    batch = construct(problem, 8, np.random.default_rng(0), floor=True)
    for name in FLOOR:
        if name not in batch.names:
            continue
        row = int(batch.rows_of(name)[0])
        ours = _plan(problem, batch, row)
        theirs = decide(snapshot, None, name)
        assert ours.objective == pytest.approx(theirs.objective, rel=1e-9, abs=1e-9)
        assert {(a.job, a.gpus) for a in ours.assignments} == \
            {(a.job, a.gpus) for a in theirs.assignments}
        assert set(ours.postponed) == set(theirs.postponed)


def test_without_randomness_only_the_greedy_row_is_built():
    snapshot = random_snapshot(np.random.default_rng(3), 10, 40)
    batch = construct(compile_problem(snapshot), 50, np.random.default_rng(0), randomize=False,
                      floor=True)
    assert batch.names == ("paper",) and len(batch.f_obj) == 1


# prices per GPU alike, so one shared VM costs no more than one VM per job
CLOUD = (CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=0.56),
         CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=1.12),
         CatalogEntry(name="NC24", gpu_type="K80", gpus=4, cost_per_hour=2.24),
         CatalogEntry(name="NC48", gpu_type="K80", gpus=8, cost_per_hour=4.48))


def _cloud_jobs(n: int, due: float = 1e6) -> tuple[Job, ...]:
    return tuple(Job(id=f"j{i}", submit_s=0.0, due_s=due, weight=0.01, epochs=10,
                     epoch_time_s={"K80": (100.0, 60.0, 45.0, 40.0, 38.0, 37.0, 36.0, 35.0)})
                 for i in range(n))


@pytest.mark.parametrize("jobs, vms", [(1, ["NC6"]), (2, ["NC12"]), (4, ["NC24"]),
                                       (8, ["NC48"]), (3, ["NC12", "NC6"]),
                                       (7, ["NC24", "NC12", "NC6"])])
def test_cloud_jobs_pack_onto_the_largest_vm_then_downsize_without_idle_gpus(jobs, vms):
    """Each job's best configuration is one GPU (cheapest on time); the node opens as the
    largest VM of the type (8 GPUs), the next jobs pack onto it, and it is then downsized
    to the cheapest VM that holds them, or split over free nodes where that VM would idle
    GPUs and two smaller ones cost less: 3 jobs take NC12 + NC6, not NC24 with one idle."""
    snap = Snapshot(now_s=0.0, nodes=tuple(Node(name=f"n{i}") for i in range(5)),
                    jobs=_cloud_jobs(jobs), catalog=CLOUD)
    plan = decide(snap, np.random.default_rng(0), "greedy")
    check_plan(snap, plan)
    assert {a.gpus for a in plan.assignments} == {1}
    assert sorted(plan.node_configs.values()) == sorted(vms)
    assert evaluate(snap, plan).idle_gpus == 0
    for policy in ("rg", "pr"):   # they may split a VM with idle GPUs when that is cheaper
        other = decide(snap, np.random.default_rng(0), policy,
                       **POLICIES[policy].accepted({"iterations": 20}))
        assert evaluate(snap, other).f_obj <= evaluate(snap, plan).f_obj + 1e-9


@pytest.mark.parametrize("jobs, gpus", [(3, [1, 1, 2]), (5, [1, 1, 1, 1, 4]),
                                        (7, [1, 1, 1, 1, 1, 1, 2])])
def test_idle_gpus_of_a_rented_vm_go_to_a_job_on_it(jobs, gpus):
    """One node only, so no split: 3 one-GPU jobs need NC24 (4 GPUs), 5 or 7 need NC48.
    The idle GPUs cost as much as busy ones, so they go to one job (the largest speed-up;
    all equal here), which then ends sooner."""
    snap = Snapshot(now_s=0.0, nodes=(Node(name="n0"),), jobs=_cloud_jobs(jobs),
                    catalog=CLOUD)
    for policy in ("greedy", "rg"):
        plan = decide(snap, np.random.default_rng(0), policy,
                      **POLICIES[policy].accepted({"iterations": 10}))
        check_plan(snap, plan)
        assert sorted(a.gpus for a in plan.assignments) == gpus
        assert evaluate(snap, plan).idle_gpus == 0


def test_a_job_on_a_gpu_count_no_vm_has_swaps_into_a_full_node_rather_than_idle_a_gpu():
    """Queue order a3, b2, c2, d1, e3 (by pressure; the number is each job's best GPU
    count). Best fit fills one NC48 with a3 b2 c2 d1 and leaves e3 alone: 3 GPUs need an
    NC24, whose fourth GPU went to e3 (x4, off its best mix). Swapping e3 with b2 + d1
    (powers of two, 3 GPUs together) keeps the NC48 full and splits b2, d1 over an NC12
    and an NC6: nothing idles, and every job runs on its best count."""
    times = {"K80": (100.0, 60.0, 45.0, 40.0, 38.0, 37.0, 36.0, 35.0)}
    jobs = tuple(Job(id=i, submit_s=0.0, due_s=due, weight=0.01, epochs=epochs,
                     epoch_time_s=times)
                 for i, epochs, due in (("a3", 10, 500.0), ("b2", 10, 700.0),
                                        ("c2", 10, 700.0), ("d1", 10, 5000.0),
                                        ("e3", 1000, 50_000.0)))
    snap = Snapshot(now_s=0.0, nodes=tuple(Node(name=f"n{i}") for i in range(5)), jobs=jobs,
                    catalog=CLOUD)
    p = compile_problem(snap)
    for policy in ("greedy", "rg"):
        plan = decide(snap, np.random.default_rng(0), policy,
                      **POLICIES[policy].accepted({"iterations": 20}))
        check_plan(snap, plan)
        assert {a.job: a.gpus for a in plan.assignments} == {
            "a3": 3, "b2": 2, "c2": 2, "d1": 1, "e3": 3}
        assert sorted(plan.node_configs.values()) == ["NC12", "NC48", "NC6"]
        ev = evaluate(snap, plan)
        assert ev.idle_gpus == 0
        # each job pays its least rank: no plan's f_mix is lower (e3 on x4: 7 % more)
        assert ev.f_mix == pytest.approx(float(np.where(p.in_dstar, p.rank, np.inf)
                                               .min(axis=1).sum()), rel=1e-9)


def test_a_cloud_node_with_running_jobs_keeps_its_vm_in_the_baselines_rows():
    running = tuple(Job(id=f"r{i}", submit_s=0.0, due_s=1e6, weight=0.01, epochs=10,
                        epoch_time_s={"K80": (100.0, 60.0)},
                        running=Config(node="n0", gpus=1)) for i in range(2))
    snap = Snapshot(now_s=0.0, nodes=(Node(name="n0", config="NC24"), Node(name="n1")),
                    jobs=running + _cloud_jobs(1), catalog=CLOUD)
    for name in FLOOR:
        plan = decide(snap, None, name)
        assert plan.node_configs["n0"] == "NC24"
    problem = compile_problem(snap)
    batch = construct(problem, 8, np.random.default_rng(0), floor=True)
    row = int(batch.rows_of("edf")[0])
    plan = _plan(problem, batch, row)
    assert plan.node_configs["n0"] == "NC24"
    assert {a.job: a.node for a in plan.assignments}["j0"] == "n1"   # one new job per node
