"""The lower bounds (cloud, on premise): hand-computed cases, and below every policy's
simulated bill."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.errors import InputError
from andreas.model import CatalogEntry, Job, Node, Trace
from andreas.simulator.bounds import (cloud_capacity_bound, cloud_lower_bound, gpu_offers,
                                     job_bound, lower_bound, onprem_lower_bound)
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
from tests.simulator.test_simulator import random_trace

CATALOG = (CatalogEntry(name="one", gpu_type="K80", gpus=1, cost_per_hour=0.60),
           CatalogEntry(name="two", gpu_type="K80", gpus=2, cost_per_hour=1.00))


def job(due_s: float, weight: float = 0.01) -> Job:
    # 10 epochs: 360 s each on 1 GPU (1 h), 240 s each on 2 GPUs (40 min)
    return Job(id="a", submit_s=100.0, due_s=due_s, weight=weight, epochs=10,
               epoch_time_s={"K80": (360.0, 240.0)})


def test_gpu_price_is_the_cheapest_per_gpu_of_its_type() -> None:
    assert gpu_offers(CATALOG) == {"K80": (pytest.approx(0.50), 2)}


def test_ample_slack_takes_the_cheapest_configuration() -> None:
    # 1 GPU for 1 h at 0.50 $/GPU-h = 0.50; 2 GPUs for 2/3 h = 0.667
    assert job_bound(job(due_s=100.0 + 10_000), CATALOG) == pytest.approx(0.50)


def test_a_due_date_between_two_configurations_mixes_them() -> None:
    # 3000 s to the due date: x of the work on 2 GPUs (2400 s), the rest on 1 (3600 s):
    # 2400 x + 3600 (1 - x) = 3000 -> x = 0.5; 0.5 * 0.667 + 0.5 * 0.50 = 0.5833
    assert job_bound(job(due_s=3100.0), CATALOG) == pytest.approx(0.5 * 2 / 3 + 0.25)


def test_lateness_costs_when_no_configuration_is_on_time() -> None:
    # 2000 s: the fastest (2400 s) is 400 s late: 0.667 + 0.01 * 400 = 4.667;
    # the slowest is 1600 s late: 0.5 + 16 = 16.5
    assert job_bound(job(due_s=2100.0), CATALOG) == pytest.approx(2 / 3 + 4.0)


def test_a_job_that_runs_on_no_vm_is_refused() -> None:
    odd = Job(id="x", submit_s=0, due_s=10, weight=1, epochs=1, epoch_time_s={"V100": (1.0,)})
    with pytest.raises(InputError, match="job x: no epoch time on any VM"):
        job_bound(odd, CATALOG)


def test_on_premise_traces_have_no_cloud_bound() -> None:
    trace = Trace(nodes=(Node(name="n", gpu_type="K80", gpus=1, power_w=(50.0, 200.0)),),
                  jobs=(job(5000.0),), name="p")
    with pytest.raises(InputError, match="cloud traces only"):
        cloud_lower_bound(trace)
    with pytest.raises(InputError, match="needs an on-premise trace"):
        onprem_lower_bound(Trace(nodes=(Node(name="vm1"),), jobs=(job(5000.0),),
                                 catalog=CATALOG, name="c"))


def test_on_premise_bound_of_one_job_alone() -> None:
    # one 2-GPU node, idle 100 W, 1 GPU busy 300 W, 2 busy 400 W: envelope 150 W per busy
    # GPU. The job: 10 epochs of 360 s on 1 GPU (1 h), 240 s on 2 (40 min), due in
    # 10 000 s. On 1 GPU: 150 Wh busy + 100 W idle draw for the 1 h makespan = 250 Wh; on
    # 2 GPUs: 200 Wh + 66.7 Wh = 266.7 Wh; the bound is 250 Wh, at 1 / kWh (PUE 1). The
    # best real schedule is 2 GPUs at 400 W for 40 min (266.7 Wh; 1 GPU: 300 Wh).
    from andreas.model import Energy
    node = Node(name="n", gpu_type="K80", gpus=2, power_w=(100.0, 300.0, 400.0))
    trace = Trace(nodes=(node,), jobs=(job(due_s=100.0 + 10_000),), name="p",
                  energy=Energy(pue=1.0, price_per_kwh=1.0))
    b = onprem_lower_bound(trace)
    assert b.total_cost == pytest.approx(0.25, abs=1e-5) and b.tardiness_cost < 1e-6
    r = simulate(trace, "greedy", SimOptions(period_s=0, progress="exact"))
    assert r.total_cost == pytest.approx(0.2667, abs=1e-4)
    assert r.total_cost >= b.total_cost


def two_jobs_one_gpu() -> Trace:
    """Two 1-h jobs due 1 h after their common submission on one 1-GPU node drawing
    100 W busy (weight 0.01 / s, PUE 1, 1 per kWh): one of them is 1 h late whatever the
    schedule."""
    from andreas.model import Energy
    node = Node(name="n", gpu_type="K80", gpus=1, power_w=(0.0, 100.0))
    jobs = tuple(Job(id=i, submit_s=0.0, due_s=3600.0, weight=0.01, epochs=10,
                     epoch_time_s={"K80": (360.0,)}) for i in ("a", "b"))
    return Trace(nodes=(node,), jobs=jobs, name="p",
                 energy=Energy(pue=1.0, price_per_kwh=1.0))


def test_on_premise_bound_charges_lateness_capacity_forces() -> None:
    # two 1-hour jobs on one 1-GPU node, both due 1 h after their common submission: one
    # of them ends 1 h late whatever the schedule (weight 0.01 / s: 36); the relaxation,
    # sharing the GPU fluidly, still owes the hour of work left after the due date
    trace = two_jobs_one_gpu()
    b = onprem_lower_bound(trace, slot_s=60.0)
    r = simulate(trace, "edf", SimOptions(period_s=0, progress="exact"))
    assert r.tardiness_cost == pytest.approx(36.0)
    assert b.tardiness_cost == pytest.approx(36.0, rel=1e-6)
    assert b.total_cost <= r.total_cost + 1e-9


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["edf", "greedy", "rg", "pr"]),
       mode=st.sampled_from(["epoch", "exact"]))
@pytest.mark.slow
def test_no_policy_bills_less_than_the_on_premise_bound(seed: int, policy: str,
                                                        mode: str) -> None:
    trace = random_trace(seed, 2, 8)
    r = simulate(trace, policy, SimOptions(iterations=20, progress=mode))
    assert onprem_lower_bound(trace).total_cost <= r.total_cost + 1e-9


def test_one_job_alone_is_billed_exactly_its_bound() -> None:
    trace = Trace(nodes=(Node(name="vm1"),), jobs=(job(due_s=100.0 + 10_000),),
                  catalog=CATALOG[:1], name="alone")
    r = simulate(trace, "greedy", SimOptions(period_s=0, progress="exact"))
    assert r.total_cost == pytest.approx(cloud_lower_bound(trace)) == pytest.approx(0.60)


def test_a_vm_with_an_idle_gpu_bills_above_the_bound() -> None:
    # the bound prices a GPU at the 2-GPU VM's 0.50 $/h; alone, the job leaves one idle
    trace = Trace(nodes=(Node(name="vm1"),), jobs=(job(due_s=100.0 + 10_000),),
                  catalog=CATALOG, name="alone")
    r = simulate(trace, "greedy", SimOptions(period_s=0, progress="exact"))
    assert cloud_lower_bound(trace) == pytest.approx(0.50)
    assert r.total_cost == pytest.approx(0.60)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["edf", "greedy", "rg", "pr"]),
       mode=st.sampled_from(["epoch", "exact"]))
@pytest.mark.slow
def test_no_policy_bills_less_than_the_bound(seed: int, policy: str, mode: str) -> None:
    trace = random_trace(seed, 3, 10, cloud=True)
    r = simulate(trace, policy, SimOptions(iterations=20, progress=mode, period_s=0))
    assert cloud_lower_bound(trace) <= r.total_cost + 1e-9


def test_cloud_capacity_bound_charges_the_wait_for_a_full_node() -> None:
    # one node, the 1-GPU VM only: two 1-h jobs due in 1 h, one waits the hour (36 at
    # 0.01 / s), which the per-job bound cannot see
    jobs = tuple(dataclasses.replace(job(due_s=100.0 + 3600.0), id=i) for i in ("a", "b"))
    trace = Trace(nodes=(Node(name="vm1"),), jobs=jobs, catalog=CATALOG[:1], name="full")
    lp = cloud_capacity_bound(trace, slot_s=60.0)
    assert cloud_lower_bound(trace) == pytest.approx(1.20)
    assert lp.tardiness_cost == pytest.approx(36.0, rel=1e-6)
    assert lower_bound(trace) == pytest.approx(lp.total_cost) == pytest.approx(37.2, rel=1e-6)
    r = simulate(trace, "edf", SimOptions(period_s=0, progress="exact"))
    assert r.total_cost == pytest.approx(37.2) and lower_bound(trace) <= r.total_cost + 1e-9


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["greedy", "pr"]))
def test_no_policy_bills_less_than_the_cloud_capacity_bound(seed: int, policy: str) -> None:
    trace = random_trace(seed, 2, 8, cloud=True)
    r = simulate(trace, policy, SimOptions(iterations=20))
    assert lower_bound(trace) <= r.total_cost + 1e-9


def test_device_hours_bound_counts_slices_by_their_share() -> None:
    from andreas.model import Demand
    from andreas.simulator.bounds import device_hours_bound

    def task(i: str, gpus: int, milli: int) -> Job:
        # 6 epochs of 600 s on the fastest type: 1 h per worker
        return Job(id=i, submit_s=0, due_s=1e6, weight=0.0, epochs=6,
                   epoch_time_s={"V100": (600.0, 600.0), "T4": (900.0, 900.0)},
                   demand=Demand(gpus=gpus, gpu_milli=milli))

    trace = Trace(nodes=(Node(name="n", gpu_type="V100", gpus=2, power_w=(0.0, 1.0, 2.0)),),
                  jobs=(task("a", 2, 1000), task("b", 1, 250), task("c", 1, 500)), name="s")
    assert device_hours_bound(trace) == pytest.approx((2 + 0.25 + 0.5, 4.0))
    elastic = Trace(nodes=trace.nodes, jobs=(job(5000.0),), name="e")
    with pytest.raises(InputError, match="job a: device-hours bounds need rigid tasks"):
        device_hours_bound(elastic)


def test_no_sharing_policy_occupies_fewer_device_hours_than_the_bound() -> None:
    from pathlib import Path

    from andreas.simulator.alibaba import import_alibaba
    from andreas.simulator.bounds import device_hours_bound

    data = Path(__file__).resolve().parents[1] / "data" / "alibaba"
    trace, _ = import_alibaba(data / "openb_pod_list_excerpt.csv",
                              data / "openb_node_list_excerpt.csv")
    least, exclusive = device_hours_bound(trace)
    assert 0 < least < exclusive
    for policy in ("best-fit", "ojpp-greedy", "first-fit"):
        r = simulate(trace, policy, SimOptions(seed=1))
        assert r.device_hours >= least * (1 - 1e-9), policy


@pytest.mark.slow
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["greedy", "horizon"]))
def test_the_integral_bound_lies_between_the_lp_and_every_bill(seed: int,
                                                               policy: str) -> None:
    # the integral model forbids thin slices of work spread over many slots: solved, it
    # can only raise the relaxation's figure, and it stays a bound on every schedule
    trace = random_trace(seed, 2, 6)
    lp = onprem_lower_bound(trace).total_cost
    mip = onprem_lower_bound(trace, integral=True, time_limit_s=10.0)
    r = simulate(trace, policy, SimOptions(iterations=20))
    assert mip.total_cost <= r.total_cost + 1e-9
    if mip.status == "optimal":       # stopped by its clock, the dual bound may be weaker
        assert lp * (1 - 1e-6) <= mip.total_cost
