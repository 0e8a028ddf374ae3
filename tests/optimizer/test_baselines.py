"""FIFO, EDF and Priority baselines on hand-made snapshots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas import costs
from andreas.feasibility import check_plan
from andreas.model import (ActionKind, CatalogEntry, Config, Energy, Job, Node, Params,
                           Plan, Snapshot)
from andreas.errors import InputError
from andreas.optimizer import decide, get_policy
from andreas.optimizer.baselines import decide_edf, decide_fifo, decide_priority
from andreas.formats.snapshot import load_snapshot

POLICIES = [decide_fifo, decide_edf, decide_priority]
RNG = np.random.default_rng(0)


def v100(name: str, gpus: int = 2) -> Node:
    power = tuple(200.0 + 300.0 * g for g in range(gpus + 1))
    return Node(name=name, gpu_type="V100", gpus=gpus, power_w=power)


def t4(name: str) -> Node:
    return Node(name=name, gpu_type="T4", gpus=1, power_w=(100.0, 170.0))


def job(id: str, submit: float = 0.0, due: float = 1e6, weight: float = 0.01, epochs: int = 10,
        times: dict | None = None, running: Config | None = None, done: int = 0) -> Job:
    return Job(id=id, submit_s=submit, due_s=due, weight=weight, epochs=epochs,
               epoch_time_s=times or {"V100": (100.0, 60.0), "T4": (250.0,)},
               running=running, epochs_done=done)


def snap(nodes, jobs, now: float = 1000.0, catalog=()) -> Snapshot:
    return Snapshot(now_s=now, nodes=tuple(nodes), jobs=tuple(jobs), catalog=tuple(catalog),
                    energy=Energy(pue=1.25, price_per_kwh=0.2), params=Params())


def checked(policy, snapshot: Snapshot) -> Plan:
    """Run a policy and assert what every baseline plan must satisfy."""
    plan = policy(snapshot, RNG)
    check_plan(snapshot, plan)
    assert plan.objective == pytest.approx(costs.evaluate(snapshot, plan).f_obj)
    assert plan.objective_name == "f_obj"
    running = {j.running.node for j in snapshot.jobs if j.running is not None}
    new = [a.node for a in plan.assignments
           if next(j for j in snapshot.jobs if j.id == a.job).running is None]
    assert len(new) == len(set(new)) and not running & set(new), "a started job shares its node"
    return plan


def started(plan: Plan) -> dict[str, tuple[str, int]]:
    return {a.job: (a.node, a.gpus) for a in plan.assignments}


# -- order ------------------------------------------------------------------------------

# One node, three waiting jobs: 'early' was submitted first, 'urgent' is due first,
# 'heavy' has the highest tardiness weight. Each policy starts a different one.
ORDER_CASE = snap([v100("n1")], [
    job("early", submit=0.0, due=90_000.0, weight=0.001),
    job("urgent", submit=200.0, due=5_000.0, weight=0.002),
    job("heavy", submit=100.0, due=50_000.0, weight=0.05),
])


@pytest.mark.parametrize("policy, first", [(decide_fifo, "early"), (decide_edf, "urgent"),
                                           (decide_priority, "heavy")])
def test_orders_differ_on_one_node(policy, first):
    plan = checked(policy, ORDER_CASE)
    assert list(started(plan)) == [first]
    assert set(plan.postponed) == {"early", "urgent", "heavy"} - {first}
    assert plan.policy == policy.__name__.removeprefix("decide_")
    assert plan.stats == {"jobs": 3, "started": 1}


@pytest.mark.parametrize("policy", POLICIES)
def test_ties_broken_by_submit_then_id(policy):
    same = dict(due=20_000.0, weight=0.01)
    s = snap([v100("n1")], [job("b", submit=5.0, **same), job("a", submit=5.0, **same),
                            job("c", submit=9.0, **same)])
    assert list(started(checked(policy, s))) == ["a"]
    s = snap([v100("n1")], [job("b", submit=1.0, **same), job("a", submit=5.0, **same)])
    assert list(started(checked(policy, s))) == ["b"]


# -- running jobs are never touched ---------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_running_job_keeps_node_and_gpus(policy):
    # 'r' runs on 1 of n2's GPUs although 2 GPUs of the idle n1 would be faster and
    # cheaper; it continues as is, and nobody joins it on n2 (one job per node).
    s = snap([v100("n1"), v100("n2")], [
        job("r", due=1500.0, weight=1.0, running=Config(node="n2", gpus=1), done=2),
        job("w1", submit=10.0), job("w2", submit=20.0),
    ])
    plan = checked(policy, s)
    assert started(plan)["r"] == ("n2", 1)
    kinds = {a.job: a.kind for a in plan.actions(s)}
    assert kinds["r"] is ActionKind.CONTINUE
    assert sum(1 for a in plan.assignments if a.node == "n2") == 1
    assert len(plan.postponed) == 1 and plan.stats["started"] == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_shared_node_from_earlier_plan_stays_as_is(policy):
    # A snapshot produced under another policy may have two jobs on one node: keep both.
    s = snap([v100("n1")], [job("r1", running=Config(node="n1", gpus=1)),
                            job("r2", running=Config(node="n1", gpus=1)), job("w")])
    plan = checked(policy, s)
    assert started(plan) == {"r1": ("n1", 1), "r2": ("n1", 1)}
    assert plan.postponed == ("w",)


# -- best configuration on free nodes --------------------------------------------------

# n1: 2 x V100 drawing 100/400/600 W -> c = 0.025/0.1/0.15 per hour at PUE 1.25 and
# 0.2 per kWh. Job: 10 epochs of 100 s on 1 GPU or 80 s on 2: t1 = 1000 s, t2 = 800 s,
# cost t*c = 100 (1 GPU) < 120 (2 GPUs) per 3600.
BEST_NODE = Node(name="n1", gpu_type="V100", gpus=2, power_w=(100.0, 400.0, 600.0))


@pytest.mark.parametrize("due, gpus", [
    (1000.0 + 5000.0, 1),   # both on time: cheapest is 1 GPU
    (1000.0 + 900.0, 2),    # only 2 GPUs (800 s) meet the due date
    (1000.0 + 500.0, 2),    # nothing on time: fastest
    (1000.0 + 1000.0, 2),   # on time means strictly before the due date
])
def test_best_configuration_rule(due, gpus):
    s = snap([BEST_NODE], [job("j", due=due, times={"V100": (100.0, 80.0)})])
    for policy in POLICIES:
        assert started(checked(policy, s)) == {"j": ("n1", gpus)}


@pytest.mark.parametrize("policy", POLICIES)
def test_cheapest_free_node_and_node_order_ties(policy):
    # T4: 10 x 400 s at 170 W = 680 kJ; V100 1 GPU: 10 x 100 s at 500 W = 500 kJ: the
    # V100 is cheaper. Two identical V100 nodes: the first in node order wins.
    s = snap([t4("a"), v100("b"), v100("c")], [job("j", times={"V100": (100.0,), "T4": (400.0,)})])
    assert started(checked(policy, s)) == {"j": ("b", 1)}


@pytest.mark.parametrize("policy", POLICIES)
def test_postponed_when_no_free_node_without_head_of_line_blocking(policy):
    # n1 is busy; the free n2 is a T4 that 'v100only' cannot use: it waits, and the next
    # job in every order ('any') still starts.
    s = snap([v100("n1"), t4("n2")], [
        job("run", running=Config(node="n1", gpus=2)),
        job("v100only", submit=1.0, due=2000.0, weight=1.0, times={"V100": (100.0, 60.0)}),
        job("any", submit=2.0, due=3000.0, weight=0.5),
    ])
    plan = checked(policy, s)
    assert plan.postponed == ("v100only",)
    assert started(plan)["any"] == ("n2", 1)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_job_postponed_when_cluster_full(policy):
    s = snap([t4("n1")], [job("run", running=Config(node="n1", gpus=1)), job("a"), job("b")])
    plan = checked(policy, s)
    assert set(plan.postponed) == {"a", "b"} and plan.stats["started"] == 0


@pytest.mark.parametrize("name", ["fifo", "edf", "priority"])
def test_registry_runs_them_and_refuses_options(name):
    plan = decide(ORDER_CASE, np.random.default_rng(1), policy=name)
    assert plan == get_policy(name)(ORDER_CASE, np.random.default_rng(2))
    with pytest.raises(InputError, match=f"max_it: not an option of policy {name}"):
        decide(ORDER_CASE, np.random.default_rng(1), policy=name, max_it=5)


# -- cloud mode ---------------------------------------------------------------------------

CATALOG = (
    CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=1.0),
    CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=2.0),
    CatalogEntry(name="NV6", gpu_type="M60", gpus=1, cost_per_hour=3.0),
)
# 10 epochs: NC6 1 GPU 3600 s (cost 1.0), NC12 2 GPUs 2160 s (1.2), NC12 1 GPU 3600 s (2.0),
# NV6 1800 s (1.5).
CLOUD_TIMES = {"K80": (360.0, 216.0), "M60": (180.0,)}


@pytest.mark.parametrize("due, expected", [
    (5000.0, ("NC6", 1)),     # everything on time: cheapest VM
    (2500.0, ("NC12", 2)),    # NC6 (3600 s) is late: cheapest VM meeting the due date
    (1900.0, ("NV6", 1)),     # only NV6 on time, though pricier than NC12 x2
    (1000.0, ("NV6", 1)),     # nothing on time: fastest
])
def test_cloud_picks_cheapest_vm_meeting_due_date(due, expected):
    s = snap([Node(name="c1"), Node(name="c2")], [job("j", due=due, times=CLOUD_TIMES)],
             now=0.0, catalog=CATALOG)
    for policy in POLICIES:
        plan = checked(policy, s)
        assert started(plan) == {"j": ("c1", expected[1])}
        assert dict(plan.node_configs) == {"c1": expected[0]}


@pytest.mark.parametrize("policy", POLICIES)
def test_cloud_running_job_keeps_node_with_cheapest_fitting_vm(policy):
    # No VM recorded for c1: the cheapest entry that holds 2 K80 GPUs is NC12.
    s = snap([Node(name="c1"), Node(name="c2")], [
        job("r", times=CLOUD_TIMES, running=Config(node="c1", gpus=2)),
        job("w", due=5000.0, times=CLOUD_TIMES),
    ], now=0.0, catalog=CATALOG)
    plan = checked(policy, s)
    assert started(plan) == {"r": ("c1", 2), "w": ("c2", 1)}
    assert dict(plan.node_configs) == {"c1": "NC12", "c2": "NC6"}


@pytest.mark.parametrize("policy", POLICIES)
def test_cloud_running_job_keeps_recorded_vm(policy):
    s = snap([Node(name="c1", config="NV6"), Node(name="c2")], [
        job("r", times=CLOUD_TIMES, running=Config(node="c1", gpus=1)),
        job("w", due=5000.0, times=CLOUD_TIMES),
    ], now=0.0, catalog=CATALOG)
    plan = checked(policy, s)
    assert dict(plan.node_configs) == {"c1": "NV6", "c2": "NC6"}


# -- properties -------------------------------------------------------------------------


@st.composite
def snapshots(draw):
    n_nodes = draw(st.integers(1, 4))
    nodes = [v100(f"n{i}", gpus=draw(st.integers(1, 3))) if draw(st.booleans()) else t4(f"n{i}")
             for i in range(n_nodes)]
    jobs, used = [], set()
    for i in range(draw(st.integers(0, 7))):
        times = {}
        if draw(st.booleans()):
            times["V100"] = tuple(draw(st.floats(10.0, 500.0)) / g for g in (1, 2, 3))
        if draw(st.booleans()) or not times:
            times["T4"] = (draw(st.floats(10.0, 500.0)),)
        running = None
        free = [n for n in nodes if n.name not in used]
        if free and draw(st.booleans()):
            node = draw(st.sampled_from(free))
            g = draw(st.integers(1, node.gpus))
            if node.gpu_type in times and g <= len(times[node.gpu_type]):
                running = Config(node=node.name, gpus=g)
                used.add(node.name)
        jobs.append(job(f"j{i}", submit=draw(st.floats(0.0, 900.0)),
                        due=draw(st.floats(0.0, 9000.0)), weight=draw(st.floats(0.0, 1.0)),
                        times=times, running=running))
    return snap(nodes, jobs)


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_plans_always_feasible_and_conservative(s):
    for policy in POLICIES:
        plan = checked(policy, s)
        for j in s.jobs:
            if j.running is not None:
                assert plan.config_of(j.id) == j.running
        busy = {j.running.node for j in s.jobs if j.running is not None}
        free = [n for n in s.nodes if n.name not in busy]
        assert plan.stats["started"] <= len(free)


def test_example_snapshot():
    # Written by another policy: 12 jobs share the 10 nodes, so nothing new can start.
    s = load_snapshot(Path(__file__).resolve().parents[2] / "examples" / "example-snapshot-n10.json")
    for policy in POLICIES:
        plan = checked(policy, s)
        for j in s.jobs:
            if j.running is not None:
                assert plan.config_of(j.id) == j.running
