"""The agent's and the manager's collectors on fake inputs, rendered as a scrape sees them
(no server): names, labels, units, and values that follow from the inputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agents.attribution import JobShare
from agents.delivery import DeliveryMode, DeliveryStats
from agents.exporter import AgentCollector
from agents.meter import Meter
from agents.records import GpuGap, GpuInfo, GpuSample, HostSample
from andreas.manager.exporter import ManagerCollector
from andreas.manager.meter import DECISION_BUCKETS_S, ManagerMeter
from andreas.metrics import registry_of, render
from andreas.sources import EnergySource, PowerSource


def scrape(collector) -> dict[str, list]:
    """name -> samples of one rendered scrape (the text format, parsed back)."""
    text = render(registry_of([collector], process=False)).decode()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def by(samples, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples}


def gpu(uuid: str, t: float, power_w: float | None, energy_mj: int | None) -> GpuSample:
    return GpuSample(uuid=uuid, t=t, interval_s=1.0, power_w=power_w,
                     power_source=PowerSource.INSTANT, energy_mj=energy_mj,
                     energy_source=EnergySource.COUNTER)


def host(t: float, power_w: float, energy_mj: int) -> HostSample:
    return HostSample(t=t, interval_s=1.0, cpu_utilization=0.1, memory_used_mib=1000,
                      host_power_w=power_w, power_source=PowerSource.MODEL,
                      energy_mj=energy_mj, energy_source=EnergySource.MODEL)


INVENTORY = tuple(GpuInfo(uuid=f"GPU-x-{i}", index=i, model="Tesla V100", memory_mib=16384,
                          power_limit_w=250.0, has_energy_counter=True) for i in range(2))


@dataclass
class Stats:
    ticks: int = 7
    overruns: int = 1
    tick_errors: int = 2


@dataclass
class FakeSpool:
    bytes: int = 4096
    max_bytes: int = 1 << 20
    pending: int = 12


@dataclass
class FakeDelivery:
    stats: DeliveryStats = field(default_factory=DeliveryStats)


def agent_collector(meter: Meter, *, delivery=None, spool=None, now: float = 1000.0,
                    fence=None):
    return AgentCollector(node="n1", meter=meter, inventory=lambda: INVENTORY,
                          unhealthy=lambda: frozenset({"GPU-x-1"}), stats=Stats(),
                          delivery=lambda: delivery, spool=lambda: spool,
                          wall=lambda: now, started_wall=900.0, fence=lambda: fence)


def test_fence_counters_follow_its_stats_and_are_absent_without_a_fence():
    from agents.fence import FenceStats

    @dataclass
    class FakeFence:
        stats: FenceStats

    m = scrape(agent_collector(Meter(), fence=FakeFence(FenceStats(stopped=3, killed=1,
                                                                   self_fenced=2))))
    assert by(m["andreas_fence_containers_total"], "action") == {"sigterm": 3.0,
                                                                 "sigkill": 1.0}
    assert m["andreas_fence_self_fenced_total"][0].value == 2.0
    assert m["andreas_fence_self_fenced_total"][0].labels["node"] == "n1"
    m = scrape(agent_collector(Meter()))
    assert "andreas_fence_containers_total" not in m


def test_agent_metrics_follow_the_samples():
    meter = Meter()
    share = JobShare(job_id="j1", attempt=1, gpu_uuids=("GPU-x-0",), gpu_energy_mj=250_000,
                     host_energy_mj=100_000)
    meter.observe(998.0, [gpu("GPU-x-0", 998.0, 250.0, 250_000),
                          gpu("GPU-x-1", 998.0, 40.0, 40_000)], host(998.0, 200.0, 200_000),
                  [share])
    meter.observe(999.0, [gpu("GPU-x-0", 999.0, 240.0, 240_000),
                          GpuGap(uuid="GPU-x-1", t=999.0, reason="lost")],
                  host(999.0, 210.0, 210_000), [share])
    m = scrape(agent_collector(meter))
    assert by(m["andreas_gpu_power_watts"], "gpu") == {"0": 240.0}      # GPU 1: a gap now
    assert by(m["andreas_gpu_energy_joules_total"], "gpu") == {"0": 490.0, "1": 40.0}
    assert by(m["andreas_gpu_gaps_total"], "gpu") == {"0": 0.0, "1": 1.0}
    assert by(m["andreas_gpu_up"], "gpu") == {"0": 1.0, "1": 0.0}
    assert {s.labels["uuid"] for s in m["andreas_gpu_info"]} == {"GPU-x-0", "GPU-x-1"}
    assert all(s.labels["node"] == "n1" for s in m["andreas_gpu_power_watts"])
    assert m["andreas_host_power_watts"][0].value == 210.0
    assert m["andreas_host_energy_joules_total"][0].value == 410.0
    assert by(m["andreas_job_energy_joules_total"], "job_id") == {"j1": 700.0}
    assert by(m["andreas_sampler_errors_total"], "kind") == {"tick": 2.0, "overrun": 1.0}
    assert m["andreas_sampler_ticks_total"][0].value == 7.0
    assert m["andreas_sampler_last_tick_timestamp_seconds"][0].value == 999.0
    assert "andreas_spool_bytes" not in m and "andreas_delivery_lag_seconds" not in m


def test_energy_counters_never_go_down_and_jobs_expire():
    meter = Meter(job_keep_s=60.0)
    seen = []
    for k in range(5):
        readings = [gpu("GPU-x-0", 1000.0 + k, 100.0, None if k == 0 else 100_000)]
        shares = [JobShare(job_id="old", attempt=1, gpu_uuids=("GPU-x-0",),
                           gpu_energy_mj=1000, host_energy_mj=None)] if k == 0 else []
        meter.observe(1000.0 + k * 40, readings, None, shares)
        m = scrape(agent_collector(meter))
        seen.append(m["andreas_gpu_energy_joules_total"][0].value)
        jobs = by(m.get("andreas_job_energy_joules_total", []), "job_id")
        assert ("old" in jobs) == (k * 40 <= 60)
    assert seen == sorted(seen) and seen[0] == 0.0 and seen[-1] == 400.0


def test_spool_and_delivery_lag():
    stats = DeliveryStats(written=10, spooled=5, replayed=3, rejected=1, refused=2,
                          mode=DeliveryMode.SPOOL, stored_t=990.0)
    m = scrape(agent_collector(Meter(), delivery=FakeDelivery(stats), spool=FakeSpool()))
    assert m["andreas_spool_bytes"][0].value == 4096
    assert m["andreas_spool_max_bytes"][0].value == 1 << 20
    assert m["andreas_spool_records"][0].value == 12
    assert m["andreas_delivery_lag_seconds"][0].value == pytest.approx(10.0)
    assert by(m["andreas_delivery_records_total"], "outcome") == {
        "written": 10, "spooled": 5, "replayed": 3, "rejected": 1, "refused": 2}
    assert m["andreas_delivery_spooling"][0].value == 1.0
    # nothing stored yet: the lag runs from the agent's start
    m = scrape(agent_collector(Meter(), delivery=FakeDelivery(), spool=FakeSpool(), now=960.0))
    assert m["andreas_delivery_lag_seconds"][0].value == pytest.approx(60.0)


DOC = {"nodes": {"a": {"busy_gpus": 2, "power_w": [100.0, 300.0, 500.0], "cost_per_hour": 0.11},
                 "b": {"busy_gpus": 0, "power_w": [80.0], "cost_per_hour": 0.02},
                 "bad": {"busy_gpus": "x"}},
       "energy": {"pue": 1.33, "price_per_kwh": 0.172}}


def test_manager_metrics():
    meter = ManagerMeter("rg")
    for s in (0.004, 0.2, 0.2, 45.0, 100.0):
        meter.decision(seconds=s, objective=12.5, objective_name="f_obj", t=5000.0, doc=DOC)
    meter.decision_failed()
    meter.tick(failed=False)
    meter.tick(failed=True)
    counts = ({"queued": 3, "running": 1, "completed": 0}, {"up": 2, "down": 1})
    m = scrape(ManagerCollector(meter=meter, counts=lambda: counts))
    assert by(m["andreas_jobs"], "state") == counts[0]
    assert by(m["andreas_nodes"], "state") == counts[1]
    assert m["andreas_ticks_total"][0].value == 2 and m["andreas_tick_errors_total"][0].value == 1
    assert by(m["andreas_decisions_total"], "outcome") == {"ok": 5, "error": 1}
    buckets = by(m["andreas_decision_seconds_bucket"], "le")
    assert len(buckets) == len(DECISION_BUCKETS_S) + 1
    assert buckets["0.005"] == 1 and buckets["0.25"] == 3 and buckets["30.0"] == 3
    assert buckets["60.0"] == 4 and buckets["+Inf"] == 5
    assert m["andreas_decision_seconds_count"][0].value == 5
    assert m["andreas_decision_seconds_sum"][0].value == pytest.approx(145.404)
    obj = m["andreas_decision_objective"][0]
    assert obj.value == 12.5 and obj.labels == {"policy": "rg", "objective": "f_obj"}
    assert by(m["andreas_plan_node_power_watts"], "node") == {"a": 500.0, "b": 80.0}
    assert by(m["andreas_plan_node_cost_per_hour"], "node") == {"a": 0.11, "b": 0.02}
    assert m["andreas_energy_pue"][0].value == 1.33
    assert m["andreas_energy_price_per_kwh"][0].value == 0.172


def test_manager_scrape_answers_while_the_store_is_away():
    def broken():
        raise OSError("database gone")

    collector = ManagerCollector(meter=ManagerMeter("pr"), counts=broken)
    for n in (1, 2):
        m = scrape(collector)
        assert "andreas_jobs" not in m and "andreas_nodes" not in m
        assert m["andreas_metrics_store_errors_total"][0].value == n
        assert m["andreas_decision_seconds_count"][0].value == 0
        assert "andreas_decision_objective" not in m       # no decision yet: no value


def test_a_nan_objective_is_left_out():
    meter = ManagerMeter("rg")
    meter.decision(seconds=0.0, objective=float("nan"), objective_name="none", t=1.0, doc={})
    m = scrape(ManagerCollector(meter=meter, counts=lambda: ({}, {})))
    assert "andreas_decision_objective" not in m
    assert "andreas_plan_node_cost_per_hour" not in m and "andreas_energy_pue" not in m


def test_the_gpu_power_limit_in_force_is_a_gauge():
    from dataclasses import replace

    meter = Meter()
    meter.observe(998.0, [replace(gpu("GPU-x-0", 998.0, 170.0, 170_000), power_limit_w=175.0),
                          gpu("GPU-x-1", 998.0, 40.0, 40_000)], host(998.0, 200.0, 200_000),
                  [])
    m = scrape(agent_collector(meter))
    assert by(m["andreas_gpu_power_limit_watts"], "gpu") == {"0": 175.0}   # GPU 1: unknown
