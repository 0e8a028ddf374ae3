"""The multi-resource model: the ledger, the plan check through it, the file fields."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.errors import InfeasiblePlan, InputError
from andreas.feasibility import check_plan
from andreas.formats.trace import dumps_trace, parse_trace
from andreas.model import (Assignment, Config, Demand, Energy, Job, Node, Params, Plan,
                           Snapshot, Trace)
from andreas.resources import Ledger, held_milli


def node(name: str = "n", gpus: int = 2, **caps) -> Node:
    return Node(name=name, gpu_type="T4", gpus=gpus, power_w=tuple(range(100, 100 * gpus + 101,
                                                                          100)), **caps)


def job(jid: str, demand: Demand | None = None, running: Config | None = None) -> Job:
    g = demand.gpus if demand else 2
    return Job(id=jid, submit_s=0, due_s=100, weight=1, epochs=2,
               epoch_time_s={"T4": (10.0,) * g}, demand=demand, running=running)


def test_whole_gpus_take_the_lowest_free_and_slices_the_fullest_gpu() -> None:
    led = Ledger([node(gpus=4)])
    whole = Demand(gpus=2)
    assert led.fit(whole, 0) == (0, 1)
    led.place(whole, 0, (0, 1), "a")
    small, big = Demand(gpu_milli=300), Demand(gpu_milli=600)
    led.place(big, 0, (2,), "b")
    # 400 free on GPU 2, 1000 on GPU 3: the slice joins GPU 2 (best fit) ...
    assert led.fit(small, 0) == (2,)
    # ... unless it does not fit there
    assert led.fit(Demand(gpu_milli=500), 0) == (3,)
    assert led.fit(Demand(gpus=2), 0) is None
    assert str(led.shortfall(Demand(gpus=2), 0)) == "whole free GPUs: needs 2, 1 free"
    assert led.busy_gpus_of(0) == 3
    assert led.allocated_milli() == 2600
    assert [o for o, _ in led.on_gpu(0, 2)] == ["b"]


def test_cpu_and_memory_bind_and_zero_capacity_is_not_modelled() -> None:
    led = Ledger([node("a", cpu_milli=4000, memory_mib=1000), node("b")])
    d = Demand(gpus=1, cpu_milli=3000, memory_mib=800)
    led.place(d, 0, (0,), "x")
    assert led.fit(d, 0) is None
    assert str(led.shortfall(d, 0)) == "cpu_milli: needs 3000, 1000 free"
    assert led.fit(d, 1) == (0,)          # node b models neither: never binds


def test_gpu_memory_is_basic_parts_plus_the_largest_peak() -> None:
    """Eq. 3 of the interference-aware placement paper: sum gamma + max delta <= capacity."""
    led = Ledger([node(gpus=1, gpu_memory_mib=16000)])
    a = Demand(gpu_milli=300, gpu_memory_mib=4000, gpu_memory_peak_mib=6000,
               peak_probability=0.2)
    led.place(a, 0, (0,), "a")
    # 4000 + 4000 + max(6000, 2000) = 14000 fits; a second big peak does not
    assert led.fit(Demand(gpu_milli=300, gpu_memory_mib=4000, gpu_memory_peak_mib=2000), 0) \
        == (0,)
    assert led.fit(Demand(gpu_milli=300, gpu_memory_mib=4000, gpu_memory_peak_mib=9000), 0) \
        is None
    led.release(a, 0, (0,), "a")
    assert led.gpu_peak[0, 0] == 0 and led.gpu_mem_free[0, 0] == 16000


demands = st.builds(Demand, gpus=st.integers(1, 2),
                    gpu_milli=st.sampled_from([100, 250, 500, 1000]),
                    cpu_milli=st.integers(0, 3000), memory_mib=st.integers(0, 3000),
                    gpu_memory_mib=st.integers(0, 4000),
                    gpu_memory_peak_mib=st.integers(0, 4000))


@settings(max_examples=60, deadline=None)
@given(st.lists(demands, max_size=12), st.randoms(use_true_random=False))
def test_place_then_release_in_any_order_restores_the_ledger(ds, rnd) -> None:
    nodes = [node("a", gpus=2, cpu_milli=8000, memory_mib=8000, gpu_memory_mib=16000),
             node("b", gpus=4)]
    led = Ledger(nodes)
    before = [x.copy() for x in (led.gpu_free, led.cpu_free, led.mem_free, led.gpu_mem_free)]
    placed = []
    for k, d in enumerate(ds):
        for i in range(2):
            slots = led.fit(d, i)
            if slots is not None:
                assert led.fits_on(d, i, slots)
                led.place(d, i, slots, f"j{k}")
                placed.append((d, i, slots, f"j{k}"))
                break
        assert (led.gpu_free[led.gpu_free >= 0] >= 0).all()       # never over-booked
        assert (led.cpu_free >= 0).all() and (led.mem_free >= 0).all()
    assert led.allocated_milli() == sum(held_milli(d) for d, *_ in placed)
    rnd.shuffle(placed)
    for d, i, slots, owner in placed:
        led.release(d, i, slots, owner)
    after = (led.gpu_free, led.cpu_free, led.mem_free, led.gpu_mem_free)
    for b, a in zip(before, after):
        assert np.array_equal(a, b)
    assert not led.residents and not led.gpu_peak.any()


def snap(nodes, jobs) -> Snapshot:
    return Snapshot(now_s=0, nodes=tuple(nodes), jobs=tuple(jobs), energy=Energy(),
                    params=Params())


def plan(*assignments: Assignment, postponed=()) -> Plan:
    return Plan(policy="t", assignments=assignments, postponed=tuple(postponed), objective=0,
                objective_name="x")


def test_check_plan_lets_slices_share_a_gpu_and_refuses_overbooking() -> None:
    s = snap([node(gpus=1, cpu_milli=4000)],
             [job(f"j{k}", Demand(gpu_milli=400, cpu_milli=1000)) for k in range(3)])
    two = plan(Assignment(job="j0", node="n", gpus=1), Assignment(job="j1", node="n", gpus=1),
               postponed=["j2"])
    check_plan(s, two)
    three = plan(*(Assignment(job=f"j{k}", node="n", gpus=1) for k in range(3)))
    with pytest.raises(InfeasiblePlan, match=r"node n: job j2 does not fit"):
        check_plan(s, three)
    pinned = plan(Assignment(job="j0", node="n", gpus=1, gpu_ids=(1,)),
                  Assignment(job="j1", node="n", gpus=1), postponed=["j2"])
    with pytest.raises(InfeasiblePlan, match=r"job j0 does not fit on GPUs \[1\]"):
        check_plan(s, pinned)


def test_check_plan_counts_cpu_and_keeps_the_whole_gpu_message() -> None:
    s = snap([node(gpus=2, cpu_milli=3000)],
             [job("a", Demand(gpus=1, cpu_milli=2000)), job("b", Demand(gpus=1, cpu_milli=2000))])
    with pytest.raises(InfeasiblePlan, match=r"cpu_milli: needs 2000, 1000 free"):
        check_plan(s, plan(Assignment(job="a", node="n", gpus=1),
                           Assignment(job="b", node="n", gpus=1)))
    elastic = snap([node(gpus=2)], [job("x"), job("y")])
    with pytest.raises(InfeasiblePlan, match=r"node n: 4 GPUs assigned, has 2"):
        check_plan(elastic, plan(Assignment(job="x", node="n", gpus=2),
                                 Assignment(job="y", node="n", gpus=2)))


def test_a_rigid_job_runs_only_with_the_gpus_it_asks_for() -> None:
    rigid = Job(id="r", submit_s=0, due_s=1, weight=1, epochs=1,
                epoch_time_s={"T4": (5.0, 4.0)}, demand=Demand(gpus=2))
    assert rigid.remaining_s("T4", 2) == 4.0
    assert rigid.remaining_s("T4", 1) is None
    s = snap([node(gpus=2)], [rigid])
    with pytest.raises(InfeasiblePlan, match="no epoch time for 1 x T4"):
        check_plan(s, plan(Assignment(job="r", node="n", gpus=1)))


def trace_doc(demand: dict, **node_caps) -> dict:
    return {"format": "andreas-trace/1",
            "nodes": [{"name": "a", "gpu_type": "T4", "gpus": 2, "power_w": [1, 2, 3],
                       **node_caps}],
            "jobs": [{"id": "x", "submit_s": 0, "due_s": 10, "weight": 1, "epochs": 1,
                      "epoch_time_s": {"T4": [5, 5]}, "demand": demand}]}


def test_demands_and_capacities_round_trip_through_a_trace() -> None:
    doc = trace_doc({"gpus": 1, "gpu_milli": 300, "cpu_milli": 2000, "memory_mib": 100,
                     "gpu_memory_mib": 4000, "gpu_memory_peak_mib": 2000,
                     "peak_probability": 0.25},
                    cpu_milli=8000, memory_mib=1000, gpu_memory_mib=16000)
    trace = parse_trace(doc)
    assert trace.jobs[0].demand == Demand(gpus=1, gpu_milli=300, cpu_milli=2000,
                                          memory_mib=100, gpu_memory_mib=4000,
                                          gpu_memory_peak_mib=2000, peak_probability=0.25)
    assert trace.nodes[0].gpu_memory_mib == 16000
    assert parse_trace(json.loads(dumps_trace(trace))) == trace
    plain = Trace(nodes=(node(gpus=1),), jobs=(job("p", Demand(gpus=1)),))
    assert "cpu_milli" not in dumps_trace(plain)      # zero capacities stay out of files


@pytest.mark.parametrize("demand, caps, message", [
    ({"gpu_milli": 0}, {}, "job x: field 'demand.gpu_milli' must be >= 1, got 0"),
    ({"gpu_milli": 1001}, {}, "field 'demand.gpu_milli' must be <= 1000 (one whole GPU), "
                              "got 1001"),
    ({"gpus": 3}, {}, "field 'epoch_time_s.T4' must have an entry for demand.gpus = 3 GPUs"),
    ({"peak_probability": 1.5, "gpu_memory_peak_mib": 10}, {},
     "field 'demand.peak_probability' must be <= 1, got 1.5"),
    ({"peak_probability": 0.5}, {}, "needs demand.gpu_memory_peak_mib > 0"),
    ({"gpu_memory_mib": 20000}, {"gpu_memory_mib": 16000},
     "field 'demand.gpu_memory_mib' fits no node (the most any accepted node has is 16000), "
     "got 20000"),
    ({"cpu_milli": 9000}, {"cpu_milli": 8000}, "field 'demand.cpu_milli' fits no node"),
    ({"cpu": 1}, {}, 'unknown field "demand.cpu"'),
])
def test_bad_demands_name_the_field(demand, caps, message) -> None:
    with pytest.raises(InputError) as err:
        parse_trace(trace_doc(demand, **caps))
    assert message in str(err.value)
    assert "\n" not in str(err.value)
