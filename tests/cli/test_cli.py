"""The andreas command: help texts, output shapes, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from andreas import optimizer
from andreas.policies import POLICIES, PolicySpec
from andreas.cli import main
from andreas.feasibility import check_plan
from andreas.model import Assignment, Plan
from andreas.formats.snapshot import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "example-snapshot-n10.json"

CALLS: list[dict[str, Any]] = []


def postpone_all(snapshot, rng, iterations: int | None = None) -> Plan:
    """Stand-in policy: every job waits."""
    CALLS.append({"iterations": iterations, "rng": rng})
    return Plan(policy="postpone", assignments=(), postponed=tuple(j.id for j in snapshot.jobs),
                objective=0.0, objective_name="f_obj", stats={"iterations": 1})


def first_fit(snapshot, rng) -> Plan:
    """Stand-in policy: each job on the first node with room, as 1 GPU (on-premise or cloud)."""
    free = {n.name: (n.gpus if not snapshot.cloud else snapshot.catalog[-1].gpus)
            for n in snapshot.nodes}
    gpu_type = {n.name: (n.gpu_type if not snapshot.cloud else snapshot.catalog[-1].gpu_type)
                for n in snapshot.nodes}
    placed, waiting = [], []
    for job in snapshot.jobs:
        name = next((n for n in free if free[n] and job.remaining_s(gpu_type[n], 1)), None)
        if name is None:
            waiting.append(job.id)
            continue
        free[name] -= 1
        placed.append(Assignment(job=job.id, node=name, gpus=1))
    configs = ({a.node: snapshot.catalog[-1].name for a in placed} if snapshot.cloud else {})
    return Plan(policy="first-fit", assignments=tuple(placed), postponed=tuple(waiting),
                objective=float("nan"), objective_name="f_obj", node_configs=configs)


def overfull(snapshot, rng) -> Plan:
    """Stand-in policy with a bug: it puts every job on the first node."""
    return Plan(policy="overfull", assignments=tuple(
        Assignment(job=j.id, node=snapshot.nodes[0].name, gpus=1) for j in snapshot.jobs),
        postponed=(), objective=0.0, objective_name="f_obj")


def crash(snapshot, rng) -> Plan:
    raise RuntimeError("boom")


@pytest.fixture(autouse=True)
def stand_in_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("andreas_test_policies")
    for func in (postpone_all, first_fit, overfull, crash):
        setattr(module, func.__name__, func)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for func in (postpone_all, first_fit, overfull, crash):
        monkeypatch.setitem(POLICIES, func.__name__,
                            PolicySpec(name=func.__name__, module=module.__name__,
                                       function=func.__name__, summary=func.__doc__ or "",
                                       options={"iterations": None} if func is postpone_all
                                       else {}))
    CALLS.clear()


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def write(tmp_path: Path, doc: Any, name: str = "snap.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def example_doc() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


def cloud_doc() -> dict[str, Any]:
    catalog = [("NC6", "K80", 1, 0.56), ("NC12", "K80", 2, 1.13), ("NC24", "K80", 4, 2.25),
               ("NV6", "M60", 1, 0.62), ("NV12", "M60", 2, 1.24), ("NV24", "M60", 4, 2.48)]
    return {
        "format": "andreas-snapshot/1", "now_s": 100.0,
        "catalog": [{"name": n, "gpu_type": t, "gpus": g, "cost_per_hour": c}
                    for n, t, g, c in catalog],
        "nodes": [{"name": "vm1", "config": "NV24"}, {"name": "vm2"}],
        "jobs": [{"id": f"c{i}", "submit_s": 0.0, "due_s": 9000.0, "weight": 0.01, "epochs": 4,
                  "epoch_time_s": {"M60": [600.0, 350.0]}} for i in range(3)],
    }


# --------------------------------------------------------------------------- help

def test_group_help() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for word in ("energy", "optimize", "--log-level", "--version"):
        assert word in result.output


def test_optimize_help_mentions_every_option() -> None:
    result = run("optimize", "--help")
    assert result.exit_code == 0
    for word in ("SNAPSHOT.json", "--policy", "--seed", "--iterations", "--json", "--actions",
                 "rg", "greedy"):
        assert word in result.output


def test_policies_lists_the_registry() -> None:
    result = run("policies")
    assert result.exit_code == 0
    assert all(name in result.output for name in POLICIES)


@pytest.mark.slow
def test_python_dash_m() -> None:
    out = subprocess.run([sys.executable, "-m", "andreas", "--help"], capture_output=True,
                         text=True, cwd=ROOT, check=False)
    assert out.returncode == 0 and "optimize" in out.stdout


# --------------------------------------------------------------------------- optimize

def test_json_output_of_stand_in_policy() -> None:
    result = run("optimize", str(EXAMPLE), "--policy", "postpone_all", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    snapshot = load_snapshot(EXAMPLE)
    ids = [j.id for j in snapshot.jobs]
    assert set(out) == {"policy", "objective", "objective_name", "seconds", "assignments",
                        "postponed", "actions", "stats", "revisit_s"}
    assert out["policy"] == "postpone_all" and out["objective_name"] == "f_obj"
    assert out["revisit_s"] is None                 # nothing runs: nothing to switch
    assert out["objective"] == 0.0 and out["seconds"] >= 0 and out["stats"] == {"iterations": 1}
    assert out["assignments"] == [] and out["postponed"] == ids
    kinds = {a["job"]: a["action"] for a in out["actions"]}
    assert {kinds[j.id] for j in snapshot.jobs if j.running} == {"preempt"}
    assert {kinds[j.id] for j in snapshot.jobs if not j.running} == {"wait"}
    assert all(a["node"] is None and a["gpus"] == 0 for a in out["actions"])
    assert CALLS == [{"iterations": None, "rng": CALLS[0]["rng"]}]


def test_json_output_is_a_feasible_plan() -> None:
    result = run("optimize", str(EXAMPLE), "--policy", "first_fit", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["objective"] is None  # NaN is not JSON
    plan = Plan(policy=out["policy"], postponed=tuple(out["postponed"]),
                assignments=tuple(Assignment(**a) for a in out["assignments"]),
                objective=0.0, objective_name=out["objective_name"])
    check_plan(load_snapshot(EXAMPLE), plan)
    assert {a["action"] for a in out["actions"]} >= {"start", "wait"}


def test_seed_and_iterations_reach_the_policy() -> None:
    result = run("optimize", str(EXAMPLE), "--policy", "postpone_all", "--seed", "7",
                 "--iterations", "3", "--json")
    assert result.exit_code == 0, result.output
    assert CALLS[0]["iterations"] == 3
    import numpy as np
    assert CALLS[0]["rng"].random() == np.random.default_rng(7).random()


def test_table_output(tmp_path: Path) -> None:
    result = run("optimize", str(EXAMPLE), "--policy", "first_fit")
    assert result.exit_code == 0, result.output
    text = result.stdout
    for word in ("job", "action", "remaining h", "due in h", "late?", "started", "continued",
                 "moved", "preempted", "waiting", "f_obj", "f_bar", "first_fit"):
        assert word in text, word
    assert "wait " not in text  # waiting jobs only with --actions
    full = run("optimize", str(EXAMPLE), "--policy", "first_fit", "--actions").stdout
    snapshot = load_snapshot(EXAMPLE)
    assert all(j.id in full for j in snapshot.jobs)
    assert "wait" in full


def test_cloud_mode(tmp_path: Path) -> None:
    path = write(tmp_path, cloud_doc())
    result = run("optimize", path, "--policy", "first_fit", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["node_configs"] == {"vm1": "NV24"}
    assert len(out["assignments"]) == 3
    table = run("optimize", path, "--policy", "first_fit")
    assert table.exit_code == 0 and "vm1 (NV24)" in table.stdout


def test_log_level_option() -> None:
    result = run("--log-level", "debug", "optimize", str(EXAMPLE), "--policy", "postpone_all",
                 "--json")
    assert result.exit_code == 0
    assert run("--log-level", "loud", "policies").exit_code == 2


# --------------------------------------------------------------------------- errors

def _assert_one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert err.startswith("andreas: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err


def _bad(doc: dict, mutate) -> dict:
    mutate(doc)
    return doc


@pytest.mark.parametrize("content, words", [
    ("{not json", ("not JSON",)),
    ("[]", ("must be a JSON object",)),
    (_bad(example_doc(), lambda d: d.update(format="andreas-trace/1")), ("format",)),
    (_bad(example_doc(), lambda d: d["jobs"][2].update(due_s="tomorrow")),
     ("job j00003", "due_s", '"tomorrow"')),
    (_bad(example_doc(), lambda d: d["jobs"][6].pop("epochs")), ("job j00007", "epochs", "missing")),
    (_bad(example_doc(), lambda d: d["jobs"][0].update(weight=-1)), ("job j00001", "weight")),
    (_bad(example_doc(), lambda d: d["jobs"][0].update(epochs_done=10**6)),
     ("job j00001", "epochs_done")),
    (_bad(example_doc(), lambda d: d["nodes"][3].update(gpus=0)), ("node n004", "gpus", "got 0")),
    (_bad(example_doc(), lambda d: d["nodes"][3].update(power_w=[1.0])), ("node n004", "power_w")),
    (_bad(example_doc(), lambda d: d["nodes"][3].update(name="n001")), ("node n001", "name")),
    (_bad(example_doc(), lambda d: d["jobs"][1]["epoch_time_s"].update(H100=[1.0])),
     ("job j00002", "epoch_time_s", "H100", "known:")),
    (_bad(example_doc(), lambda d: d["jobs"][1].update(epoch_time_s={"H100": [1.0]})),
     ("job j00002", "epoch_time_s", "fits no node", "H100")),
    (_bad(example_doc(), lambda d: d["jobs"][4].update(running={"node": "n404", "gpus": 1})),
     ("job j00005", "running.node", "n404")),
    (_bad(example_doc(), lambda d: d["energy"].update(pue=True)), ("snapshot", "energy.pue")),
    (_bad(cloud_doc(), lambda d: d["nodes"][1].update(config="NC7")), ("node vm2", "config", "NC7")),
], ids=["not-json", "array", "format", "due-string", "epochs-missing", "weight", "epochs-done",
        "zero-gpus", "power", "duplicate-node", "unknown-type", "fits-no-node", "running-node",
        "pue-bool",
        "cloud-config"])
def test_bad_snapshot_exits_2_with_one_line(tmp_path: Path, content, words) -> None:
    _assert_one_line_error(run("optimize", write(tmp_path, content), "--policy", "postpone_all"),
                           *words)


def test_missing_file_exits_2(tmp_path: Path) -> None:
    _assert_one_line_error(run("optimize", str(tmp_path / "nope.json")), "nope.json", "cannot read")


def test_policy_without_iterations_exits_2() -> None:
    _assert_one_line_error(run("optimize", str(EXAMPLE), "--policy", "first_fit",
                               "--iterations", "5"), "first_fit", "--iterations")


def test_infeasible_plan_exits_2() -> None:
    _assert_one_line_error(run("optimize", str(EXAMPLE), "--policy", "overfull"),
                           "overfull", "infeasible")


@pytest.mark.parametrize("args", [["--policy", "nosuch"], ["--iterations", "0"], ["--seed", "x"]])
def test_bad_options_are_usage_errors(args: list[str]) -> None:
    result = run("optimize", str(EXAMPLE), *args)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_unexpected_exceptions_propagate() -> None:
    result = run("optimize", str(EXAMPLE), "--policy", "crash")
    assert isinstance(result.exception, RuntimeError)
    assert result.exit_code == 1


# --------------------------------------------------------------------------- real policies

REAL_POLICIES = dict(POLICIES)  # before the fixture adds the stand-ins


def _plan_from_json(out: dict[str, Any]) -> Plan:
    return Plan(policy=out["policy"], postponed=tuple(out["postponed"]),
                assignments=tuple(Assignment(**a) for a in out["assignments"]),
                objective=out["objective"], objective_name=out["objective_name"],
                node_configs=out.get("node_configs", {}))


def test_greedy_on_example_is_feasible() -> None:
    pytest.importorskip("andreas.optimizer.greedy")
    result = run("optimize", str(EXAMPLE), "--policy", "greedy", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    check_plan(load_snapshot(EXAMPLE), _plan_from_json(out))
    assert out["assignments"]


@pytest.mark.parametrize("policy", sorted(REAL_POLICIES))
@pytest.mark.parametrize("cloud", [False, True], ids=["on-premise", "cloud"])
def test_every_registered_policy_through_the_cli(tmp_path: Path, policy: str, cloud: bool) -> None:
    pytest.importorskip(REAL_POLICIES[policy].module)
    path = write(tmp_path, cloud_doc()) if cloud else str(EXAMPLE)
    result = run("optimize", path, "--policy", policy, "--seed", "3", "--json")
    if cloud and not REAL_POLICIES[policy].cloud:   # they refuse with one line
        _assert_one_line_error(result, "on-premise", policy)
        return
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert ("node_configs" in out) == cloud
    check_plan(load_snapshot(path), _plan_from_json(out))
    table = run("optimize", path, "--policy", policy, "--seed", "3", "--actions")
    assert table.exit_code == 0, table.output


def test_compare_scores_every_policy_with_the_reference_cost_model() -> None:
    from andreas.costs import evaluate
    result = run("compare", str(EXAMPLE), "--policies", "greedy,rg,edf", "--json",
                 "--iterations", "50")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["policy"] for r in rows] == ["greedy", "rg", "edf"]
    snapshot = load_snapshot(str(EXAMPLE))
    for row in rows:
        assert row["running"] + row["waiting"] == len(snapshot.jobs)
        plan = optimizer.decide(snapshot, __import__("numpy").random.default_rng(0),
                                row["policy"], **({"iterations": 50}
                                                  if row["policy"] == "rg" else {}))
        assert row["f_obj"] == pytest.approx(evaluate(snapshot, plan).f_obj)
    by = {r["policy"]: r for r in rows}
    assert by["rg"]["f_obj"] <= by["greedy"]["f_obj"]


def test_compare_shows_f_mix_for_cloud_snapshots(tmp_path: Path) -> None:
    """In the cloud greedy, rg and pr minimise f_mix: compare reports it for every plan
    (from costs.evaluate), and rg's is at most greedy's."""
    from andreas.costs import evaluate
    path = write(tmp_path, cloud_doc())
    result = run("compare", path, "--policies", "greedy,rg,edf", "--json", "--iterations", "50")
    assert result.exit_code == 0, result.output
    rows = {r["policy"]: r for r in json.loads(result.stdout)}
    snapshot = load_snapshot(path)
    for name, row in rows.items():
        plan = optimizer.decide(snapshot, __import__("numpy").random.default_rng(0), name,
                                **({"iterations": 50} if name == "rg" else {}))
        assert row["f_mix"] == pytest.approx(evaluate(snapshot, plan).f_mix)
    assert rows["rg"]["objective_name"] == rows["greedy"]["objective_name"] == "f_mix"
    assert rows["edf"]["objective_name"] == "f_obj"
    assert rows["rg"]["f_mix"] <= rows["greedy"]["f_mix"] * (1 + 1e-12)
    table = run("compare", path, "--policies", "greedy,rg")
    assert table.exit_code == 0 and "f_mix" in table.output, table.output


def test_compare_table_and_unknown_policy() -> None:
    result = run("compare", str(EXAMPLE), "--policies", "greedy,pr")
    assert result.exit_code == 0, result.output
    assert "greedy" in result.stdout and "f_bar" in result.stdout
    bad = run("compare", str(EXAMPLE), "--policies", "rg,bogus")
    _assert_one_line_error(bad, "--policies", "bogus")
