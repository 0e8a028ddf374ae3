"""The discrete-event simulator: hand-checked traces, conservation laws, reproducibility."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.errors import InputError
from andreas.model import CatalogEntry, Job, Node, Trace
from andreas.simulator.engine import SimulationError, simulate
from andreas.simulator.results import SimOptions
from andreas.synthetic import random_snapshot

PUE, PRICE = 1.33, 0.172


def kwh_cost(joules: float) -> float:
    return joules / 3.6e6 * PUE * PRICE


def v100_node() -> Node:
    return Node(name="n1", gpu_type="V100", gpus=2, power_w=(280.0, 490.0, 700.0))


def test_fifo_two_jobs_on_one_node_by_hand() -> None:
    # A: 10 epochs of 100 s (1 GPU) / 60 s (2 GPUs). 2 GPUs: 600 s at 700 W = 420 kJ beats
    # 1 GPU: 1000 s at 490 W = 490 kJ, both on time -> A runs 0..600 on 2 GPUs.
    # B (submitted at 100) waits for the node (one job per node), runs 600..900 on 2 GPUs,
    # due 800: 100 s late at 0.02 per s = 2.0.
    jobs = (Job(id="A", submit_s=0, due_s=2000, weight=0.01, epochs=10,
                epoch_time_s={"V100": (100.0, 60.0)}),
            Job(id="B", submit_s=100, due_s=800, weight=0.02, epochs=5,
                epoch_time_s={"V100": (100.0, 60.0)}))
    trace = Trace(nodes=(v100_node(),), jobs=jobs, name="hand")
    for period in (None, 0.0):
        r = simulate(trace, "fifo", SimOptions(period_s=period))
        rec = {j.id: j for j in r.jobs}
        assert rec["A"].first_start_s == 0 and rec["A"].completion_s == pytest.approx(600)
        assert rec["B"].first_start_s == pytest.approx(600)
        assert rec["B"].completion_s == pytest.approx(900)
        assert rec["B"].tardiness_cost == pytest.approx(2.0) and rec["A"].tardiness_s == 0
        assert r.energy_kwh == pytest.approx(900 * 700 / 3.6e6)
        assert r.energy_cost == pytest.approx(kwh_cost(900 * 700))
        assert rec["A"].energy_kwh == pytest.approx(600 * 700 / 3.6e6)
        assert r.total_cost == pytest.approx(2.0 + kwh_cost(900 * 700))
        assert r.late_jobs == 1 and r.makespan_s == pytest.approx(900)


def _preemption_trace() -> Trace:
    # One T4 (160 W idle, 220 W busy). A (loose due date) starts at 0; urgent B arrives at
    # 250 with higher pressure, so greedy gives B the GPU and preempts A after 2.5 epochs.
    node = Node(name="t", gpu_type="T4", gpus=1, power_w=(160.0, 220.0))
    jobs = (Job(id="A", submit_s=0, due_s=10_000, weight=0.001, epochs=10,
                epoch_time_s={"T4": (100.0,)}),
            Job(id="B", submit_s=250, due_s=500, weight=0.01, epochs=2,
                epoch_time_s={"T4": (100.0,)}))
    return Trace(nodes=(node,), jobs=jobs, name="preempt")


@pytest.mark.parametrize("mode,overhead,a_end", [
    ("epoch", 0.0, 1250.0),   # A redoes the half epoch: 8 epochs left at 450
    ("exact", 0.0, 1200.0),   # A keeps 2.5 epochs: 7.5 left at 450
    ("epoch", 30.0, 1280.0),  # plus 30 s to restart from the checkpoint
])
def test_preempted_job_restarts_its_epoch_from_the_checkpoint(mode, overhead, a_end) -> None:
    r = simulate(_preemption_trace(), "greedy",
                 SimOptions(progress=mode, restart_overhead_s=overhead))
    rec = {j.id: j for j in r.jobs}
    assert rec["B"].first_start_s == pytest.approx(250)
    assert rec["B"].completion_s == pytest.approx(450) and rec["B"].tardiness_s == 0
    assert rec["A"].completion_s == pytest.approx(a_end)
    assert rec["A"].preemptions == 1 and rec["A"].starts == 2
    assert r.preemptions == 1
    assert r.energy_kwh == pytest.approx(a_end * 220 / 3.6e6)   # busy the whole time
    assert [(a.job, a.start_s, a.end_s) for a in r.attempts] == [
        ("A", 0.0, 250.0), ("B", 250.0, 450.0), ("A", 450.0, a_end)]


def test_idle_nodes_draw_idle_power_unless_powered_off() -> None:
    nodes = (v100_node(), Node(name="n2", gpu_type="V100", gpus=2,
                               power_w=(280.0, 490.0, 700.0)))
    job = Job(id="A", submit_s=0, due_s=2000, weight=0.01, epochs=10,
              epoch_time_s={"V100": (100.0, 60.0)})
    trace = Trace(nodes=nodes, jobs=(job,))
    on = simulate(trace, "greedy")
    off = simulate(trace, "greedy", SimOptions(power_off_idle=True))
    assert on.energy_kwh == pytest.approx((600 * 700 + 600 * 280) / 3.6e6)
    assert off.energy_kwh == pytest.approx(600 * 700 / 3.6e6)


@pytest.mark.parametrize("idle_s, joules, end_b, wakeups", [
    (0.0, 1000 * 300 + 50 * 100 + 1000 * 300, 6050.0, 1),        # off at once, woken for B
    (2000.0, 1000 * 300 + 2000 * 100 + 50 * 100 + 1000 * 300, 6050.0, 1),   # off at 3000
    (5000.0, 1000 * 300 + 4000 * 100 + 1000 * 300, 6000.0, 0),   # never idle long enough
])
def test_power_down_charges_the_wake_up(idle_s, joules, end_b, wakeups) -> None:
    """A node switched on for a job draws its idle power for wake_s, and the job begins
    after it (energy, completion time and tardiness see it)."""
    node = Node(name="n1", gpu_type="V100", gpus=2, power_w=(100.0, 300.0, 500.0))
    jobs = tuple(Job(id=i, submit_s=t, due_s=t + 1000, weight=1.0, epochs=10,
                     epoch_time_s={"V100": (100.0,)}) for i, t in (("A", 0.0), ("B", 5000.0)))
    r = simulate(Trace(nodes=(node,), jobs=jobs),
                 "greedy", SimOptions(power_off_idle=True, power_idle_s=idle_s, wake_s=50.0))
    assert r.energy_kwh == pytest.approx(joules / 3.6e6)
    b = next(j for j in r.jobs if j.id == "B")
    assert b.completion_s == pytest.approx(end_b) and r.wakeups == wakeups
    assert b.tardiness_s == pytest.approx(end_b - 6000.0)


def test_power_down_options_are_checked() -> None:
    with pytest.raises(InputError, match="wake_s: must be a number 0-86400, got -1"):
        SimOptions(power_off_idle=True, wake_s=-1)
    with pytest.raises(InputError, match="wake_s: must be a number 0-86400, got 1e"):
        SimOptions(power_off_idle=True, wake_s=1e308)        # hung the simulation (issue 32)
    with pytest.raises(InputError, match=r"ga_population: must be an integer in \[1, 10000\]"):
        SimOptions(ga_population=10**9)


def test_cloud_vm_costs_its_price_while_it_runs_a_job() -> None:
    catalog = (CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=0.56),
               CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=1.13))
    job = Job(id="A", submit_s=0, due_s=100_000, weight=0.01, epochs=36,
              epoch_time_s={"K80": (100.0, 90.0)})
    trace = Trace(nodes=(Node(name="vm1"), Node(name="vm2")), jobs=(job,), catalog=catalog)
    r = simulate(trace, "greedy")
    # cheapest on time: NC6, 3600 s -> 0.56 (NC12 with 2 GPUs: 3240 s * 1.13/h = 1.017)
    assert r.energy_cost == pytest.approx(0.56)
    assert r.jobs[0].energy_cost == pytest.approx(0.56)
    assert r.total_cost == pytest.approx(0.56)


def random_trace(seed: int, nodes: int, jobs: int, cloud: bool = False) -> Trace:
    rng = np.random.default_rng(seed)
    snap = random_snapshot(rng, nodes, jobs, scenario=int(rng.integers(1, 3)), cloud=cloud,
                           running_share=0.0)
    submits = np.sort(rng.uniform(0, 30_000, size=jobs))
    out = []
    for job, submit in zip(snap.jobs, submits):
        shift = submit - job.submit_s
        out.append(Job(id=job.id, app=job.app, submit_s=float(submit),
                       due_s=job.due_s + shift, weight=job.weight, epochs=job.epochs,
                       epoch_time_s=dict(job.epoch_time_s)))
    return Trace(nodes=snap.nodes, jobs=tuple(out), catalog=snap.catalog, name=f"r{seed}")


def _max_gpus_in_use(attempts, trace: Trace) -> dict[str, int]:
    events = defaultdict(list)
    for a in attempts:
        if a.end_s > a.start_s:
            events[a.node] += [(a.start_s, a.gpus), (a.end_s, -a.gpus)]
    peak = {}
    for node, ev in events.items():
        level = top = 0
        for _, d in sorted(ev, key=lambda x: (x[0], x[1])):   # releases before starts
            level += d
            top = max(top, level)
        peak[node] = top
    return peak


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(
    ["fifo", "edf", "priority", "greedy", "rg", "pr"]), mode=st.sampled_from(["epoch", "exact"]),
    cloud=st.booleans())
@pytest.mark.slow
def test_conservation_on_random_traces(seed: int, policy: str, mode: str, cloud: bool) -> None:
    trace = random_trace(seed, 4, 14, cloud=cloud)
    r = simulate(trace, policy, SimOptions(iterations=30, progress=mode, power_off_idle=True))
    # every job completes exactly once, after it was submitted
    assert sorted(j.id for j in r.jobs) == sorted(j.id for j in trace.jobs)
    for rec in r.jobs:
        assert rec.completion_s > rec.first_start_s >= rec.submit_s - 1e-9
    # GPU-seconds charged to nodes == GPU-seconds used by jobs == the attempts' area
    used = sum(j.gpu_seconds for j in r.jobs)
    area = sum(a.gpus * (a.end_s - a.start_s) for a in r.attempts)
    assert r.busy_gpu_seconds == pytest.approx(used) and used == pytest.approx(area)
    # with idle nodes off, every joule (or VM euro) is attributed to some job
    if cloud:
        assert r.energy_cost == pytest.approx(sum(j.energy_cost for j in r.jobs))
    else:
        assert r.energy_kwh == pytest.approx(sum(j.energy_kwh for j in r.jobs))
    # no node over capacity at any instant
    caps = {n.name: n.gpus for n in trace.nodes}
    if cloud:
        caps = {n.name: max(c.gpus for c in trace.catalog) for n in trace.nodes}
    for node, peak in _max_gpus_in_use(r.attempts, trace).items():
        assert peak <= caps[node]
    # the total is its parts
    assert r.total_cost == pytest.approx(r.energy_cost + r.tardiness_cost)
    assert r.tardiness_cost == pytest.approx(sum(j.tardiness_cost for j in r.jobs))


@pytest.mark.parametrize("policy", ["edf", "rg", "pr"])
def test_a_fixed_seed_gives_the_same_results(policy: str) -> None:
    trace = random_trace(3, 5, 20)
    a = simulate(trace, policy, SimOptions(iterations=50, seed=7))
    b = simulate(trace, policy, SimOptions(iterations=50, seed=7))
    timing = ("wall_s", "optimizer_mean_s", "optimizer_max_s", "optimizer_total_s")
    sa = {k: v for k, v in a.summary().items() if k not in timing}
    sb = {k: v for k, v in b.summary().items() if k not in timing}
    assert sa == sb
    assert a.jobs == b.jobs and a.attempts == b.attempts


def _nothing(snapshot, rng):
    """A policy that never runs anything."""
    from andreas.model import Plan

    return Plan(policy="nothing", assignments=(), postponed=tuple(j.id for j in snapshot.jobs),
                objective=0.0, objective_name="f_obj")


def test_a_policy_that_never_runs_anything_is_reported_not_looped(monkeypatch) -> None:
    from andreas.policies import POLICIES, PolicySpec

    monkeypatch.setitem(POLICIES, "nothing", PolicySpec(
        name="nothing", module="tests.simulator.test_simulator", function="_nothing", summary=""))
    trace = _preemption_trace()
    with pytest.raises(SimulationError, match="no event left"):
        simulate(trace, "nothing", SimOptions(period_s=0.0))
    with pytest.raises(SimulationError, match="empty cluster"):
        simulate(trace, "nothing")
