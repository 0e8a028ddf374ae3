"""Hand-computed cases for andreas.costs: every expected number is worked out in comments."""

from __future__ import annotations

import dataclasses

import pytest

from andreas import accounting, costs
from andreas.model import (Assignment, CatalogEntry, Energy, Job, Node, Params, Plan,
                           Snapshot)


def plan(assignments=(), postponed=(), node_configs=None) -> Plan:
    return Plan(policy="hand", objective=0.0, objective_name="f_obj",
                assignments=tuple(Assignment(job=j, node=n, gpus=g) for j, n, g in assignments),
                postponed=tuple(postponed), node_configs=node_configs or {})


# -- c_ng and tardiness ----------------------------------------------------------------


def test_c_ng_per_hour_ANDREAS_testbed_defaults():
    # 700 W = 0.7 kW; x PUE 1.33 = 0.931 kW at the meter; x 0.172 EUR/kWh = 0.160132 EUR/h.
    assert costs.c_ng_per_hour(700.0, Energy()) == pytest.approx(0.7 * 1.33 * 0.172)
    assert costs.c_ng_per_hour(700.0, Energy()) == pytest.approx(0.160132)


def test_c_ng_per_hour_other_site():
    # 400 W x PUE 1.25 x 0.2 EUR/kWh = 0.4 x 1.25 x 0.2 = 0.1 EUR/h; 0 W costs nothing.
    site = Energy(pue=1.25, price_per_kwh=0.2)
    assert costs.c_ng_per_hour(400.0, site) == pytest.approx(0.1)
    assert costs.c_ng_per_hour(0.0, site) == 0.0


@pytest.mark.parametrize("finish, due, expected", [
    (4600.0, 4000.0, 600.0),   # 600 s late
    (3999.0, 4000.0, 0.0),     # early: no negative tardiness
    (4000.0, 4000.0, 0.0),     # exactly on time
])
def test_tardiness(finish, due, expected):
    assert costs.tardiness_s(finish, due) == expected


# -- on-premise: 2 nodes, 3 jobs ----------------------------------------------------------
#
# Site: PUE 1.25, 0.2 EUR/kWh, so c = P[kW] x 0.25 EUR/h.
#   n1: 2 x V100, power 200/400/800 W with 0/1/2 GPUs busy -> c = 0.05/0.10/0.20 EUR/h
#   n2: 1 x T4,   power 100/240 W                            -> c = 0.025/0.06 EUR/h
# now = 1000 s, rho = 100, H = 3600 s, mu = 0.
#
#   job a: 10 epochs left, V100 [360, 180] s, T4 [720] s, due 4000, w 0.01
#   job b: 10 epochs, 5 done -> 5 left, V100 [1440, 720] s, T4 [1440] s, due 11000, w 0.02
#   job c: 4 epochs left, V100 [900, 500] s, T4 [1800] s, due 6000, w 0.005
#
# Plan: a on (n1, 1 GPU), b on (n1, 1 GPU), c postponed; n2 idle.
#
# Tardiness term:
#   a: t = 10 x 360 = 3600 s, finishes 1000 + 3600 = 4600, 600 s late -> 0.01 x 600 = 6.0
#   b: t = 5 x 1440 = 7200 s, finishes 8200 < 11000 -> 0
#   total 6.0
# Postponement term, andreas's default ("delay"): c's best configuration is the cheapest
#   that meets its due date (1000 + t < 6000): V100 x 1 = 4 x 900 = 3600 s at 0.10 EUR/h
#   -> 0.1 EUR, V100 x 2 = 2000 s at 0.20 -> 0.111; T4 (7200 s) is late. So b_c = 3600 s:
#   late now = max(0, 1000 + 3600 - 6000) = 0; after one period H = 3600:
#   max(0, 1000 + 3600 + 3600 - 6000) = 2200 -> w (0 + rho x 2200) = 0.005 x 220000 = 1100.0
# Postponement term as published (P1a, "paper"; M_j = slowest configuration):
#   M_c = max(4 x 900, 4 x 500, 4 x 1800) = max(3600, 2000, 7200) = 7200 s
#   tau_hat_c = 1000 + 3600 + 7200 - 6000 = 5800 s -> rho w tau_hat = 100 x 0.005 x 5800 = 2900.0
# Node term: n1 has 1 + 1 = 2 busy GPUs -> c = 0.20 EUR/h; its first job ends after
#   min(3600, 7200) = 3600 s -> 3600 / 3600 x 0.20 = 0.2; n2 runs nothing -> 0.
# f_obj = 6.0 + 1100.0 + 0.2 = 1106.2 (paper: 6.0 + 2900.0 + 0.2 = 2906.2)
#
# f_bar, pi_j = t x c(n1, 1 GPU) / 3600 with c(n1, 1) = 0.10 EUR/h:
#   a: M_a = max(3600, 1800, 7200) = 7200; pi_a = 3600 x 0.1 / 3600 = 0.1;
#      M_a / (pi_a + w tau) = 7200 / (0.1 + 6.0) = 7200 / 6.1 = 1180.3278688...
#   b: M_b = max(5 x 1440, 5 x 720, 5 x 1440) = 7200; pi_b = 7200 x 0.1 / 3600 = 0.2;
#      7200 / (0.2 + 0) = 36000
#   c: postponed, adds nothing.
# f_bar = 36000 + 7200 / 6.1 = 37180.3278688...

