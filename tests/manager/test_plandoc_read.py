"""Stored plan documents are read in one place (plandoc), tolerantly."""

from andreas.manager.plandoc import PlanEntry, Target, read_assignments
from andreas.model import Config

DOC = {"assignments": [
    {"job": "a", "node": "n1", "gpus": 2, "expected_end_s": 10.0, "predicted_cost": 1.5},
    {"job": "b", "node": None, "gpus": True, "expected_end_s": "soon",
     "predicted_cost": float("inf")},
    {"node": "n1"}, "junk"],
    "postponed": ["c"], "actions": [{"job": "a", "reason": "start: cheapest"}]}


def test_assignments_are_read_tolerantly():
    got = read_assignments(7, DOC)
    assert got == {"a": PlanEntry(decision_id=7, node="n1", gpus=2, expected_end_s=10.0,
                                  predicted_cost=1.5, reason="start: cheapest"),
                   "b": PlanEntry(decision_id=7)}
    assert read_assignments(7, None) == {} and read_assignments(7, {"assignments": 3}) == {}


def test_the_target_keeps_only_complete_assignments():
    t = Target.from_doc(7, DOC)
    assert dict(t.assignments) == {"a": Config(node="n1", gpus=2)}
    assert t.order == ("a",) and t.postponed == {"c"} and t.covers("a") and t.covers("c")
    assert t.reasons["a"] == "start: cheapest" and not t.covers("b")


def test_profiling_runs_and_action_only_entries_are_read_back():
    doc = {**DOC, "profiling": [{"job": "p", "node": "prof", "gpus": 1, "reason": "x"},
                                {"job": "q", "node": "prof", "gpus": 0}, "junk"],
           "actions": [{"job": "p", "kind": "profile", "node": "prof", "gpus": 1,
                        "reason": "profile: new application"}]}
    t = Target.from_doc(8, doc)
    assert dict(t.profiling) == {"p": Config(node="prof", gpus=1)} and t.covers("p")
    got = read_assignments(8, doc)
    assert got["p"] == PlanEntry(decision_id=8, reason="profile: new application")
