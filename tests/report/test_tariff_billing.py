"""The report and the validation with a time-of-use tariff, on the hand-computed world
(conftest): the window 22:00 .. 02:00 UTC crosses midnight, where this tariff's rate
falls from 0.30 x PUE 1.2 to 0.10 x PUE 1.5, so every figure below is by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from andreas.accounting import Prices
from andreas.model import Tariff
from andreas.report.compute import build_report, period_rows
from andreas.report.read import read_window
from andreas.report.render import render
from andreas.report.validate import validate
from andreas.report.window import Window
from tests.report.conftest import HOUR, KWH_COST, NOW, PRICE, PUE, T0

EVENING, NIGHT = 0.30 * 1.2, 0.10 * 1.5          # price x PUE before / after 00:00 UTC
TARIFF = Tariff(price_per_kwh=tuple(0.30 if h >= 12 else 0.10 for h in range(24)),
                pue=tuple(1.2 if h >= 12 else 1.5 for h in range(24)))
PRICES = Prices(pue=TARIFF.mean_pue, price_per_kwh=TARIFF.mean_price, tariff=TARIFF,
                tariff_path="/etc/andreas/tariff.csv")
WINDOW = Window(since_s=T0, until_s=T0 + 4 * HOUR, now_s=NOW)
approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-12)  # noqa: E731


@pytest.fixture(scope="module")
def data(store, world):
    return read_window(store, WINDOW)


def test_jobs_and_nodes_are_billed_at_the_time_they_used_energy(data, world):
    r = build_report(data, PRICES)
    names = {v: k for k, v in world.jobs.items()}
    jobs = {names[j.job]: j for j in r.jobs}
    # j1: 0.6 kWh before midnight; j2: 0.4 kWh after; j3: 140 W from 23:00 to 01:00
    assert jobs["j1"].energy_cost == approx(0.6 * EVENING)
    assert jobs["j2"].energy_cost == approx(0.4 * NIGHT)
    assert jobs["j3"].energy_cost == approx(0.14 * EVENING + 0.14 * NIGHT)
    assert jobs["j1"].actual_cost == approx(0.6 * EVENING + 3.6)
    nodes = {n.node: n for n in r.nodes}
    # A: 350 W for 2 h before midnight, 250 W for 2 h after; B: 140 W all along
    assert nodes[world.a].energy_cost == approx(0.7 * EVENING + 0.5 * NIGHT)
    assert nodes[world.b].energy_cost == approx(0.28 * EVENING + 0.28 * NIGHT)
    total = 0.98 * EVENING + 0.78 * NIGHT
    assert r.totals.energy_cost == approx(total)
    assert r.totals.total_cost == approx(total + r.totals.tardiness_cost)
    # the mean rate would have billed otherwise: the tariff is what made the difference
    assert r.totals.energy_cost != pytest.approx(
        build_report(data, Prices(pue=PRICES.pue, price_per_kwh=PRICES.price_per_kwh)
                     ).totals.energy_cost, rel=1e-3)
    days = period_rows(data, PRICES, "day")
    assert [d.energy_cost for d in days] == [approx(0.98 * EVENING), approx(0.78 * NIGHT)]
    assert sum(d.total_cost for d in days) == approx(r.totals.total_cost)


def test_the_report_json_names_the_tariff(data):
    doc = json.loads(render(data, PRICES, by="node", fmt="json").text)
    assert doc["prices"]["tariff"]["file"] == "/etc/andreas/tariff.csv"
    assert doc["prices"]["tariff"]["price_per_kwh"] == list(TARIFF.price_per_kwh)
    plain = json.loads(render(data, Prices(pue=PUE, price_per_kwh=PRICE), by="node",
                              fmt="json").text)
    assert plain["prices"] == {"pue": PUE, "price_per_kwh": PRICE, "co2_g_per_kwh": None}
    out = render(data, PRICES, by="node", fmt="csv")
    assert out.text is not None


def test_validation_integrates_the_plans_tariff_over_each_slot(data):
    """Slots 22-23, 23-00 at the evening rate, 00-01, 01-02 at the night rate; the plans
    quote cost_per_hour at the reference rate PUE x PRICE (conftest), so the predicted
    cost is the predicted kWh x the slot's rate, the actual the measured kWh x it."""
    def with_tariff(plan):
        energy = {**plan["energy"], "tariff": {"file": "t.csv",
                                               "price_per_kwh": list(TARIFF.price_per_kwh),
                                               "pue": list(TARIFF.pue)}}
        return {**plan, "energy": energy}
    tariffed = replace(data, decisions=tuple(replace(d, plan=with_tariff(d.plan))
                                             for d in data.decisions))
    v = validate(tariffed)
    hand = [(0.54, 0.49, EVENING), (0.56, 0.49, EVENING), (0.56, 0.39, NIGHT),
            (0.54, 0.39, NIGHT)]
    assert v.compared == 4
    for slot, (pred, act, rate) in zip(v.slots, hand, strict=True):
        assert slot.predicted_cost == approx(pred * rate)
        assert slot.actual_cost == approx(act * rate)
        assert slot.deviation_pct == approx(100 * (pred - act) / pred)
    assert v.predicted_cost == approx(1.1 * EVENING + 1.1 * NIGHT)
    assert v.actual_cost == approx(0.98 * EVENING + 0.78 * NIGHT)
    # the same documents without the tariff: the constant rate, as before
    assert validate(data).actual_cost == approx(1.76 * KWH_COST)


def test_a_malformed_tariff_in_a_plan_is_not_guessed(data):
    bad = replace(data, decisions=tuple(
        replace(d, plan={**d.plan, "energy": {**d.plan["energy"],
                                              "tariff": {"price_per_kwh": [1.0]}}})
        for d in data.decisions))
    v = validate(bad)
    assert v.compared == 0
    assert {s.note for s in v.slots} == {"plan document has no nodes / energy"}