ON_PREM = Snapshot(
    now_s=1000.0,
    energy=Energy(pue=1.25, price_per_kwh=0.2),
    params=Params(rho=100.0, period_s=3600.0),
    nodes=(Node(name="n1", gpu_type="V100", gpus=2, power_w=(200.0, 400.0, 800.0)),
           Node(name="n2", gpu_type="T4", gpus=1, power_w=(100.0, 240.0))),
    jobs=(Job(id="a", submit_s=0.0, due_s=4000.0, weight=0.01, epochs=10,
              epoch_time_s={"V100": (360.0, 180.0), "T4": (720.0,)}),
          Job(id="b", submit_s=0.0, due_s=11000.0, weight=0.02, epochs=10, epochs_done=5,
              epoch_time_s={"V100": (1440.0, 720.0), "T4": (1440.0,)}),
          Job(id="c", submit_s=0.0, due_s=6000.0, weight=0.005, epochs=4,
              epoch_time_s={"V100": (900.0, 500.0), "T4": (1800.0,)})),
)


def test_evaluate_on_premise_by_hand():
    ev = costs.evaluate(ON_PREM, plan([("a", "n1", 1), ("b", "n1", 1)], postponed=["c"]))
    assert ev.tardiness_cost == pytest.approx(6.0)
    assert ev.postponement_cost == pytest.approx(1100.0)
    assert ev.node_cost == pytest.approx(0.2)
    assert ev.idle_gpus == 0
    assert ev.f_obj == pytest.approx(1106.2)
    assert ev.f_bar == pytest.approx(36000.0 + 7200.0 / 6.1)


def test_evaluate_on_premise_by_hand_with_the_published_postponement_term():
    snap = dataclasses.replace(ON_PREM, params=Params(rho=100.0, period_s=3600.0,
                                                      postponement="paper"))
    ev = costs.evaluate(snap, plan([("a", "n1", 1), ("b", "n1", 1)], postponed=["c"]))
    assert ev.postponement_cost == pytest.approx(2900.0)
    assert ev.f_obj == pytest.approx(2906.2)


def test_postponement_charges_sunk_lateness_once_and_the_wait_rho_times():
    # a late job: best configuration = fastest (nothing meets the due date). d = 1000,
    # now = 1000, fastest V100 x 2 = 10 x 180 = 1800 s: late now by 1800 s; one more
    # period H = 3600 s adds 3600 s -> w (1800 + rho x 3600) = 0.01 x (1800 + 360000)
    late = Job(id="late", submit_s=0.0, due_s=1000.0, weight=0.01, epochs=10,
               epoch_time_s={"V100": (360.0, 180.0), "T4": (720.0,)})
    snap = dataclasses.replace(ON_PREM, jobs=(late,))
    assert costs.best_restart_s(snap, late) == 1800.0
    assert costs.postponement_cost(snap, late) == pytest.approx(0.01 * (1800.0 + 360000.0))
    # a job with a whole period of slack on its best configuration costs nothing to postpone
    slack = dataclasses.replace(late, id="slack", due_s=1000.0 + 3600.0 + 7200.0 + 1.0)
    assert costs.postponement_cost(dataclasses.replace(ON_PREM, jobs=(slack,)), slack) == 0.0


