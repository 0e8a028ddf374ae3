"""GPU sharing: the interference model, the OJPP policies' bounds, the simulator's charges."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.cli import main
from andreas.feasibility import check_plan
from andreas.formats.trace import dump_trace
from andreas.interference import (Sharing, balance, collision_probability, device_theta,
                                  worker_theta)
from andreas.model import Demand, Energy, Job, Node, Params, Snapshot, Trace
from andreas.optimizer import decide
from andreas.resources import Ledger, demand_of
from andreas.simulator.engine import SimulationError, simulate
from andreas.simulator.results import SimOptions


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 1), max_size=6))
def test_collision_probability_is_eq_4(ps) -> None:
    """Two or more peaks at once, checked by enumerating every outcome."""
    brute = 0.0
    for outcome in itertools.product((0, 1), repeat=len(ps)):
        if sum(outcome) > 1:
            brute += math.prod(p if x else 1 - p for p, x in zip(ps, outcome))
    assert collision_probability(ps) == pytest.approx(brute, abs=1e-9)


def test_worker_theta_adds_contention_and_expected_collisions() -> None:
    model = Sharing(contention=0.1, collision_slowdown=1.0)
    me = Demand(gpu_milli=500, gpu_memory_peak_mib=1, peak_probability=0.2)
    other = Demand(gpu_milli=400, gpu_memory_peak_mib=1, peak_probability=0.5)
    assert worker_theta(me, [], model) == 0.0
    assert worker_theta(me, [other], model) == pytest.approx(0.1 * 0.4 + 0.2 * 0.5)
    assert device_theta([("a", me), ("b", other)], model) == pytest.approx(0.1 * 0.5 + 0.5 * 0.2)
    assert balance([0.1, 0.35, 0.2]) == pytest.approx(0.25)


def rigid(jid: str, milli: int, p: float = 0.0, gpus: int = 1, submit: float = 0.0,
          epoch_s: float = 100.0, epochs: int = 1) -> Job:
    return Job(id=jid, submit_s=submit, due_s=submit + 10_000, weight=1, epochs=epochs,
               epoch_time_s={"T4": (epoch_s,) * gpus},
               demand=Demand(gpus=gpus, gpu_milli=milli, gpu_memory_peak_mib=100 if p else 0,
                             peak_probability=p))


def cluster(n: int = 2, gpus: int = 4) -> tuple[Node, ...]:
    return tuple(Node(name=f"n{k}", gpu_type="T4", gpus=gpus,
                      power_w=tuple(100.0 + 50 * g for g in range(gpus + 1)))
                 for k in range(n))


def snapshot(jobs, nodes=None) -> Snapshot:
    return Snapshot(now_s=0, nodes=nodes or cluster(), jobs=tuple(jobs), energy=Energy(),
                    params=Params())


def ledger_of(s: Snapshot, plan) -> Ledger:
    led = Ledger(s.nodes)
    jobs = {j.id: j for j in s.jobs}
    for a in plan.assignments:
        led.place(demand_of(jobs[a.job], a.gpus), led.index[a.node], a.gpu_ids, a.job)
    return led


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([100, 200, 300, 500, 700, 1000]),
                          st.sampled_from([0.0, 0.1, 0.3, 0.6]), st.sampled_from([1, 1, 2])),
                min_size=1, max_size=24),
       st.sampled_from(["ojpp-greedy", "ojpp-heuristic"]))
def test_ojpp_plans_keep_every_bound(specs, policy) -> None:
    jobs = [rigid(f"j{k}", m if g == 1 else m, p, g) for k, (m, p, g) in enumerate(specs)]
    s = snapshot(jobs)
    model = Sharing()
    plan = decide(s, np.random.default_rng(0), policy, sharing=model)
    check_plan(s, plan)
    led = ledger_of(s, plan)
    for residents in led.residents.values():
        assert collision_probability(d.peak_probability for _, d in residents) \
            <= model.tau_bar + 1e-9
        assert device_theta(residents, model) <= model.theta_bar + 1e-9
    assert plan.objective == led.busy_gpus().sum()


def test_the_ablations_keep_only_their_own_bound() -> None:
    """Two slices whose peaks collide with probability 0.25 > tau_bar = 0.1 and whose
    slowdown (0.05 contention + 0.25 collisions) exceeds theta_bar: only the policies that
    enforce one of those bounds keep them apart."""
    jobs = [rigid("a", 500, 0.5), rigid("b", 500, 0.5)]
    s = snapshot(jobs, cluster(1, 2))
    devices = {p: decide(s, np.random.default_rng(0), p).objective
               for p in ("ojpp-greedy", "i-greedy", "c-greedy", "b-greedy")}
    assert devices == {"ojpp-greedy": 2, "i-greedy": 2, "c-greedy": 2, "b-greedy": 1}


def test_the_heuristic_places_the_least_gregarious_first() -> None:
    """Greedy takes the biggest demand first, the heuristic the slice that collides with
    nobody (tau(quiet, V) = 0 < tau(loud, V) = 0.9 x 0.8)."""
    jobs = [rigid("quiet", 300, 0.0), rigid("loud", 600, 0.9), rigid("loud2", 500, 0.8)]
    s = snapshot(jobs, cluster(1, 1))
    greedy = decide(s, np.random.default_rng(0), "ojpp-greedy")
    heuristic = decide(s, np.random.default_rng(0), "ojpp-heuristic")
    assert [a.job for a in greedy.assignments][0] == "loud"
    assert [a.job for a in heuristic.assignments][0] == "quiet"


def test_running_jobs_keep_their_gpus() -> None:
    s = snapshot([rigid("a", 400), rigid("b", 400)], cluster(1, 2))
    first = decide(s, np.random.default_rng(0), "ojpp-greedy")
    placed = {a.job: a for a in first.assignments}
    from dataclasses import replace as dc_replace

    from andreas.model import Config
    again = snapshot([dc_replace(j, running=Config(node="n0", gpus=1,
                                                   gpu_ids=placed[j.id].gpu_ids))
                      for j in s.jobs] + [rigid("c", 400)], cluster(1, 2))
    second = decide(again, np.random.default_rng(0), "ojpp-greedy")
    assert {a.job: a.gpu_ids for a in second.assignments if a.job != "c"} == \
        {k: a.gpu_ids for k, a in placed.items()}
    assert all(act.kind.value in ("continue", "start") for act in second.actions(again))


def test_the_simulator_charges_interference_and_repaces_when_a_resident_leaves() -> None:
    """Two halves of one GPU, contention 0.1: each runs 5 % slower while both are there.
    a (100 s alone) ends at 105 s; b (200 s alone) has then done 100 s of work and does the
    other 100 s alone: it ends at 205 s."""
    trace = Trace(nodes=cluster(1, 1), name="pair",
                  jobs=(rigid("a", 500), rigid("b", 500, epoch_s=200.0)))
    res = simulate(trace, "first-fit", SimOptions(progress="exact", period_s=0))
    end = {r.id: r.completion_s for r in res.jobs}
    assert end == {"a": pytest.approx(105.0), "b": pytest.approx(205.0)}
    perf = {r.id: r.performance for r in res.jobs}
    assert perf["a"] == pytest.approx(1 / 1.05)
    assert perf["b"] == pytest.approx((100 + 100) / 205)
    assert res.device_hours == pytest.approx(205 / 3600)
    assert res.gpu_utilization == pytest.approx((1000 * 105 + 500 * 100) / (1000 * 205))
    assert res.mean_slowdown == pytest.approx((105 / 100 + 205 / 200) / 2)


def test_gpu_utilization_over_the_scheduling_window_leaves_the_drain_out() -> None:
    """One node of 2 GPUs: a holds both for 100 s; b (50 s) and c (1 000 s) wait for them
    and start at 100 s, the last start. Over [0, 100 s] both GPUs are held (1.0); over the
    makespan the drain, c alone until 1 100 s, weighs in."""
    trace = Trace(nodes=cluster(1, 2), name="drain",
                  jobs=(rigid("a", 1000, gpus=2), rigid("b", 1000, submit=10.0, epoch_s=50.0),
                        rigid("c", 1000, submit=20.0, epoch_s=1000.0)))
    for policy in ("first-fit", "round-robin", "tetris"):
        res = simulate(trace, policy, SimOptions(progress="exact", period_s=0))
        assert res.makespan_s == pytest.approx(1100.0)
        assert res.scheduling_window_s == pytest.approx(100.0)
        assert res.gpu_utilization_scheduling == pytest.approx(1.0)
        assert res.gpu_utilization == pytest.approx(
            (2000 * 150 + 1000 * 950) / (2000 * 1100))


def test_a_scheduling_window_of_no_length_reads_the_allocation_after_the_first_start() -> None:
    trace = Trace(nodes=cluster(1, 2), name="at-once",
                  jobs=(rigid("a", 500), rigid("b", 1000, epoch_s=300.0)))
    res = simulate(trace, "first-fit", SimOptions(progress="exact", period_s=0))
    assert res.scheduling_window_s == 0.0
    assert res.gpu_utilization_scheduling == pytest.approx(1500 / 2000)


def test_exclusive_best_fit_spends_device_hours_that_sharing_saves() -> None:
    trace = Trace(nodes=cluster(1, 2), name="two",
                  jobs=(rigid("a", 400), rigid("b", 400)))
    shared = simulate(trace, "ojpp-greedy", SimOptions(period_s=0))
    alone = simulate(trace, "best-fit", SimOptions(period_s=0))
    assert alone.device_hours == pytest.approx(2 * 100 / 3600)
    assert shared.device_hours == pytest.approx(104 / 3600)   # one GPU, 4 % slower
    assert alone.performance_retained == 1.0
    assert shared.performance_retained == pytest.approx(1 / 1.04)


def test_policies_of_elastic_jobs_only_refuse_multi_resource_traces() -> None:
    trace = Trace(nodes=cluster(1, 1), name="t", jobs=(rigid("a", 500),))
    for policy in ("pr", "edf", "milp"):
        with pytest.raises(SimulationError, match=f"policy {policy}: plans whole dedicated GPUs"):
            simulate(trace, policy)


def test_simulate_prints_the_sharing_figures(tmp_path: Path) -> None:
    jobs = tuple(rigid(f"j{k}", [250, 500, 1000][k % 3], [0.0, 0.2][k % 2],
                       submit=30.0 * k, epochs=3) for k in range(24))
    path = tmp_path / "t.json"
    dump_trace(Trace(nodes=cluster(2, 2), jobs=jobs, name="share"), path)
    result = CliRunner().invoke(main, [
        "simulate", "--trace", str(path), "--policies", "best-fit,ojpp-greedy,ojpp-heuristic",
        "--json", "--workers", "1", "--out", str(tmp_path / "out"), "--theta-bar", "0.2"])
    assert result.exit_code == 0, result.output
    rows = {r["policy"]: r for r in json.loads(result.stdout)}
    assert set(rows) == {"best-fit", "ojpp-greedy", "ojpp-heuristic"}
    for r in rows.values():
        for key in ("total_cost", "energy_kwh", "tardiness_cost", "device_hours",
                    "performance_retained", "gpu_utilization", "gpu_utilization_scheduling",
                    "mean_jct_s", "mean_slowdown"):
            assert isinstance(r[key], float) and math.isfinite(r[key]), key
        assert r["options"]["sharing"]["theta_bar"] == 0.2
    assert rows["best-fit"]["performance_retained"] == 1.0
    assert rows["ojpp-greedy"]["device_hours"] < rows["best-fit"]["device_hours"]
    assert (tmp_path / "out" / "occupancy-ojpp-greedy.png").stat().st_size > 0


def running(j: Job, node: str, slot: int, slowdown: float, done: float = 0.5) -> Job:
    from dataclasses import replace as dc_replace

    from andreas.model import Config
    return dc_replace(j, epochs_done=done,
                      running=Config(node=node, gpus=1, gpu_ids=(slot,), slowdown=slowdown))


def test_ojpap_moves_only_on_sustained_interference_within_its_budget() -> None:
    """a and b share GPU 0 (predicted theta 0.05 each); they measure 0.15 > theta_bar 0.1.
    One measurement (EWMA 0.075 from a zero start) moves nothing, the second (0.1125) moves
    the one cheaper to move (less work since its checkpoint) to the free GPU."""
    nodes = cluster(1, 2)
    a, b = rigid("a", 500, epochs=4), rigid("b", 500, epochs=4)
    s = snapshot([running(a, "n0", 0, 0.15, done=1.5), running(b, "n0", 0, 0.15, done=1.2)],
                 nodes)
    state: dict = {}
    rng = np.random.default_rng(0)
    first = decide(s, rng, "ojpap", state=state)
    assert first.stats["moves"] == 0 and first.stats["max_ewma_theta"] == pytest.approx(0.075)
    second = decide(s, rng, "ojpap", state=state)
    assert second.stats["moves"] == 1
    check_plan(s, second)
    moved = [act for act in second.actions(s) if act.kind.value == "move"]
    assert [(m.job, m.gpu_ids) for m in moved] == [("b", (1,))]
    assert second.stats["migration_cost_s"] == pytest.approx(0.2 * 100)
    # the learned ratio (3x the prediction) keeps b from being put back next to a
    assert state["scale"] == {"a": pytest.approx(3.0), "b": pytest.approx(3.0)}
    broke = Sharing(migration_budget_s=10.0)        # b's move costs 20 s of work
    poor: dict = {}
    decide(s, rng, "ojpap", state=poor, sharing=broke)
    assert decide(s, rng, "ojpap", state=poor, sharing=broke).stats["moves"] == 0


def test_ojpap_is_ojpp_heuristic_when_the_model_is_exact_and_helps_when_it_is_not() -> None:
    jobs = tuple(rigid(f"j{k}", [200, 300, 450, 600][k % 4], [0.0, 0.05, 0.1, 0.2][k // 4 % 4],
                       submit=20.0 * k, epochs=6, epoch_s=60.0) for k in range(80))
    trace = Trace(nodes=cluster(2, 4), jobs=jobs, name="drift")
    model = Sharing(theta_bar=0.15)
    exact = {p: simulate(trace, p, SimOptions(sharing=model)) for p in ("ojpp-heuristic",
                                                                         "ojpap")}
    assert exact["ojpap"].jobs == exact["ojpp-heuristic"].jobs
    off = {p: simulate(trace, p, SimOptions(sharing=model, interference_error=0.8))
           for p in ("ojpp-heuristic", "ojpap")}
    assert off["ojpap"].migrations > 0
    assert off["ojpap"].performance_retained > off["ojpp-heuristic"].performance_retained


def test_f_obj_charges_a_shared_gpu_once_and_the_slowdown_in_lateness() -> None:
    from andreas.costs import c_ng_per_hour, evaluate
    from andreas.model import Assignment, Plan
    nodes = cluster(1, 2)            # power 100 / 150 / 200 W with 0 / 1 / 2 GPUs busy
    a, b = rigid("a", 500), rigid("b", 500)
    a = Job(**{**a.__dict__, "epoch_time_s": dict(a.epoch_time_s), "due_s": 50.0})
    s = snapshot([a, b], nodes)
    together = Plan(policy="t", assignments=(Assignment(job="a", node="n0", gpus=1, gpu_ids=(0,)),
                                             Assignment(job="b", node="n0", gpus=1, gpu_ids=(0,))),
                    postponed=(), objective=0, objective_name="f_obj")
    apart = Plan(policy="t", assignments=(Assignment(job="a", node="n0", gpus=1, gpu_ids=(0,)),
                                          Assignment(job="b", node="n0", gpus=1, gpu_ids=(1,))),
                 postponed=(), objective=0, objective_name="f_obj")
    shared, alone = evaluate(s, together), evaluate(s, apart)
    # 1.05 x 100 s each; a is due at 50 s: 55 s late instead of 50
    assert shared.tardiness_cost == pytest.approx(55.0)
    assert alone.tardiness_cost == pytest.approx(50.0)
    assert shared.node_cost == pytest.approx(105 / 3600 * c_ng_per_hour(150, s.energy))
    assert alone.node_cost == pytest.approx(100 / 3600 * c_ng_per_hour(200, s.energy))


def test_rg_shares_a_gpu_exactly_when_that_lowers_the_bill_plus_lateness() -> None:
    """Two half-GPU tasks on a node whose GPUs draw 1 kW each: with loose due dates rg puts
    them on one GPU (the second GPU's power saved); when 5 % slowdown would make a heavy
    job late, it gives each its own GPU."""
    node = Node(name="n0", gpu_type="T4", gpus=2, power_w=(100.0, 1100.0, 2100.0))
    loose = snapshot([rigid("a", 500), rigid("b", 500)], (node,))
    tight_a = Job(**{**rigid("a", 500).__dict__, "epoch_time_s": {"T4": (100.0,)},
                     "due_s": 101.0, "weight": 1000.0})
    tight = snapshot([tight_a, rigid("b", 500)], (node,))
    for policy in ("greedy", "rg"):
        share = decide(loose, np.random.default_rng(0), policy)
        assert share.stats["devices"] == 1, policy
        check_plan(loose, share)
        apart = decide(tight, np.random.default_rng(0), policy)
        assert apart.stats["devices"] == 2, policy
        assert not apart.postponed
