"""Validation slots that cannot be compared, on hand-made rows (no database)."""

from __future__ import annotations

import pytest

from andreas.report.read import NodeInfo, ReportData
from andreas.report.validate import validate
from andreas.report.window import Window
from andreas.store.decisions import DecisionInfo
from andreas.store.window import NodeMinute

T = 1_800_000_000.0
PLAN = {"nodes": {"a": {"busy_gpus": 1, "power_w": [100.0, 300.0], "cost_per_hour": 0.3},
                  "b": {"busy_gpus": 0, "power_w": [100.0, 300.0], "cost_per_hour": 0.1}},
        "energy": {"pue": 1.0, "price_per_kwh": 1.0}}


def data(*decisions: DecisionInfo, until: float = T + 120) -> ReportData:
    minutes = tuple(NodeMinute(node_id=1, minute_s=T + 60 * k, gpu_energy_mj=15_000_000,
                               host_energy_mj=3_000_000, gpu_power_w=250.0, host_power_w=50.0,
                               samples=12, samples_without_energy=0) for k in range(2))
    return ReportData(window=Window(since_s=T, until_s=until, now_s=until),
                      nodes=(NodeInfo(id=1, name="a", gpu_type="V100", gpu_count=2),
                             NodeInfo(id=2, name="b", gpu_type="V100", gpu_count=2)),
                      minutes=minutes, energy=(), jobs=(), attempts=(), decisions=decisions)


def test_unmeasured_nodes_are_left_out_of_both_sides():
    v = validate(data(DecisionInfo(id=1, t_s=T, trigger="start", policy="rg", plan=PLAN)))
    (slot,) = v.slots
    assert (slot.nodes, slot.nodes_unmeasured, slot.busy_gpus) == (1, 1, 1)
    assert slot.predicted_energy_kwh == pytest.approx(300 * 120 / 3.6e6)
    assert slot.actual_energy_kwh == pytest.approx(36_000_000 / 3.6e9)     # 300 W x 2 min
    assert slot.predicted_cost == pytest.approx(0.3 * 120 / 3600)
    assert slot.deviation_pct == pytest.approx(0.0)


def test_slots_without_a_usable_plan_or_length_are_noted_not_compared():
    v = validate(data(DecisionInfo(id=1, t_s=T, trigger="start", policy="rg", plan=None),
                      DecisionInfo(id=2, t_s=T + 60, trigger="a+b", policy="rg", plan=PLAN),
                      DecisionInfo(id=3, t_s=T + 60, trigger="submit", policy="rg", plan=PLAN)))
    assert [s.note for s in v.slots] == ["plan document has no nodes / energy", "empty slot",
                                         ""]
    assert v.compared == 1 and v.slots[2].hours == pytest.approx(60 / 3600)
    assert v.deviation_pct == pytest.approx(0.0) and v.mean_abs_deviation_pct == 0.0


def test_no_decision_no_figure():
    v = validate(data())
    assert v.slots == () and v.deviation_pct is None and v.mean_abs_deviation_pct is None


def test_a_short_slot_reads_raw_samples_not_its_minutes_mean():
    """A 10-s slot inside a minute whose mean is 300 W: the node really drew 500 W (raw
    samples every 2 s, 1 kJ each) during the slot; the minute would say 300 W."""
    from dataclasses import replace

    d = data(DecisionInfo(id=1, t_s=T + 10, trigger="submit", policy="rg", plan=PLAN),
             DecisionInfo(id=2, t_s=T + 20, trigger="complete", policy="rg", plan=PLAN),
             until=T + 120)
    times = tuple(T + 10 + 2 * k for k in range(1, 6))           # (T+10, T+20]
    d = replace(d, raw={1: (times, (1_000_000,) * 5)}, raw_intervals=((T + 10, T + 20),))
    v = validate(d)
    short, long_ = v.slots
    assert short.resolution == "samples" and long_.resolution == "minutes"
    assert short.actual_energy_kwh == pytest.approx(5_000_000 / 3.6e9)    # 500 W x 10 s
    assert short.deviation_pct == pytest.approx(100 * (300 - 500) / 300)
    assert long_.actual_energy_kwh == pytest.approx(36_000_000 / 3.6e9 * 100 / 120)


def test_short_slot_runs_merge_adjacent_short_slots_only():
    from andreas.report.read import RAW_SLOT_MAX_S, short_slot_runs

    starts = [0.0, 5.0, 9.0, 9.0 + 2 * RAW_SLOT_MAX_S, 9.5 + 2 * RAW_SLOT_MAX_S]
    assert short_slot_runs(starts, 10 + 2 * RAW_SLOT_MAX_S) == [
        (0.0, 9.0),
        (9.0 + 2 * RAW_SLOT_MAX_S, 10 + 2 * RAW_SLOT_MAX_S)]
