"""Rescheduling: the decision row and its plan document, predicted costs, debouncing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from andreas.costs import c_ng_per_hour
from andreas.model import Energy
from andreas.store import Decision, Job
from tests.manager.helpers import add_job, add_node, job, make

NOW = 1_000_000.0


def decisions(store):
    with store.session() as s:
        return list(s.scalars(select(Decision).order_by(Decision.id)))


def test_plan_document_schema_and_predicted_cost(mstore):
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "t", gpus=1, gpu_type="T4")
    add_job(mstore, "soon", due_s=NOW + 2000, epochs=2)
    add_job(mstore, "later", due_s=NOW + 1e6, epochs=2)
    add_job(mstore, "nowhere", application="resnet50", max_gpus=1)
    m, ex, clock = make(mstore, policy="rg")
    decision_id = m.reschedule("submit")
    (d,) = decisions(mstore)
    assert d.id == decision_id and d.trigger == "submit" and d.policy == "rg"
    assert d.objective_name == "f_obj" and d.seconds >= 0
    plan = d.plan
    assert set(plan) >= {"assignments", "postponed", "actions", "nodes", "energy", "stats",
                         "pinned", "unreachable", "now_s"}
    assert plan["energy"] == {"pue": 1.33, "price_per_kwh": 0.172}
    placed = {a["job"] for a in plan["assignments"]} | set(plan["postponed"])
    assert placed == {"soon", "later", "nowhere"}
    for a in plan["assignments"]:
        assert set(a) == {"job", "node", "gpus", "expected_end_s", "epoch_time_s",
                          "predicted_cost"}
        assert a["expected_end_s"] > NOW and a["predicted_cost"] > 0
        assert job(mstore, a["job"]).predicted_cost == pytest.approx(a["predicted_cost"])
    kinds = {a["job"]: a for a in plan["actions"]}
    assert set(kinds) == {"soon", "later", "nowhere"}
    for a in plan["actions"]:
        assert set(a) == {"job", "kind", "node", "gpus", "reason"}
        assert a["reason"].split(":")[0] in ("start", "wait", "continue", "preempt", "move",
                                             "resize")
    for name, n in plan["nodes"].items():
        assert n["power_source"] == "profiles" and n["samples"] == 0
        assert n["cost_per_hour"] == pytest.approx(
            c_ng_per_hour(n["power_w"][n["busy_gpus"]], Energy()))
    assert plan["stats"]["jobs"] == 3 and plan["stats"]["nodes"] == 2
    # predicted_cost is set once: a later decision does not overwrite it
    with mstore.session() as s:
        s.execute(update(Job).values(predicted_cost=123.0))
    m.reschedule("period")
    assert {job(mstore, j).predicted_cost for j in ("soon", "later")} == {123.0}


def test_start_reason_names_the_cheapest_config(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j", due_s=NOW + 1e6, epochs=2)
    m, ex, clock = make(mstore)
    m.reschedule("submit")
    (action,) = decisions(mstore)[0].plan["actions"]
    assert action == {"job": "j", "kind": "start", "node": "a", "gpus": action["gpus"],
                      "reason": "start: cheapest config meeting due"}


def test_several_triggers_in_one_tick_make_one_decision(mstore):
    add_node(mstore, "a", gpus=2)
    m, ex, clock = make(mstore)
    m.start()
    n = len(decisions(mstore))
    add_job(mstore, "x")
    add_job(mstore, "y")
    m.request("period")
    m.request("period")
    report = m.tick()
    assert report.triggers == {"submit", "period"}
    assert len(decisions(mstore)) == n + 1
    assert decisions(mstore)[-1].trigger == "period+submit"
    m.tick()
    assert len(decisions(mstore)) == n + 1


def test_no_schedulable_node_postpones_everything(mstore):
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    report = m.start()
    (d,) = decisions(mstore)
    assert d.id == report.decision_id and d.plan["postponed"] == ["j"]
    assert d.objective is None and d.plan["assignments"] == []
    assert m.tick().decision_id is None            # covered: no new submit trigger


def test_restart_reads_the_previous_target(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    m.start()
    target = m.target
    m2, _, _ = make(mstore, clock=clock, executor=ex)
    assert m2.load_target() == target
    with mstore.session() as s:
        assert s.scalar(select(func.count()).select_from(Decision)) == 1
