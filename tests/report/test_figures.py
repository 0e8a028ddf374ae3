"""The report's figures on the hand-computed world (conftest), on SQLite and MariaDB."""

from __future__ import annotations

import csv
import io
import json

import pytest

from andreas.accounting import Prices
from andreas.report.compute import build_report, period_rows
from andreas.report.read import read_window
from andreas.report.render import render
from andreas.report.validate import validate
from andreas.report.window import Window
from tests.report.conftest import HOUR, KWH_COST, NOW, PRICE, PUE, T0

PRICES = Prices(pue=PUE, price_per_kwh=PRICE)
A_KWH = (350 * 2 + 250 * 2) / 1000     # node A: 350 W for 2 h, then 250 W
B_KWH = 140 * 4 / 1000
JOB_KWH = {"j1": 0.6, "j2": 0.4, "j3": 0.28, "j4": 0.0, "j5": 0.0}
PENALTY = {"j1": 3.6, "j2": 0.0, "j3": 3.6, "j4": 0.0, "j5": 9.0}
GPU_H = {"j1": 2.0, "j2": 2.0, "j3": 2.0, "j4": 0.0, "j5": 0.0}
WINDOW = Window(since_s=T0, until_s=T0 + 4 * HOUR, now_s=NOW)
approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-9)  # noqa: E731


@pytest.fixture(scope="module")
def data(store, world):
    return read_window(store, WINDOW)


@pytest.fixture(scope="module")
def report(data):
    return build_report(data, PRICES)


def by_job(report, world):
    names = {v: k for k, v in world.jobs.items()}
    return {names[r.job]: r for r in report.jobs}


def test_per_job_figures(report, world):
    rows = by_job(report, world)
    assert set(rows) == set(JOB_KWH)
    for key, row in rows.items():
        assert row.energy_kwh == approx(JOB_KWH[key]), key
        assert row.energy_cost == approx(JOB_KWH[key] * KWH_COST), key
        assert row.tardiness_cost == approx(PENALTY[key]), key
        assert row.gpu_hours == approx(GPU_H[key]), key
        assert row.actual_cost == approx(JOB_KWH[key] * KWH_COST + PENALTY[key]), key
    assert rows["j1"].nodes == world.a and rows["j3"].nodes == world.b
    assert rows["j1"].end_s == T0 + 2 * HOUR and rows["j2"].end_s is None
    actual = 0.6 * KWH_COST + 3.6
    assert rows["j1"].deviation_pct == approx(100 * (4.0 - actual) / 4.0)
    assert rows["j2"].deviation_pct is None          # still running: no whole-life figure


def test_totals_are_sums_of_rows_and_the_samples_integral(report):
    t = report.totals
    assert t.jobs_energy_kwh == approx(sum(r.energy_kwh for r in report.jobs))
    assert t.jobs_energy_cost == approx(sum(r.energy_cost for r in report.jobs))
    assert t.tardiness_cost == approx(sum(r.tardiness_cost for r in report.jobs))
    assert t.gpu_hours == approx(sum(r.gpu_hours for r in report.jobs))
    assert t.predicted_cost == approx(5.0)
    # The nodes' energy is the integral of the samples, idle included.
    assert t.energy_kwh == approx(A_KWH + B_KWH)
    assert t.energy_kwh == approx(sum(n.energy_kwh for n in report.nodes))
    assert t.jobs_energy_kwh + t.unattributed_energy_kwh == approx(t.energy_kwh)
    assert t.total_cost == approx(sum(r.actual_cost for r in report.jobs)
                                  + t.unattributed_energy_kwh * KWH_COST)
    assert t.total_cost == approx(t.energy_cost + t.tardiness_cost)


def test_per_node_figures(report, world):
    nodes = {n.node: n for n in report.nodes}
    a, b = nodes[world.a], nodes[world.b]
    assert a.energy_kwh == approx(A_KWH) and b.energy_kwh == approx(B_KWH)
    assert a.gpu_energy_kwh == approx((200 * 2 + 100 * 2 + 50 * 4) / 1000)
    assert a.host_energy_kwh == approx(0.4)
    assert a.jobs_energy_kwh == approx(1.0) and b.jobs_energy_kwh == approx(0.28)
    assert a.unattributed_energy_kwh == approx(0.2)       # idle GPU 1: 50 W x 4 h
    assert b.unattributed_energy_kwh == approx(0.28)      # B idle for 2 h at 140 W
    assert a.gpu_hours == approx(4.0) and a.busy_share == approx(4.0 / (2 * 4))
    assert a.mean_power_w == approx(300.0) and a.measured_minutes == 240
    assert a.samples_without_energy == 0


