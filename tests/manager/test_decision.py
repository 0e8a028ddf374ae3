"""Rescheduling: the decision row and its plan document, predicted costs, debouncing."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sqlalchemy import func, select, update

from andreas.costs import c_ng_per_hour
from andreas.manager.plandoc import Target, read_stats, stat_value
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
                         "pinned", "unreachable", "now_s", "profiling", "revisit_s"}
    assert plan["profiling"] == []          # no profiling node
    assert plan["energy"] == {"pue": 1.33, "price_per_kwh": 0.172}
    placed = {a["job"] for a in plan["assignments"]} | set(plan["postponed"])
    assert placed == {"soon", "later", "nowhere"}
    for a in plan["assignments"]:
        assert set(a) == {"job", "node", "gpus", "gpu_ids", "expected_end_s", "epoch_time_s",
                          "predicted_cost", "estimate_source", "confidence"}
        assert a["estimate_source"] == "profiles"      # resnet50 is in profiles/apps.toml
        assert a["expected_end_s"] > NOW and a["predicted_cost"] > 0
        assert job(mstore, a["job"]).predicted_cost == pytest.approx(a["predicted_cost"])
    kinds = {a["job"]: a for a in plan["actions"]}
    assert set(kinds) == {"soon", "later", "nowhere"}
    for a in plan["actions"]:
        assert set(a) == {"job", "kind", "node", "gpus", "reason"}
        assert a["reason"].split(":")[0] in ("start", "wait", "continue", "preempt", "move",
                                             "resize")
    for n in plan["nodes"].values():
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


def test_policy_labels_in_stats_are_stored_as_strings_and_read_back(mstore):
    """rg reports which strategy won (a string): the decision keeps it, JSON stays strict,
    and the target read back from the database carries the same stats."""
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j", due_s=NOW + 2000, epochs=2)
    m, ex, clock = make(mstore, policy="rg")
    m.reschedule("submit")
    (d,) = decisions(mstore)
    stats = d.plan["stats"]
    assert isinstance(stats["best_strategy"], str) and stats["best_strategy"]
    assert stats["jobs"] == 1.0 and isinstance(stats["greedy_f_obj"], float)
    json.dumps(d.plan, allow_nan=False)
    m2, _, _ = make(mstore, clock=clock, executor=ex)
    target = m2.load_target()
    assert target.stats["best_strategy"] == stats["best_strategy"]
    assert target.stats == read_stats(d.plan)


def test_stat_values_are_json_safe_and_read_back_tolerantly():
    assert stat_value("optimal") == "optimal"
    assert stat_value(np.int64(3)) == 3.0 and stat_value(True) == 1.0
    assert stat_value(np.float32(0.5)) == 0.5
    assert stat_value(math.nan) is None and stat_value(math.inf) is None
    assert stat_value(10**400) is None and stat_value(None) is None
    assert stat_value(("a", 1)) == "('a', 1)"
    assert len(stat_value("x" * 10_000)) == 200
    # an older document (numbers only), a newer one (labels), and malformed ones
    assert read_stats({"stats": {"jobs": 3, "decide_s": 0.25}}) == {"jobs": 3.0,
                                                                    "decide_s": 0.25}
    assert read_stats({"stats": {"status": "optimal", "gap": None, "nested": {"a": 1},
                                 "items": [1, 2], "big": 10**400}}) == {
        "status": "optimal", "gap": None, "big": None}
    for doc in (None, {}, {"stats": None}, {"stats": [1, 2]}, {"stats": "optimal"}, []):
        assert read_stats(doc) == {}
    assert Target.from_doc(7, {"stats": {"chosen": "relinked"}}).stats == {"chosen": "relinked"}


def test_a_plans_revisit_time_triggers_one_rescheduling(mstore):
    from dataclasses import replace

    add_node(mstore, "a", gpus=2)
    add_job(mstore, "j1", due_s=NOW + 1e6)
    m, ex, clock = make(mstore, policy="rg")
    m.start()
    first = m.target.decision_id
    m.target = replace(m.target, revisit_s=clock() + 100.0)
    clock.advance(99)
    assert "revisit" not in m.tick().triggers
    clock.advance(2)
    report = m.tick()
    assert "revisit" in report.triggers and report.decision_id not in (None, first)
    assert decisions(mstore)[-1].trigger == "revisit"
    m.target = replace(m.target, revisit_s=clock() - 1.0)   # one past due: at the next tick
    assert "revisit" in m.tick().triggers
    assert "revisit" not in m.tick().triggers