def test_max_time_is_slowest_configuration():
    jobs = {j.id: j for j in ON_PREM.jobs}
    assert costs.max_time_s(ON_PREM, jobs["a"]) == 7200.0   # T4: 10 x 720
    assert costs.max_time_s(ON_PREM, jobs["c"]) == 7200.0   # T4: 4 x 1800


def test_node_cost_per_hour_uses_all_busy_gpus():
    assert costs.node_cost_per_hour(ON_PREM, "n1", 2) == pytest.approx(0.2)
    assert costs.node_cost_per_hour(ON_PREM, "n1", 1) == pytest.approx(0.1)
    assert costs.node_cost_per_hour(ON_PREM, "n2", 1) == pytest.approx(0.06)


def test_evaluate_idle_gpu_penalty_mu():
    # a alone on (n1, 1 GPU); b and c postponed; mu = 0.5 per idle GPU of a used node.
    # Tardiness 6.0 (as above). Node term: n1 with 1 busy GPU, c = 0.1 EUR/h, 3600 s -> 0.1.
    # Postponed ("delay"): b has 5 epochs left, all three configurations meet its due date
    #   (1000 + t < 11000): V100 x 1 = 7200 s -> 2 h x 0.10 = 0.2, V100 x 2 = 3600 s -> 0.2,
    #   T4 = 7200 s -> 2 h x 0.06 = 0.12, the cheapest: b_b = 7200 s; late now 0, after H
    #   max(0, 1000 + 3600 + 7200 - 11000) = 800 -> 0.02 x 100 x 800 = 1600; c as above
    #   1100 -> 2700.
    # Idle: n1 has 2 - 1 = 1 idle GPU (n2 runs nothing, so it does not count) -> 0.5.
    # f_obj = 6.0 + 2700 + 0.1 + 0.5 = 2706.6
    snap = Snapshot(now_s=ON_PREM.now_s, nodes=ON_PREM.nodes, jobs=ON_PREM.jobs,
                    energy=ON_PREM.energy, params=Params(rho=100.0, period_s=3600.0, mu=0.5))
    ev = costs.evaluate(snap, plan([("a", "n1", 1)], postponed=["b", "c"]))
    assert ev.idle_gpus == 1
    assert ev.postponement_cost == pytest.approx(2700.0)
    assert ev.f_obj == pytest.approx(2706.6)


def test_evaluate_rejects_impossible_assignment():
    only_t4 = Snapshot(now_s=0.0, nodes=ON_PREM.nodes, jobs=(
        Job(id="x", submit_s=0.0, due_s=1.0, weight=1.0, epochs=1, epoch_time_s={"T4": (1.0,)}),))
    with pytest.raises(ValueError, match="job x"):
        costs.evaluate(only_t4, plan([("x", "n1", 1)]))


# -- cloud mode ----------------------------------------------------------------------------
#
# Catalog: NC6 (1 x K80, 0.9/h), NC12 (2 x K80, 1.8/h), NV6 (1 x M60, 1.2/h); nodes c1, c2
# carry no hardware. now = 0. Plan: c1 = NC12 runs x (1 GPU) and z (1 GPU); c2 = NV6 runs y.
#
#   x: 10 epochs, K80 [360, 200], M60 [300], due 3000, w 0.01
#      t = 3600 s on 1 K80 -> 600 s late -> 6.0
#   z: 4 epochs, K80 [450, 250], M60 [400], due 10000, w 0.005
#      t = 1800 s on 1 K80 -> on time -> 0
#   y: 5 epochs, K80 [720, 400], M60 [600], due 2000, w 0.02
#      t = 3000 s on 1 M60 -> 1000 s late -> 20.0
# Tardiness 26.0. Node term (VM price whatever the GPUs used):
#   c1: 1.8/h until its first job (z) ends at 1800 s -> 0.9; c2: 1.2/h x 3000 s -> 1.0.
# f_obj = 26.0 + 0.9 + 1.0 = 27.9; idle GPUs: c1 2 - 2 = 0, c2 1 - 1 = 0.
#
# f_bar: M_j over (K80, 1 GPU), (K80, 1-2 GPUs), (M60, 1 GPU); pi_j = t x VM price / 3600.
#   x: M = max(3600, 2000, 3000) = 3600; pi = 3600 x 1.8 / 3600 = 1.8; 3600 / (1.8 + 6) = 461.538...
#   z: M = max(1800, 1000, 1600) = 1800; pi = 1800 x 1.8 / 3600 = 0.9; 1800 / 0.9 = 2000
#   y: M = max(3600, 2000, 3000) = 3600; pi = 3000 x 1.2 / 3600 = 1.0; 3600 / (1 + 20) = 171.428...
# f_bar = 3600 / 7.8 + 2000 + 3600 / 21 = 2632.967...

