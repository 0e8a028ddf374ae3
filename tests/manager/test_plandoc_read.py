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
                                  predicted_cost=1.5),
                   "b": PlanEntry(decision_id=7)}
    assert read_assignments(7, None) == {} and read_assignments(7, {"assignments": 3}) == {}


def test_the_target_keeps_only_complete_assignments():
    t = Target.from_doc(7, DOC)
    assert dict(t.assignments) == {"a": Config(node="n1", gpus=2)}
    assert t.order == ("a",) and t.postponed == {"c"} and t.covers("a") and t.covers("c")
    assert t.reasons["a"] == "start: cheapest" and not t.covers("b")