def test_days_add_up_to_the_window(data, report):
    days = period_rows(data, PRICES, "day")
    assert [d.period for d in days] == ["2027-01-15", "2027-01-16"]
    assert days[0].energy_kwh == approx(0.7 + 0.28)
    assert days[1].energy_kwh == approx(0.5 + 0.28)
    t = report.totals
    for field in ("energy_kwh", "jobs_energy_kwh", "tardiness_cost", "gpu_hours", "total_cost"):
        assert sum(getattr(d, field) for d in days) == approx(getattr(t, field)), field
    # j1 was late 22:00+1h .. 24:00, j3 from 00:30 to 01:00, j5 from 01:45 to 02:00.
    assert days[0].tardiness_cost == approx(3.6)
    assert days[1].tardiness_cost == approx(3.6 + 9.0)
    weeks = period_rows(data, PRICES, "week")
    assert [w.period for w in weeks] == ["2027-W02"]
    assert weeks[0].energy_kwh == approx(t.energy_kwh)


def test_unaligned_window_is_prorated_exactly(store, world):
    w = Window(since_s=T0 + 30, until_s=T0 + 4 * HOUR - 30, now_s=NOW)
    r = build_report(read_window(store, w), PRICES)
    seconds = 2 * HOUR - 30
    assert r.totals.energy_kwh == approx(((350 + 250 + 140 * 2) * seconds) / 3.6e6)
    rows = by_job(r, world)
    assert rows["j1"].energy_kwh == approx(300 * seconds / 3.6e6)
    assert rows["j1"].deviation_pct is None               # submitted before the window


def test_co2_uses_facility_energy(data):
    r = build_report(data, Prices(pue=PUE, price_per_kwh=PRICE, co2_g_per_kwh=250.0))
    assert r.totals.co2_kg == approx((A_KWH + B_KWH) * PUE * 250 / 1000)


def test_validation_by_hand(data):
    v = validate(data)
    assert len(v.slots) == 4 and v.compared == 4
    # (predicted kWh, actual kWh) per slot: plan A 400 W, B 140/160 W; measured A 350 then
    # 250 W, B 140 W.
    hand = [(0.54, 0.49), (0.56, 0.49), (0.56, 0.39), (0.54, 0.39)]
    for slot, (pred, act) in zip(v.slots, hand, strict=True):
        assert slot.hours == approx(1.0) and slot.nodes == 2
        assert slot.predicted_energy_kwh == approx(pred)
        assert slot.actual_energy_kwh == approx(act)
        assert slot.predicted_cost == approx(pred * KWH_COST)
        assert slot.actual_cost == approx(act * KWH_COST)
        assert slot.deviation_pct == approx(100 * (pred - act) / pred)
    assert v.deviation_pct == approx(20.0)                # (2.2 - 1.76) / 2.2
    assert v.mean_abs_deviation_pct == approx(
        sum(100 * (p - a) / p for p, a in hand) / 4)


def test_csv_and_json_parse_back(data, report, world):
    out = render(data, PRICES, by="job", fmt="csv")
    rows = {r["job"]: r for r in csv.DictReader(io.StringIO(out.text))}
    for row in report.jobs:
        got = rows[row.job]
        assert float(got["energy_kwh"]) == row.energy_kwh
        assert float(got["actual_cost"]) == row.actual_cost
        assert float(got["submit_s"]) == row.submit_s
        assert got["end_utc"] == ("" if row.end_s is None else got["end_utc"])
    doc = json.loads(render(data, PRICES, by="node", fmt="json").text)
    assert doc["format"] == "andreas-report/1" and doc["by"] == "node"
    assert doc["totals"]["energy_kwh"] == report.totals.energy_kwh
    assert sum(r["energy_kwh"] for r in doc["rows"]) == approx(doc["totals"]["energy_kwh"])
    days = json.loads(render(data, PRICES, by="day", fmt="json").text)["rows"]
    assert sum(d["total_cost"] for d in days) == approx(report.totals.total_cost)
    slots = json.loads(render(data, PRICES, fmt="json", validate=True).text)
    assert slots["summary"]["deviation_pct"] == approx(20.0)
    back = list(csv.DictReader(io.StringIO(render(data, PRICES, fmt="csv",
                                                  validate=True).text)))
    assert [float(s["deviation_pct"]) for s in back] == [s["deviation_pct"]
                                                         for s in slots["slots"]]


def test_empty_window_says_so(store, world):
    w = Window(since_s=T0 - 30 * 86400, until_s=T0 - 29 * 86400, now_s=NOW)
    data = read_window(store, w)
    for fmt in ("table", "csv", "json", "html"):
        out = render(data, PRICES, fmt=fmt)
        assert out.message == ("no jobs/samples between 2026-12-16 22:00Z and "
                               "2026-12-17 22:00Z"), fmt
        assert out.text is None
    assert render(data, PRICES, validate=True).message.startswith("no decisions between")
