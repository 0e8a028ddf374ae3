"""The DP baselines (path-relinking-2022 §4.2.1): hand-checked proxies, the DP against
brute force, feasibility, running jobs, and whole simulations."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from andreas.costs import evaluate
from andreas.feasibility import check_plan
from andreas.model import ActionKind, Config, Energy, Job, Node, Params, Plan, Snapshot
from andreas.optimizer import decide
from andreas.policies import POLICIES
from andreas.optimizer import dp
from andreas.optimizer.dp import VARIANTS, Tables, build_tables, decide_dp, objective, solve
from andreas.optimizer.problem import compile_problem
from andreas.simulator.engine import Simulator, simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.results import SimOptions
from andreas.synthetic import random_snapshot

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

DP = sorted(VARIANTS)
DT = 900.0
RNG = np.random.default_rng(0)

# n1: 2 x V100 drawing 100/400/600 W -> c = 0.025/0.1/0.15 per hour at PUE 1.25 and
# 0.2 per kWh; over Delta t = 900 s: 0.025 (1 GPU) and 0.0375 (2 GPUs).
V100 = Node(name="n1", gpu_type="V100", gpus=2, power_w=(100.0, 400.0, 600.0))


def node(name: str, gpu_type: str = "V100", gpus: int = 2) -> Node:
    power = (100.0, 400.0, 600.0)[: gpus + 1] if gpu_type == "V100" else (100.0, 170.0)
    return Node(name=name, gpu_type=gpu_type, gpus=gpus, power_w=power)


def job(id: str, submit: float = 0.0, due: float = 1e6, weight: float = 0.01,
        epochs: int = 10, times: dict | None = None, running: Config | None = None,
        done: float = 0) -> Job:
    return Job(id=id, submit_s=submit, due_s=due, weight=weight, epochs=epochs,
               epoch_time_s=times or {"V100": (100.0, 80.0), "T4": (250.0,)},
               running=running, epochs_done=done)


def snap(nodes, jobs, now: float = 1000.0, **params) -> Snapshot:
    return Snapshot(now_s=now, nodes=tuple(nodes), jobs=tuple(jobs),
                    energy=Energy(pue=1.25, price_per_kwh=0.2),
                    params=Params(period_s=DT, **params))


def checked(snapshot: Snapshot, policy: str, **options) -> Plan:
    """Run a DP policy and assert what every DP plan must satisfy."""
    plan = decide(snapshot, RNG, policy, **options)
    check_plan(snapshot, plan)
    nodes = [a.node for a in plan.assignments]
    assert len(nodes) == len(set(nodes)), "two jobs on one node"
    assert plan.policy == policy
    assert plan.stats["started"] == len(plan.assignments)
    assert plan.objective_name == "f_obj"
    assert plan.objective == pytest.approx(evaluate(snapshot, plan).f_obj)
    return plan


def placed(plan: Plan) -> dict[str, tuple[str, int]]:
    return {a.job: (a.node, a.gpus) for a in plan.assignments}


def tables_of(snapshot: Snapshot, policy: str) -> Tables:
    f1, f2 = VARIANTS[policy]
    return build_tables(compile_problem(snapshot), f1=f1, f2=f2)


# -- registry and period --------------------------------------------------------------


def test_registered_with_their_own_period() -> None:
    for name in DP:
        assert POLICIES[name].module == "andreas.optimizer.dp"
        assert POLICIES[name].period_s == 900.0
    assert POLICIES["edf"].period_s is None and POLICIES["pr"].period_s is None


def test_the_simulator_uses_the_policy_period_unless_told_otherwise() -> None:
    trace = generate_trace(n_nodes=2, seed=1, jobs_per_node=1)
    assert Simulator(trace, "dp-fastb").period == 900.0
    assert Simulator(trace, "dp-fastb").params.period_s == 900.0   # the DP's Delta t
    assert Simulator(trace, "edf").period == trace.params.period_s
    assert Simulator(trace, "dp-wct", SimOptions(period_s=600.0)).period == 600.0


# -- F1: the configuration ------------------------------------------------------------

# One job of 10 epochs: 1 GPU 1000 s (F_WCT run cost 0.025), 2 GPUs 800 s (0.0375).
@pytest.mark.parametrize("due, expected", [
    # due at the end of the step: nobody is late *by the end of the step*, so F_WCT takes
    # the cheapest node cost; F~ sees that 1 GPU would finish 100 s late (1.0 > 0.0125).
    (1000.0 + DT, {"dp-wct": 1, "dp-adjwct": 2, "dp-fastwct": 2, "dp-fastb": 2}),
    # 1 GPU is on time (1000 s < 1500 s) but postponing would not be (tau_hat = 400 s):
    # the cheapest configuration unless F1 = fastest
    (1000.0 + 1500.0, {"dp-wct": 1, "dp-adjwct": 1, "dp-fastwct": 2, "dp-fastb": 2}),
])
def test_f1_fastest_cheapest_or_adjusted(due, expected) -> None:
    s = snap([V100], [job("j", due=due)])
    for policy, gpus in expected.items():
        assert placed(checked(s, policy)) == {"j": ("n1", gpus)}, policy


def test_f1_fastest_class_then_the_next_free_one() -> None:
    # Both jobs are fastest on the V100 node; the second finds it taken and F1 falls back
    # to the T4 (the best configuration among the classes with a free node).
    s = snap([node("t", "T4", 1), node("v")], [job("a", submit=1.0), job("b", submit=2.0)])
    assert placed(checked(s, "dp-fastb")) == {"a": ("v", 2), "b": ("t", 1)}


def test_f1_wct_takes_the_cheapest_node_cost() -> None:
    # T4 at 170 W is cheaper per step than a V100 GPU (400 W) although 2.5x slower.
    s = snap([node("t", "T4", 1), node("v")], [job("a", due=1000.0 + 3000.0)])
    assert placed(checked(s, "dp-wct")) == {"a": ("t", 1)}
    assert placed(checked(s, "dp-fastwct")) == {"a": ("v", 2)}


# -- F2: run or postpone --------------------------------------------------------------


def test_f2_values_by_hand() -> None:
    # due = now + 900: 1 GPU has tau_step 0, run cost 0.025; M = 1000 s, so
    # tau_hat = 1000 + 900 + 1000 - 1900 = 1000 s and postponing costs 100 * 0.01 * 1000.
    s = snap([V100], [job("j", due=1000.0 + DT)])
    t = tables_of(s, "dp-wct")
    assert t.run[0] == pytest.approx([0.025, 0.0375])
    assert t.post[0] == pytest.approx(1000.0)
    plan = checked(s, "dp-wct")
    assert plan.stats["dp_objective"] == pytest.approx(0.025)
    # a job already 2000 s late at now: tau_step = 2000 + 900 on both configurations
    late = snap([V100], [job("j", due=1000.0 - 2000.0)])
    assert tables_of(late, "dp-wct").run[0] == pytest.approx([0.01 * 2900 + 0.025,
                                                              0.01 * 2800 + 0.0375])
    b = tables_of(s, "dp-fastb")
    assert b.b == pytest.approx(1.0 + 0.0375) and b.post[0] == pytest.approx(b.b)


def test_slack_job_waits_under_f_wct_and_runs_under_f_b() -> None:
    # tau_hat = 0 (due far away): postponing is free under F_WCT, so the job waits;
    # F_B charges B for waiting, so it runs.
    s = snap([V100], [job("j", due=1e7)])
    for policy in ("dp-wct", "dp-fastwct", "dp-adjwct"):
        plan = checked(s, policy)
        assert plan.postponed == ("j",) and plan.stats["dp_objective"] == 0.0
    assert placed(checked(s, "dp-fastb")) == {"j": ("n1", 2)}


def test_dp_is_not_fifo_greedy() -> None:
    # One node. 'a' comes first but postponing it costs little (tau_hat small, light);
    # 'b' would be much later if postponed: the DP gives the node to 'b'.
    s = snap([V100], [job("a", submit=1.0, due=1000.0 + 1850.0, weight=0.003),
                      job("b", submit=2.0, due=1000.0 + 1000.0, weight=0.015)])
    t = tables_of(s, "dp-wct")
    assert 0 < t.post[0] < t.post[1]
    plan = checked(s, "dp-wct")
    assert list(placed(plan)) == ["b"] and plan.postponed == ("a",)


# -- the DP against brute force -------------------------------------------------------


def brute_force(t: Tables) -> float:
    """Least F2 over every run/postpone subset; a run job takes its F1-best configuration
    among the resources with a free node when its FIFO turn comes."""
    best = np.inf
    for runs in itertools.product((False, True), repeat=len(t.order)):
        used = np.zeros_like(t.caps)
        cost = 0.0
        for j, run in zip(t.order, runs):
            if not run:
                cost += t.post[j]
                continue
            free = [c for c in t.pref[j] if used[t.cfg_res[c]] < t.caps[t.cfg_res[c]]]
            if not free:
                break
            used[t.cfg_res[free[0]]] += 1
            cost += t.run[j, free[0]]
        else:
            best = min(best, cost)
    return best


def tiny(seed: int, cloud: bool) -> Snapshot:
    """3 nodes (2 classes on premise), 2 to 7 jobs, due dates from late to loose."""
    rng = np.random.default_rng(seed)
    s = random_snapshot(rng, 3, 2 + seed % 6, cloud=cloud, running_share=0.3)
    jobs = tuple(dataclasses.replace(j, due_s=s.now_s + float(rng.uniform(-3e4, 3e5)))
                 for j in s.jobs)
    return dataclasses.replace(s, jobs=jobs, params=Params(period_s=DT))


@pytest.mark.parametrize("policy", DP)
@pytest.mark.parametrize("cloud", [False, True], ids=["on-premise", "cloud"])
def test_dp_equals_brute_force(policy: str, cloud: bool) -> None:
    full = idle = 0    # instances where nodes ran out / a job waited by choice
    for seed in range(18):
        s = tiny(seed, cloud)
        t = tables_of(s, policy)
        cfg, value = solve(t)
        assert value == pytest.approx(brute_force(t), rel=1e-12, abs=1e-9)
        assert objective(t, cfg) == pytest.approx(value, rel=1e-12, abs=1e-9)
        plan = checked(s, policy)
        assert plan.stats["dp_objective"] == pytest.approx(value, rel=1e-12, abs=1e-9)
        if plan.postponed:
            full += len(plan.assignments) == len(s.nodes)
            idle += len(plan.assignments) < len(s.nodes)
    assert full, "the instances must make jobs compete for nodes"
    if VARIANTS[policy][1] == "wct":
        assert idle, "and, under F_WCT, leave some job waiting by choice"


@pytest.mark.parametrize("tabled", [True, False], ids=["choices-tabled", "per-job"])
def test_three_classes_against_brute_force(tabled: bool, monkeypatch) -> None:
    # The state is a 3-vector here (V100 x2, V100 x1, T4): F1's fallback class depends on
    # which classes the earlier jobs filled. Both ways of reading F1's choices agree.
    if not tabled:
        monkeypatch.setattr(dp, "PRECOMPUTE_LIMIT", 0)
    rng = np.random.default_rng(5)
    # 4 nodes in 3 classes: 3 x 2 x 2 = 12 states and 8 sets of classes with a free node,
    # more than the 3 to 7 jobs, so F1's choices are tabled job by job here (the
    # two-class tests above table them set by set)
    nodes = [node("a"), node("b", gpus=1), node("c", "T4", 1), node("d")]
    for trial in range(10):
        jobs = [job(f"j{i}", submit=float(i), due=1000.0 + float(rng.uniform(-2000, 9000)),
                    weight=float(rng.uniform(0.003, 0.015)), epochs=int(rng.integers(5, 30)))
                for i in range(3 + trial % 5)]
        s = snap(nodes, jobs)
        for policy in DP:
            t = tables_of(s, policy)
            assert len(t.caps) == 3
            assert solve(t)[1] == pytest.approx(brute_force(t), rel=1e-12), (trial, policy)


# -- feasibility, running jobs, determinism --------------------------------------------


@pytest.mark.parametrize("policy", DP)
@pytest.mark.parametrize("cloud", [False, True], ids=["on-premise", "cloud"])
def test_feasible_one_job_per_node_on_random_snapshots(policy: str, cloud: bool) -> None:
    for seed, (n, j) in enumerate([(1, 3), (4, 10), (10, 40), (30, 150)]):
        s = random_snapshot(np.random.default_rng(seed), n, j, cloud=cloud)
        plan = checked(s, policy)
        assert len(plan.assignments) <= n
        if cloud:
            assert set(plan.node_configs) == {a.node for a in plan.assignments}


@pytest.mark.parametrize("policy", DP)
def test_deterministic(policy: str) -> None:
    s = random_snapshot(np.random.default_rng(7), 10, 40)
    a = decide(s, np.random.default_rng(1), policy)
    b = decide(s, np.random.default_rng(2), policy)
    assert a == b


def test_running_job_keeps_its_node() -> None:
    # 'r' runs on 2 GPUs of n2, its fastest configuration: it continues there although
    # n1 is identical and comes first.
    s = snap([node("n1"), node("n2")], [job("r", running=Config(node="n2", gpus=2), done=2.5),
                                        job("w", submit=5.0, due=1000.0 + 2000.0)])
    plan = checked(s, "dp-fastb")
    assert placed(plan) == {"r": ("n2", 2), "w": ("n1", 2)}
    kinds = {a.job: a.kind for a in plan.actions(s)}
    assert kinds == {"r": ActionKind.CONTINUE, "w": ActionKind.START}


@pytest.mark.parametrize("overhead, gpus", [(300.0, 1), (0.0, 2)])
def test_restart_cost_decides_resizing(overhead: float, gpus: int) -> None:
    # 'r' has done 2.5 of 10 epochs on 1 GPU (100 s / epoch; 60 s on 2). Continuing:
    # 750 s. Resizing to 2 GPUs redoes the half epoch: 8 x 60 = 480 s, plus the overhead.
    times = {"V100": (100.0, 60.0)}
    s = snap([V100], [job("r", times=times, running=Config(node="n1", gpus=1), done=2.5)],
             restart_overhead_s=overhead)
    plan = checked(s, "dp-fastb")     # fastest configuration; F_B always runs it
    assert placed(plan) == {"r": ("n1", gpus)}
    kind = {a.job: a.kind for a in plan.actions(s)}["r"]
    assert kind is (ActionKind.CONTINUE if gpus == 1 else ActionKind.RESIZE)


def test_running_jobs_may_be_postponed() -> None:
    # The paper's DP stops jobs: a running job with a loose due date is free to postpone
    # under F_WCT, and the node goes to nobody.
    s = snap([V100], [job("r", due=1e7, running=Config(node="n1", gpus=1), done=1)])
    plan = checked(s, "dp-wct")
    assert plan.postponed == ("r",)
    assert plan.actions(s)[0].kind is ActionKind.PREEMPT


# -- beyond the state cap -------------------------------------------------------------


@pytest.mark.parametrize("policy", DP)
def test_rounds_beyond_the_cap(policy: str) -> None:
    s = random_snapshot(np.random.default_rng(3), 8, 30)
    exact = checked(s, policy)
    assert exact.stats["dp_rounds"] == 0 and exact.stats["dp_states"] == 25
    capped = checked(s, policy, max_states=10)
    assert capped.stats["dp_rounds"] >= 1 and capped.stats["dp_states"] == 25
    # with more nodes than jobs the classes never run out: rounds are exact
    roomy = random_snapshot(np.random.default_rng(3), 40, 12)
    assert (decide_dp(roomy, policy, max_states=1).assignments
            == decide_dp(roomy, policy).assignments)


@pytest.mark.parametrize("policy", DP)
def test_rounds_equal_the_dp_on_one_pool(policy: str) -> None:
    s = random_snapshot(np.random.default_rng(4), 6, 25, cloud=True)
    capped = decide_dp(s, policy, max_states=1)
    assert capped.stats["dp_rounds"] >= 1
    exact = decide_dp(s, policy)
    assert capped.stats["dp_objective"] == pytest.approx(exact.stats["dp_objective"])
    assert placed(capped) == placed(exact)


# -- whole simulations ----------------------------------------------------------------


@pytest.mark.parametrize("policy", DP)
@pytest.mark.parametrize("cloud", [False, True], ids=["on-premise", "cloud"])
def test_simulation_completes_every_job(policy: str, cloud: bool) -> None:
    trace = generate_trace(n_nodes=3, seed=2, jobs_per_node=3, arrival="high", cloud=cloud)
    result = simulate(trace, policy)
    assert sorted(r.id for r in result.jobs) == sorted(j.id for j in trace.jobs)
    assert all(r.completion_s >= r.submit_s for r in result.jobs)
    assert result.optimizer_calls >= result.makespan_s / 900.0
    assert result.total_cost == pytest.approx(result.energy_cost + result.tardiness_cost)
