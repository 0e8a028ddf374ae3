"""GPU power limits as a decision (issue 30): documents, optimizer, simulator and bound."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from andreas import levels
from andreas.costs import evaluate
from andreas.errors import InputError
from andreas.feasibility import check_plan
from andreas.formats.snapshot import parse_snapshot, snapshot_to_dict
from andreas.formats.trace import parse_trace, trace_to_dict
from andreas.model import (Assignment, Config, Job, Node, Plan, PowerLevel, PowerLimits,
                           Snapshot)
from andreas.policies import POLICIES
from andreas.optimizer import decide
from andreas.optimizer.exact import enumerate_optimum
from andreas.simulator.bounds import onprem_lower_bound
from andreas.simulator.engine import simulate
from andreas.simulator.generate import generate_trace
from andreas.simulator.power_bound import energy_bound
from andreas.simulator.results import SimOptions

LIMITS = PowerLimits(min_w=100.0, max_w=250.0, default_w=250.0,
                     levels_w=(250.0, 225.0, 200.0, 175.0, 150.0))
# ResNet-50 on a V100 (Zeus NSDI '23, batch 256, made monotone)
RESNET = (PowerLevel(limit_w=250.0, time_factor=1.0, gpu_power_w=220.25),
          PowerLevel(limit_w=225.0, time_factor=1.0197, gpu_power_w=205.44),
          PowerLevel(limit_w=200.0, time_factor=1.0529, gpu_power_w=184.94),
          PowerLevel(limit_w=175.0, time_factor=1.0959, gpu_power_w=166.37),
          PowerLevel(limit_w=150.0, time_factor=1.1803, gpu_power_w=144.59))
TIMES = {"V100": (1000.0, 550.0, 400.0, 325.0)}


def node(name: str, limits: PowerLimits | None = LIMITS) -> Node:
    return Node(name=name, gpu_type="V100", gpus=4, power_w=(340.0, 565.0, 790.0, 1015.0,
                                                              1240.0), power_limits=limits)


def job(job_id: str, due_s: float, **kw) -> Job:
    return Job(id=job_id, submit_s=0.0, due_s=due_s, weight=0.01, epochs=10,
               epoch_time_s=TIMES, power_levels={"V100": RESNET}, **kw)


def snapshot(*jobs: Job, nodes: tuple[Node, ...] | None = None) -> Snapshot:
    return Snapshot(now_s=0.0, nodes=nodes or (node("n0"), node("n1")), jobs=jobs)


# --------------------------------------------------------------------------- documents

def test_documents_round_trip_and_old_ones_are_unchanged():
    s = snapshot(job("a", 1e5), replace(job("b", 1e5), running=Config(
        node="n0", gpus=2, power_limit_w=175.0)))
    doc = snapshot_to_dict(s)
    assert doc["nodes"][0]["power_limits"]["levels_w"] == [250.0, 225.0, 200.0, 175.0, 150.0]
    assert doc["jobs"][1]["running"]["power_limit_w"] == 175.0
    assert parse_snapshot(json.loads(json.dumps(doc))) == s
    plain = snapshot_to_dict(levels.without_levels(replace(s, jobs=(replace(
        s.jobs[0], power_levels={}),))))
    assert "power_limits" not in json.dumps(plain) and "power_levels" not in json.dumps(plain)
    trace = generate_trace(n_nodes=2, seed=3, workloads="zeus", jobs_per_node=2)
    assert parse_trace(json.loads(json.dumps(trace_to_dict(trace)))) == trace


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["nodes"][0]["power_limits"].update(levels_w=[250, 300]),
     ("node n0", "300 W is outside the GPU's range [100, 250]")),
    (lambda d: d["nodes"][0]["power_limits"].update(levels_w=[200, 150]),
     ("node n0", "must start with default_w")),
    (lambda d: d["jobs"][0]["power_levels"]["V100"][4].update(time_factor=0.5),
     ("job a", "power_levels.V100", "not monotone")),
    (lambda d: d["jobs"][0]["power_levels"]["V100"][4].update(gpu_power_w="x"),
     ("job a", "power_levels.V100[4].gpu_power_w", "number")),
    (lambda d: d["jobs"][0].update(running={"node": "n0", "gpus": 1, "power_limit_w": 90}),
     ("job a", "running.power_limit_w", "outside node n0's range")),
])
def test_bad_levels_are_one_line_naming_the_object(edit, words):
    doc = snapshot_to_dict(snapshot(job("a", 1e5)))
    edit(doc)
    with pytest.raises(InputError) as err:
        parse_snapshot(doc)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_options_default_first_and_missing_default_point_means_default_only():
    opts = levels.options(job("a", 1e5), node("n0"))
    assert [o.limit_w for o in opts] == [250.0, 225.0, 200.0, 175.0, 150.0]
    assert opts[0].time_factor == 1.0 and opts[0].delta_w == 0.0
    assert opts[4].delta_w == pytest.approx(144.59 - 220.25)
    no_default = replace(job("a", 1e5), power_levels={"V100": RESNET[1:]})
    assert [o.limit_w for o in levels.options(no_default, node("n0"))] == [250.0]
    assert levels.options(job("a", 1e5), node("n0", None)) == (levels.DEFAULT,)


# --------------------------------------------------------------------------- optimizer

@pytest.mark.parametrize("policy", ["greedy", "rg", "pr", "milp"])
def test_slack_runs_lower_tight_job_at_full_power(policy):
    # 10 epochs on 4 GPUs: 3 250 s at 250 W, 3 836 s at 150 W
    s = snapshot(job("slack", 1e5), job("tight", 3300.0))
    plan = decide(s, np.random.default_rng(0), policy, **({"iterations": 50}
                                                         if policy in ("rg", "pr") else {}))
    check_plan(s, plan)
    limit = {a.job: a.power_limit_w for a in plan.assignments}
    assert limit["tight"] == 250.0
    assert limit["slack"] is not None and limit["slack"] < 250.0
    ev = evaluate(s, plan)
    assert ev.level_cost < 0
    assert plan.objective == pytest.approx(ev.f_obj, rel=1e-9)


def test_levels_off_is_the_plan_of_a_snapshot_without_levels():
    s = snapshot(job("a", 1e5), job("b", 4000.0), job("c", 2e4))
    bare = Snapshot(now_s=0.0, nodes=(node("n0", None), node("n1", None)),
                    jobs=tuple(replace(j, power_levels={}) for j in s.jobs))
    for policy in ("greedy", "rg", "pr"):
        a = decide(levels.without_levels(s), np.random.default_rng(1), policy,
                   **POLICIES[policy].accepted({"iterations": 30}))
        b = decide(bare, np.random.default_rng(1), policy,
                   **POLICIES[policy].accepted({"iterations": 30}))
        assert a.assignments == b.assignments and a.objective == b.objective
        assert all(x.power_limit_w is None for x in a.assignments)


def test_milp_and_exact_agree_on_a_tiny_snapshot_with_levels():
    s = snapshot(job("a", 1e5), job("b", 5000.0), job("c", 3500.0),
                 nodes=(node("n0"),))
    milp = decide(s, np.random.default_rng(0), "milp")
    exact = enumerate_optimum(s)
    assert milp.objective == pytest.approx(exact.min_f_obj, rel=1e-9)
    assert evaluate(s, milp).f_obj == pytest.approx(exact.min_f_obj, rel=1e-9)


def test_feasibility_refuses_a_level_the_node_or_job_lacks():
    s = snapshot(job("a", 1e5))
    for limit in (160.0, 100.0):
        plan = Plan(policy="x", assignments=(Assignment(job="a", node="n0", gpus=1,
                                                        power_limit_w=limit),),
                    postponed=(), objective=0.0, objective_name="f_obj")
        with pytest.raises(Exception, match="power limit"):
            check_plan(s, plan)


def test_running_job_changes_level_in_place():
    run = replace(job("a", 1e5), epochs_done=3.5,
                  running=Config(node="n0", gpus=4, power_limit_w=250.0))
    plan = decide(snapshot(run), np.random.default_rng(0), "greedy")
    (act,) = plan.actions(snapshot(run))
    assert act.kind.value == "continue" and act.power_limit_w == 150.0


# --------------------------------------------------------------------------- simulator

@pytest.fixture(scope="module")
def zeus_trace():
    return generate_trace(n_nodes=3, seed=2, workloads="zeus", jobs_per_node=4)


def test_generated_zeus_trace_has_the_six_workloads_with_levels(zeus_trace):
    apps = {j.app for j in generate_trace(n_nodes=6, seed=1, workloads="zeus").jobs}
    assert apps == {"shufflenet-cifar100", "resnet50-imagenet", "deepspeech2-librispeech",
                    "ncf-movielens", "bert-squad", "bert-sentiment140"}
    assert all(n.power_limits is not None for n in zeus_trace.nodes)
    assert {n.gpu_type for n in zeus_trace.nodes} == {"V100", "P100"}
    assert all("V100" in j.power_levels for j in zeus_trace.jobs)
    assert levels.has_levels(zeus_trace)


def test_simulator_limits_save_energy_above_idle_and_off_is_the_bare_trace(zeus_trace):
    on = simulate(zeus_trace, "greedy", SimOptions())
    off = simulate(zeus_trace, "greedy", SimOptions(power_levels=False))
    bare = simulate(levels.without_levels(zeus_trace), "greedy", SimOptions())
    assert on.power_levels == "on" and off.power_levels == "off"
    assert (off.energy_kwh, off.total_cost) == (bare.energy_kwh, bare.total_cost)
    assert on.energy_above_idle_kwh < off.energy_above_idle_kwh
    assert any(a.power_limit_w not in (None, 250.0) for a in on.attempts)
    bound = energy_bound(zeus_trace)
    for r in (on, off):
        assert bound.above_idle_kwh <= r.energy_above_idle_kwh
        assert bound.total_kwh <= r.energy_kwh


def test_the_lp_bound_takes_every_level_as_a_configuration(zeus_trace):
    # a lower limit trades time for a smaller draw per busy GPU: the capacity-respecting
    # LP offers it as a column, so it lies below the LP of the bare trace and below the
    # bills with levels on and off
    with_levels = onprem_lower_bound(zeus_trace).total_cost
    bare = onprem_lower_bound(levels.without_levels(zeus_trace)).total_cost
    assert with_levels < bare
    for options in (SimOptions(), SimOptions(power_levels=False)):
        assert with_levels <= simulate(zeus_trace, "greedy", options).total_cost


def test_bound_is_each_job_alone_at_its_least_energy_level():
    s = snapshot(job("a", 1e5), nodes=(node("n0"),))
    trace = replace(generate_trace(n_nodes=1, seed=1, jobs_per_node=1), nodes=s.nodes,
                    jobs=s.jobs)
    bound = energy_bound(trace)
    per_gpu = 565.0 - 340.0           # the node's rise per busy GPU (linear curve)
    best = min(10 * 1000.0 * p.time_factor * (per_gpu + p.gpu_power_w - 220.25)
               for p in RESNET)        # 1 GPU is the least energy (Amdahl: s > 0)
    assert bound.above_idle_kwh == pytest.approx(best / 3.6e6)
    assert bound.total_kwh == pytest.approx((best + 340.0 * 10 * 325.0) / 3.6e6)


# --------------------------------------------------------------------------- commands

def test_commands_generate_simulate_and_optimize_with_levels(tmp_path):
    from click.testing import CliRunner

    from andreas.cli import main
    from andreas.formats.snapshot import snapshot_to_dict
    from andreas.formats.trace import load_trace

    run = CliRunner()
    trace_path = tmp_path / "z.json"
    r = run.invoke(main, ["trace", "generate", "--nodes", "2", "--seed", "4", "--workloads",
                          "zeus", "--jobs-per-node", "3", "--out", str(trace_path)])
    assert r.exit_code == 0, r.output
    trace = load_trace(trace_path)
    assert levels.has_levels(trace) and trace.name.startswith("exponential-n2-zeus")
    for mode, expect in (("on", "on"), ("off", "off")):
        r = run.invoke(main, ["simulate", "--trace", str(trace_path), "--policies", "greedy",
                              "--json", "--no-plots", "--workers", "1", "--power-levels",
                              mode, "--out", str(tmp_path / mode)])
        assert r.exit_code == 0, r.output
        (res,) = json.loads(r.output)
        assert res["power_levels"] == expect
        assert {"energy_kwh", "total_cost", "late_jobs", "energy_above_idle_kwh"} <= set(res)
    r = run.invoke(main, ["simulate", "--trace", str(trace_path), "--policies", "greedy",
                          "--json", "--no-plots", "--workers", "1", "--power-levels", "both",
                          "--out", str(tmp_path / "both")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [x["power_levels"] for x in doc["runs"]] == ["on", "off"]
    assert doc["bound"]["energy_kwh"] <= min(x["energy_kwh"] for x in doc["runs"])
    snap = snapshot(job("slack", 1e5), job("tight", 3300.0))
    snap_path = tmp_path / "s.json"
    snap_path.write_text(json.dumps(snapshot_to_dict(snap)))
    for mode in ("on", "off"):
        r = run.invoke(main, ["optimize", str(snap_path), "--policy", "greedy", "--json",
                              "--power-levels", mode])
        assert r.exit_code == 0, r.output
        got = {a["job"]: a["power_limit_w"] for a in json.loads(r.output)["assignments"]}
        if mode == "on":
            assert got["tight"] == 250.0 and got["slack"] < 250.0
        else:
            assert got == {"slack": None, "tight": None}
    bad = snapshot_to_dict(snap)
    bad["nodes"][0]["power_limits"]["levels_w"] = [250, 260]
    snap_path.write_text(json.dumps(bad))
    r = run.invoke(main, ["optimize", str(snap_path), "--json"])
    assert r.exit_code == 2 and "node n0" in r.output and "260 W is outside" in r.output


@pytest.mark.parametrize("policy", ["greedy", "rg", "pr", "milp"])
def test_a_level_change_of_a_running_job_is_no_move(policy):
    """A running job's limit changes in place (no restart), so with move costs on (a
    partial epoch and a restart overhead at stake) the policies still lower it, and the
    objective they report is costs.evaluate's, whose move cost is zero."""
    from andreas.model import Params
    from andreas.optimizer.problem import compile_problem

    run = replace(job("a", 1e5), epochs_done=3.5,
                  running=Config(node="n0", gpus=4, power_limit_w=250.0))
    s = replace(snapshot(run), params=Params(progress="epoch", restart_overhead_s=10.0))
    p = compile_problem(s)           # its 250 W level is not the one kept for (n0, 4)...
    assert p.run_node[0] == 0 and p.cfg_level[p.run_cfg[0]] == 0
    assert p.mv_same[0] > 0          # ...yet it still continues there, and a move costs
    plan = decide(s, np.random.default_rng(0), policy)
    (act,) = plan.actions(s)
    assert act.kind.value == "continue" and act.power_limit_w == 150.0
    ev = evaluate(s, plan)
    assert ev.move_cost == 0.0
    assert plan.objective == pytest.approx(ev.f_obj, rel=1e-9, abs=1e-9)