CLOUD = Snapshot(
    now_s=0.0,
    nodes=(Node(name="c1"), Node(name="c2")),
    catalog=(CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=0.9),
             CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=1.8),
             CatalogEntry(name="NV6", gpu_type="M60", gpus=1, cost_per_hour=1.2)),
    jobs=(Job(id="x", submit_s=0.0, due_s=3000.0, weight=0.01, epochs=10,
              epoch_time_s={"K80": (360.0, 200.0), "M60": (300.0,)}),
          Job(id="z", submit_s=0.0, due_s=10000.0, weight=0.005, epochs=4,
              epoch_time_s={"K80": (450.0, 250.0), "M60": (400.0,)}),
          Job(id="y", submit_s=0.0, due_s=2000.0, weight=0.02, epochs=5,
              epoch_time_s={"K80": (720.0, 400.0), "M60": (600.0,)})),
)


def test_evaluate_cloud_by_hand():
    ev = costs.evaluate(CLOUD, plan([("x", "c1", 1), ("z", "c1", 1), ("y", "c2", 1)],
                                    node_configs={"c1": "NC12", "c2": "NV6"}))
    assert ev.tardiness_cost == pytest.approx(26.0)
    assert ev.postponement_cost == 0.0
    assert ev.node_cost == pytest.approx(1.9)
    assert ev.idle_gpus == 0
    assert ev.f_obj == pytest.approx(27.9)
    # pi in the cloud is the job's share of its VM: x and z pay half of NC12's 1.8 per hour
    assert ev.f_bar == pytest.approx(3600.0 / (0.9 + 6.0) + 1800.0 / 0.45 + 3600.0 / 21.0)


def test_cloud_node_cost_is_vm_price_only_while_busy():
    configs = {"c1": "NC12"}
    assert costs.node_cost_per_hour(CLOUD, "c1", 1, configs) == 1.8
    assert costs.node_cost_per_hour(CLOUD, "c1", 2, configs) == 1.8
    assert costs.node_cost_per_hour(CLOUD, "c1", 0, configs) == 0.0


@pytest.mark.parametrize("kw, expected", [
    (dict(end_s=150.0, now_s=500.0), 50.0),                       # finished 50 s late
    (dict(end_s=None, now_s=130.0), 30.0),                        # alive: late up to now
    (dict(end_s=90.0, now_s=500.0), 0.0),                         # on time
    (dict(end_s=None, now_s=500.0, finished=True), 0.0),          # end unknown: nothing
    (dict(end_s=400.0, now_s=500.0, cancelled=True), 0.0),        # withdrawn by its user
    (dict(end_s=400.0, now_s=500.0, start_s=150.0, stop_s=200.0), 50.0),  # window only
    (dict(end_s=400.0, now_s=500.0, start_s=0.0, stop_s=120.0), 20.0),
])
def test_late_s_one_rule_for_views_and_reports(kw, expected):
    args = dict(due_s=100.0, cancelled=False, finished=False) | kw
    assert accounting.late_s(**args) == pytest.approx(expected)


def test_prices_match_energy_cost():
    energy = Energy(pue=1.5, price_per_kwh=0.2)
    prices = accounting.Prices(pue=1.5, price_per_kwh=0.2, co2_g_per_kwh=300.0)
    assert prices.cost(2.0) == pytest.approx(costs.energy_cost(2.0 * costs.J_PER_KWH, energy))
    assert prices.co2_kg(2.0) == pytest.approx(0.9)
