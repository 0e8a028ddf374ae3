"""Policy milp against the brute-force enumerator, and the Hierarchical Method built on it.

milp is work-conserving by default (a job waits only if no node has room for it); the
enumerator offers the same restriction, and both are also checked without it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.cli import main
from andreas.costs import evaluate
from andreas.errors import InputError
from andreas.feasibility import check_plan
from andreas.model import (Assignment, CatalogEntry, Config, Job, Node, Params, Plan,
                           Snapshot)
from andreas.optimizer import decide
from andreas.optimizer.exact import enumerate_optimum, postponed_that_fit
from andreas.optimizer.hierarchical import controller_jobs
from andreas.formats.snapshot import load_snapshot
from andreas.synthetic import random_snapshot

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "example-snapshot-n10.json"


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def _cloud_running(snap: Snapshot, rng: np.random.Generator) -> Snapshot:
    """Cloud snapshot where the first node runs a VM and the first job on it, mid-epoch."""
    entry = snap.catalog[int(rng.integers(len(snap.catalog)))]
    job = snap.jobs[0]
    g = int(rng.integers(1, entry.gpus + 1))
    if job.remaining_s(entry.gpu_type, g) is None:
        return snap
    nodes = (dataclasses.replace(snap.nodes[0], config=entry.name),) + snap.nodes[1:]
    running = dataclasses.replace(job, running=Config(node=nodes[0].name, gpus=g),
                                  epochs_done=min(job.epochs - 1, job.epochs_done + 0.5))
    return dataclasses.replace(snap, nodes=nodes, jobs=(running,) + snap.jobs[1:])


def tiny(seed: int, cloud: bool) -> Snapshot:
    """A snapshot the enumerator can exhaust: on premise <= 3 x 5, cloud <= 2 x 4."""
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 3 if cloud else 4))
    jobs = int(rng.integers(1, 5 if cloud else 6))
    scenario = int(rng.integers(1, 3)) if nodes <= 2 else 1
    snap = random_snapshot(rng, nodes, jobs, scenario=scenario, cloud=cloud,
                           now_s=float(rng.uniform(0, 100_000)),
                           running_share=float(rng.choice([0.0, 0.6])))
    if cloud and rng.random() < 0.5:
        snap = _cloud_running(snap, rng)
    params = Params(mu=float(rng.choice([0.0, 1.0])),
                    progress=str(rng.choice(["epoch", "exact"])),
                    restart_overhead_s=float(rng.choice([0.0, 600.0])))
    return dataclasses.replace(snap, params=params)


# --------------------------------------------------------------------------- milp = brute force

@pytest.mark.parametrize("work_conserving", [True, False])
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cloud=st.booleans())
def test_milp_reaches_the_enumerated_optimum_of_f_obj(seed: int, cloud: bool,
                                                      work_conserving: bool) -> None:
    snap = tiny(seed, cloud)
    plan = decide(snap, np.random.default_rng(0), "milp", work_conserving=work_conserving)
    check_plan(snap, plan)
    exact = enumerate_optimum(snap, work_conserving=work_conserving)
    assert plan.stats["status"] == "optimal"
    # f_mix is what the MILP minimises in the cloud; on premise it is f_obj
    assert _close(plan.objective, exact.min_f_mix), (plan.objective, exact.min_f_mix)
    assert _close(plan.objective, evaluate(snap, plan).f_mix, 1e-12)
    assert plan.objective_name == ("f_mix" if cloud else "f_obj") and plan.policy == "milp"
    assert plan.stats["bound"] <= plan.objective * (1 + 1e-9) + 1e-9
    assert plan.stats["work_conserving"] == int(work_conserving)
    if work_conserving:
        assert postponed_that_fit(snap, plan) == ()


def _single_type_jobs(snap: Snapshot, rng: np.random.Generator) -> Snapshot:
    """Half of the jobs keep one GPU type only: several work-conserving profiles, and
    nodes that a waiting job cannot use (which must not hold it back)."""
    jobs = []
    for job in snap.jobs:
        types = sorted(job.epoch_time_s)
        if len(types) > 1 and rng.random() < 0.5 and job.running is None:
            keep = types[int(rng.integers(len(types)))]
            job = dataclasses.replace(job, epoch_time_s={keep: job.epoch_time_s[keep]})
        jobs.append(job)
    return dataclasses.replace(snap, jobs=tuple(jobs))


@pytest.mark.parametrize("cloud", [False, True])
def test_milp_matches_the_enumerator_when_jobs_use_one_gpu_type(cloud: bool) -> None:
    for seed in range(25):
        snap = _single_type_jobs(tiny(seed, cloud), np.random.default_rng(seed))
        for wc in (True, False):
            plan = decide(snap, np.random.default_rng(0), "milp", work_conserving=wc)
            check_plan(snap, plan)
            exact = enumerate_optimum(snap, work_conserving=wc)
            assert _close(plan.objective, exact.min_f_mix), (seed, wc)


def test_seeded_sweep_covers_every_setting() -> None:
    """The same check on fixed seeds, so each setting is surely visited (and counted), in
    both modes; the restriction must matter on some of them, or the check proves little."""
    seen = set()
    restricted = 0
    for seed in range(40):
        for cloud in (False, True):
            snap = tiny(seed, cloud)
            optima = {}
            for wc in (True, False):
                plan = decide(snap, np.random.default_rng(0), "milp", work_conserving=wc)
                optima[wc] = enumerate_optimum(snap, work_conserving=wc).min_f_mix
                assert _close(plan.objective, optima[wc]), (seed, cloud, wc)
            assert optima[True] >= optima[False] - 1e-9
            restricted += not _close(optima[True], optima[False])
            running = any(j.running is not None for j in snap.jobs)
            seen.add((cloud, running, snap.params.mu, snap.params.progress))
    assert len(seen) == 16
    assert restricted >= 10


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_cloud_enumerator_reports_plans_that_attain_its_optima(seed: int) -> None:
    snap = tiny(seed, cloud=True)
    exact = enumerate_optimum(snap)
    for chosen, configs, field, value in (
            (exact.argmin_f_obj, exact.argmin_node_configs, "f_obj", exact.min_f_obj),
            (exact.argmax_f_bar, exact.argmax_node_configs, "f_bar", exact.max_f_bar),
            (exact.argmin_f_mix, exact.argmin_mix_configs, "f_mix", exact.min_f_mix)):
        plan = Plan(policy="exact", objective=value, objective_name=field,
                    assignments=tuple(Assignment(job=j.id, node=snap.nodes[n].name, gpus=g)
                                      for j, (n, g) in zip(snap.jobs, chosen) if n >= 0),
                    postponed=tuple(j.id for j, (n, _) in zip(snap.jobs, chosen) if n < 0),
                    node_configs={snap.nodes[n].name: c for n, c in enumerate(configs)
                                  if c is not None})
        check_plan(snap, plan)
        assert _close(getattr(evaluate(snap, plan), field), value, 1e-9)


def test_milp_is_never_worse_than_the_heuristics_on_small_snapshots() -> None:
    """The work-conserving optimum bounds every work-conserving plan (greedy's always is;
    rg's and the baselines' one-job-per-node plans may not be), the unrestricted one all."""
    compared = 0
    for seed in range(6):
        for cloud in (False, True):
            snap = random_snapshot(np.random.default_rng(seed), 3, 8, cloud=cloud)
            best = decide(snap, np.random.default_rng(0), "milp")
            free = decide(snap, np.random.default_rng(0), "milp", work_conserving=False)
            assert best.stats["status"] == free.stats["status"] == "optimal"
            assert free.objective <= best.objective * (1 + 1e-9) + 1e-9
            for policy in ("greedy", "rg", "fifo", "edf"):
                plan = decide(snap, np.random.default_rng(0), policy)
                other = evaluate(snap, plan).f_mix
                assert free.objective <= other * (1 + 1e-9) + 1e-9, policy
                if policy == "greedy":
                    assert postponed_that_fit(snap, plan) == ()
                if not postponed_that_fit(snap, plan):
                    assert best.objective <= other * (1 + 1e-9) + 1e-9, policy
                    compared += 1
    assert compared >= 24


@pytest.mark.parametrize("cloud", [False, True])
def test_work_conserving_milp_never_postpones_a_job_that_fits(cloud: bool) -> None:
    """Checked by ``postponed_that_fit`` (written from the snapshot, not from the model) on
    snapshots big enough to leave jobs waiting; the unrestricted optimum does leave some
    that fit, so the check is not vacuous."""
    unrestricted_idle = 0
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        snap = random_snapshot(rng, int(rng.integers(2, 5)), int(rng.integers(6, 14)),
                               scenario=int(rng.integers(1, 3)), cloud=cloud,
                               running_share=0.4)
        snap = dataclasses.replace(snap, params=Params(mu=float(seed % 2)))
        plan = decide(snap, np.random.default_rng(0), "milp")
        check_plan(snap, plan)
        assert plan.stats["status"] == "optimal"
        assert postponed_that_fit(snap, plan) == ()
        free = decide(snap, np.random.default_rng(0), "milp", work_conserving=False)
        unrestricted_idle += bool(postponed_that_fit(snap, free))
    assert unrestricted_idle >= 1


def _on_time_job(job_id: str) -> Job:
    """A 1-GPU job far from its due date: postponing it costs nothing."""
    return Job(id=job_id, submit_s=0, due_s=1e7, weight=0.01, epochs=10,
               epoch_time_s={"V100": (60.0,)})


def test_on_time_jobs_next_to_idle_gpus_run_only_when_work_conserving() -> None:
    """Two jobs that meet their due date even after a period of waiting: postponing both
    is free, so plain f_obj prefers an idle node; the work-conserving plan runs both."""
    node = Node(name="n1", gpu_type="V100", gpus=4, power_w=(100.0, 300.0, 500.0, 700.0, 900.0))
    snap = Snapshot(now_s=0.0, nodes=(node,), jobs=(_on_time_job("a"), _on_time_job("b")))
    free = decide(snap, np.random.default_rng(0), "milp", work_conserving=False)
    assert set(free.postponed) == {"a", "b"} and free.objective == 0.0
    plan = decide(snap, np.random.default_rng(0), "milp")
    assert plan.postponed == () and {a.job for a in plan.assignments} == {"a", "b"}
    assert _close(plan.objective, enumerate_optimum(snap).min_f_obj)


def test_cloud_work_conservation_opens_closed_nodes_and_fills_the_largest_vm() -> None:
    """In the cloud a closed node could open any VM and an open node could be its type's
    largest VM: four 1-GPU jobs fill two 2-GPU VMs, and a fifth may wait."""
    catalog = (CatalogEntry(name="small", gpu_type="V100", gpus=1, cost_per_hour=1.0),
               CatalogEntry(name="big", gpu_type="V100", gpus=2, cost_per_hour=1.5))
    nodes = (Node(name="n1"), Node(name="n2"))
    jobs = tuple(_on_time_job(x) for x in "abcd")
    snap = Snapshot(now_s=0.0, nodes=nodes, jobs=jobs, catalog=catalog)
    free = decide(snap, np.random.default_rng(0), "milp", work_conserving=False)
    assert len(free.postponed) == 4
    plan = decide(snap, np.random.default_rng(0), "milp")
    check_plan(snap, plan)
    assert plan.postponed == () and dict(plan.node_configs) == {"n1": "big", "n2": "big"}
    five = dataclasses.replace(snap, jobs=jobs + (_on_time_job("e"),))
    plan = decide(five, np.random.default_rng(0), "milp")
    assert len(plan.postponed) == 1 and postponed_that_fit(five, plan) == ()


def test_work_conserving_option_must_be_a_boolean() -> None:
    snap = random_snapshot(np.random.default_rng(1), 2, 3)
    with pytest.raises(InputError, match="work_conserving"):
        decide(snap, np.random.default_rng(0), "milp", work_conserving="no")


def test_nothing_runnable_postpones_everything_and_is_optimal() -> None:
    node = Node(name="n1", gpu_type="V100", gpus=2, power_w=(100.0, 200.0, 300.0))
    job = Job(id="a", submit_s=0, due_s=100, weight=0.01, epochs=10,
              epoch_time_s={"T4": (60.0,)})
    snap = Snapshot(now_s=0.0, nodes=(node,), jobs=(job,))
    plan = decide(snap, np.random.default_rng(0), "milp")
    assert plan.postponed == ("a",) and plan.stats["status"] == "optimal"
    assert _close(plan.objective, getattr(evaluate(snap, plan), plan.objective_name), 1e-12)
    empty = decide(dataclasses.replace(snap, jobs=()), np.random.default_rng(0), "milp")
    assert empty.assignments == () and empty.objective == 0.0


# --------------------------------------------------------------------------- limits and errors

@pytest.mark.parametrize("cloud", [False, True])
def test_time_limit_returns_a_feasible_plan_with_its_status(cloud: bool) -> None:
    snap = random_snapshot(np.random.default_rng(5), 20 if cloud else 40, 60 if cloud else 150,
                           scenario=2, cloud=cloud)
    plan = decide(snap, np.random.default_rng(0), "milp", time_limit_s=0.01)
    check_plan(snap, plan)
    assert plan.stats["status"] != "optimal"
    assert plan.stats["mip_gap"] > 0
    assert _close(plan.objective, getattr(evaluate(snap, plan), plan.objective_name), 1e-12)
    assert plan.objective <= plan.stats["greedy_objective"] * (1 + 1e-12) + 1e-9


def _with_job(snap: Snapshot, **changes) -> Snapshot:
    return dataclasses.replace(snap, jobs=(dataclasses.replace(snap.jobs[0], **changes),)
                               + snap.jobs[1:])


@pytest.mark.parametrize(("change", "words"), [
    ({"weight": float("nan")}, "weight"),
    ({"due_s": float("inf")}, "due_s"),
    ({"epochs_done": float("nan")}, "epochs_done"),
    ({"weight": 1e300}, "beyond"),
])
def test_unrepresentable_snapshots_are_one_line_input_errors(change: dict, words: str) -> None:
    snap = _with_job(random_snapshot(np.random.default_rng(1), 2, 3), **change)
    with pytest.raises(InputError) as err:
        decide(snap, np.random.default_rng(0), "milp")
    message = str(err.value)
    assert words in message and "j00001" in message and "\n" not in message


@pytest.mark.parametrize("options", [{"time_limit_s": 0}, {"time_limit_s": float("inf")},
                                     {"mip_gap": 1.5}, {"mip_gap": -0.1},
                                     {"max_variables": 10}])
def test_bad_options_and_too_large_models_are_input_errors(options: dict) -> None:
    snap = random_snapshot(np.random.default_rng(1), 2, 3)
    with pytest.raises(InputError) as err:
        decide(snap, np.random.default_rng(0), "milp", **options)
    assert next(iter(options)) in str(err.value)


# --------------------------------------------------------------------------- CLI

def test_cli_optimize_milp_json_has_objective_status_and_gap() -> None:
    result = CliRunner().invoke(main, ["optimize", str(EXAMPLE), "--policy", "milp", "--json",
                                       "--time-limit-s", "30", "--mip-gap", "0"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    snap = load_snapshot(str(EXAMPLE))
    assert doc["objective_name"] == "f_obj"
    assert doc["stats"]["status"] == "optimal"
    assert doc["stats"]["mip_gap"] <= 1e-6
    assert doc["stats"]["time_limit_s"] == 30.0
    plan = Plan(policy="milp", objective=doc["objective"], objective_name="f_obj",
                assignments=tuple(Assignment(**a) for a in doc["assignments"]),
                postponed=tuple(doc["postponed"]))
    assert _close(doc["objective"], evaluate(snap, plan).f_obj, 1e-9)


def test_cli_solver_options_are_checked_and_refused_by_other_policies() -> None:
    bad = CliRunner().invoke(main, ["optimize", str(EXAMPLE), "--policy", "milp",
                                    "--mip-gap", "1.5"])
    assert bad.exit_code == 2 and "--mip-gap" in bad.output
    ok = CliRunner().invoke(main, ["optimize", str(EXAMPLE), "--policy", "milp", "--json",
                                   "--time-limit-s", "5", "--mip-gap", "0.1"])
    assert ok.exit_code == 0 and json.loads(ok.output)["policy"] == "milp"
    other = CliRunner().invoke(main, ["optimize", str(EXAMPLE), "--policy", "greedy",
                                      "--mip-gap", "0.1"])
    assert other.exit_code == 2 and "--mip-gap: not an option of policy greedy" in other.output


# --------------------------------------------------------------------------- hierarchical

@pytest.mark.parametrize("cloud", [False, True])
def test_hierarchical_plans_are_feasible_and_scored_on_the_whole_snapshot(cloud: bool) -> None:
    nodes, jobs, seed = (7, 12, 15) if cloud else (12, 30, 11)
    snap = random_snapshot(np.random.default_rng(seed), nodes, jobs, cloud=cloud,
                           running_share=0.5)
    plan = decide(snap, np.random.default_rng(0), "hierarchical")
    check_plan(snap, plan)
    assert plan.stats["controllers"] == (2 if cloud else 3)
    assert _close(plan.objective, getattr(evaluate(snap, plan), plan.objective_name), 1e-12)
    # each controller conserves work on its own nodes only, so the merged plan is bounded
    # by the unrestricted optimum, not necessarily by the work-conserving one
    optimum = decide(snap, np.random.default_rng(0), "milp", work_conserving=False)
    assert optimum.stats["status"] == "optimal"
    assert optimum.objective <= plan.objective * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize(("seed", "cloud"), [(0, False), (2, False), (1, True), (4, True)])
def test_hierarchical_is_milp_when_there_are_at_most_five_nodes(seed: int, cloud: bool) -> None:
    snap = random_snapshot(np.random.default_rng(seed), 5, 9, cloud=cloud)
    milp = decide(snap, np.random.default_rng(0), "milp")
    exact = decide(snap, np.random.default_rng(0), "hierarchical", mip_gap=0.0,
                   time_limit_s=60.0)
    assert (exact.assignments, exact.postponed, dict(exact.node_configs)) == (
        milp.assignments, milp.postponed, dict(milp.node_configs))
    within = decide(snap, np.random.default_rng(0), "hierarchical", time_limit_s=60.0)
    assert within.stats["status"] in ("optimal", "gap_reached")
    assert within.objective <= milp.objective / 0.95 + 1e-9   # the 5 % MIP gap
    assert postponed_that_fit(snap, exact) == ()
    free = decide(snap, np.random.default_rng(0), "hierarchical", mip_gap=0.0,
                  time_limit_s=60.0, work_conserving=False)
    plain = decide(snap, np.random.default_rng(0), "milp", work_conserving=False)
    assert _close(free.objective, plain.objective)


def test_hierarchical_is_deterministic() -> None:
    snap = random_snapshot(np.random.default_rng(3), 11, 24, scenario=2)
    a = decide(snap, np.random.default_rng(1), "hierarchical")
    b = decide(snap, np.random.default_rng(2), "hierarchical")
    assert (a.assignments, a.postponed, a.objective) == (b.assignments, b.postponed, b.objective)


def test_controllers_keep_running_jobs_and_deal_the_others_round_robin() -> None:
    snap = random_snapshot(np.random.default_rng(4), 12, 40, running_share=0.5)
    groups = [tuple(n.name for n in snap.nodes[i:i + 5]) for i in range(0, 12, 5)]
    dealt = controller_jobs(snap, groups)
    assert sorted(j.id for jobs in dealt for j in jobs) == sorted(j.id for j in snap.jobs)
    for names, jobs in zip(groups, dealt):
        for job in jobs:
            if job.running is not None:
                assert job.running.node in names
    waiting = [sum(j.running is None for j in jobs) for jobs in dealt]
    assert max(waiting) - min(waiting) <= 1
