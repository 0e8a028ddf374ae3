"""The genetic scheduler (``ga``, ``ga-energy``): Algorithm 1's candidates, Algorithm 3's
fitness, the compiled decoders against the ledger and costs.evaluate, the seeds' floor,
reproducibility, and the options through the simulator and the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from andreas.cli import main
from andreas.costs import evaluate
from andreas.errors import InputError
from andreas.feasibility import check_plan
from andreas.formats.trace import dump_trace
from andreas.model import GPU_MILLI, Config, Demand, Job, Node, Plan, Snapshot, Trace
from andreas.optimizer import decide
from andreas.optimizer.construction import construct
from andreas.optimizer.genetic import (ALLOCATION, CONSOLIDATED, INFEASIBLE,
                                       MUTATION_HIGH_QUALITY, MUTATION_LOW_QUALITY, NEXT_FIT,
                                       SKIP, STRICT, PackingGenome, _AdaptiveMutation,
                                       allocation)
from andreas.optimizer.genetic_energy import EnergyGenome
from andreas.optimizer.packing import Packing, Reservation, reservation
from andreas.optimizer.problem import compile_problem
from andreas.resources import Ledger, demand_of
from andreas.simulator.engine import simulate
from andreas.simulator.results import SimOptions
from andreas.synthetic import random_snapshot

SMALL = {"population": 12, "generations": 6}


def node(name: str, gpu_type: str = "T4", gpus: int = 2, **caps) -> Node:
    return Node(name=name, gpu_type=gpu_type, gpus=gpus,
                power_w=tuple(100.0 + 50 * g for g in range(gpus + 1)), **caps)


def task(jid: str, milli: int = 1000, gpus: int = 1, cpu: int = 0, mem: int = 0,
         types: tuple[str, ...] = ("T4", "V100"), submit: float = 0.0, epochs: int = 2,
         running: Config | None = None) -> Job:
    return Job(id=jid, submit_s=submit, due_s=submit + 5000, weight=0.01, epochs=epochs,
               epoch_time_s={t: (100.0,) * 8 for t in types}, running=running,
               demand=Demand(gpus=gpus, gpu_milli=milli, cpu_milli=cpu, memory_mib=mem))


def demand_snapshot(seed: int, n_nodes: int = 6, n_tasks: int = 30) -> Snapshot:
    """Slices and whole GPUs, CPU and memory, on T4x2 and V100x4 nodes, some running."""
    rng = np.random.default_rng(seed)
    nodes = tuple(node(f"n{i}", *(("V100", 4) if i % 3 == 0 else ("T4", 2)),
                       cpu_milli=16000, memory_mib=64000) for i in range(n_nodes))
    jobs = []
    for k in range(n_tasks):
        milli = int(rng.choice([200, 300, 500, 700, 1000, 1000]))
        gpus = 1 if milli < 1000 else int(rng.choice([1, 1, 2, 4]))
        types = ("V100",) if gpus > 2 else ("T4", "V100")
        jobs.append(task(f"t{k:03d}", milli, gpus, cpu=int(rng.choice([1000, 2000, 4000])),
                         mem=int(rng.choice([4000, 8000, 16000])), types=types,
                         submit=float(k)))
    snap = Snapshot(now_s=100.0, nodes=nodes, jobs=tuple(jobs))
    first = decide(snap, np.random.default_rng(0), "first-fit")    # a third already runs
    placed = {a.job: a for a in first.assignments}
    running = [dataclasses.replace(j, running=Config(node=placed[j.id].node,
                                                     gpus=placed[j.id].gpus,
                                                     gpu_ids=placed[j.id].gpu_ids))
               if j.id in placed and k % 3 == 0 else j for k, j in enumerate(jobs)]
    return dataclasses.replace(snap, jobs=tuple(running))


# -- Algorithm 1: the candidate list ------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_candidates_are_the_nodes_where_each_waiting_task_fits_now(seed: int) -> None:
    snap = demand_snapshot(seed)
    genome = PackingGenome(snap)
    led = Ledger(snap.nodes)
    for job in snap.jobs:            # the running tasks, where they run
        if job.running is not None:
            led.place(demand_of(job), led.index[job.running.node], job.running.gpu_ids, job.id)
    genes = {job.id: cands for job, cands in zip(genome.jobs, genome.candidates)}
    for job in sorted((j for j in snap.jobs if j.running is None),
                      key=lambda j: (j.submit_s, j.id)):
        d = demand_of(job)
        expected = [i for i, n in enumerate(snap.nodes)
                    if job.runs_on(n.gpu_type or "", d.gpus) and led.fit(d, i) is not None]
        if expected:
            assert genes[job.id].tolist() == expected, job.id
        else:
            assert job.id in genome.unplaceable
    assert [j.id for j in genome.jobs] == sorted(genes, key=lambda i: (
        next(j.submit_s for j in snap.jobs if j.id == i), i))      # submission order
    assert (genome.sizes == [len(c) + 1 for c in genome.candidates]).all()   # + wait


# -- Algorithm 3: the fitness and the decoders --------------------------------------------

def test_a_chromosome_that_overbooks_a_node_scores_minus_one() -> None:
    """Each task fits n0 alone (3 of its 4 CPUs), not both: both on n0 is infeasible."""
    snap = Snapshot(now_s=0.0, nodes=(node("n0", cpu_milli=4000), node("n1", cpu_milli=4000)),
                    jobs=(task("a", cpu=3000), task("b", cpu=3000, submit=1.0)))
    genome = PackingGenome(snap)
    assert [c.tolist() for c in genome.candidates] == [[0, 1], [0, 1]]
    both_on_n0 = np.array([[0, 0]])
    apart = np.array([[0, 1]])
    strict = genome.fitness(STRICT)
    assert strict(both_on_n0)[0] == INFEASIBLE
    assert strict(apart)[0] == pytest.approx(2000 / 4000)
    assert genome.fitness(SKIP)(both_on_n0)[0] == pytest.approx(1000 / 4000)   # b waits
    assert genome.fitness(NEXT_FIT)(both_on_n0)[0] == pytest.approx(2000 / 4000)  # b to n1
    waiting = np.array([[2, 2]])                           # the "wait" value of each gene
    assert strict(waiting)[0] == 0.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), decoder=st.sampled_from([SKIP, NEXT_FIT, STRICT]))
def test_the_compiled_decoder_places_what_the_ledger_places(seed: int, decoder: int) -> None:
    snap = demand_snapshot(seed % 50, n_nodes=5, n_tasks=25)
    genome = PackingGenome(snap)
    rng = np.random.default_rng(seed)
    pop = np.floor(rng.random((8, genome.n_genes)) * genome.sizes).astype(np.int64)
    gain, _ = genome.decode(pop, decoder)
    for row, g in zip(pop, gain):
        if g < 0:
            assert decoder == STRICT
            continue
        plan = genome.to_plan(row, decoder, "ga", {})
        check_plan(snap, plan)
        assert allocation(snap, plan) == pytest.approx((genome.before + g) / genome.capacity)


def test_first_fit_is_a_chromosome_that_decodes_to_its_own_plan() -> None:
    for seed in range(5):
        snap = demand_snapshot(seed)
        genome = PackingGenome(snap)
        ff = decide(snap, np.random.default_rng(0), "first-fit")
        genes = genome.chromosome(ff)
        for decoder in (SKIP, NEXT_FIT, STRICT):
            again = genome.to_plan(genes, decoder, "first-fit", {})
            assert set(again.assignments) == set(ff.assignments)
            assert genome.fitness(decoder)(genes[None, :])[0] == pytest.approx(
                allocation(snap, ff) - genome.before / genome.capacity)


def test_the_consolidated_fitness_breaks_ties_by_whole_free_gpus_kept_together() -> None:
    """Two half-GPU slices on two 2-GPU nodes: together on one GPU of n0 they leave 1 + 4
    whole free GPUs squared, on one GPU of each node 1 + 1; the allocation is the same."""
    snap = Snapshot(now_s=0.0, nodes=(node("n0"), node("n1")),
                    jobs=(task("a", 500), task("b", 500, submit=1.0)))
    genome = PackingGenome(snap)
    together, apart = np.array([[0, 0]]), np.array([[0, 1]])
    plain = genome.fitness(NEXT_FIT, ALLOCATION)
    assert plain(together)[0] == plain(apart)[0] == pytest.approx(1000 / 4000)
    tied = genome.fitness(NEXT_FIT, CONSOLIDATED)
    assert tied(together)[0] > tied(apart)[0] > plain(apart)[0]
    assert genome.decode_all(together, NEXT_FIT)[2][0] == 1 + 4
    assert genome.decode_all(apart, NEXT_FIT)[2][0] == 1 + 1
    # both waiting leave every GPU free, the term's largest value: still under one
    # milli-GPU of allocation, so any placement outranks it
    nothing = np.array([[2, 2]])
    assert genome.decode_all(nothing, NEXT_FIT)[2][0] == genome.free_max == 4 + 4
    assert 0 < tied(nothing)[0] < 1 / genome.capacity


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_the_consolidation_term_never_outweighs_one_milli_gpu(seed: int) -> None:
    """Ranking by the consolidated fitness is ranking by allocation first: the term is
    what the ledger says is free after the plan, and below one milli-GPU of allocation."""
    snap = demand_snapshot(seed % 50, n_nodes=5, n_tasks=25)
    genome = PackingGenome(snap)
    rng = np.random.default_rng(seed)
    pop = np.floor(rng.random((16, genome.n_genes)) * genome.sizes).astype(np.int64)
    gain, _, free = genome.decode_all(pop, NEXT_FIT)
    score = genome.fitness(NEXT_FIT, CONSOLIDATED)(pop)
    extra = (score - gain / genome.capacity) * genome.capacity
    assert ((extra >= 0) & (extra < 1)).all()
    for i in np.argsort(-score)[:-1]:
        assert all(gain[i] >= g for g, sc in zip(gain, score) if sc < score[i])
    for row, f in zip(pop, free):
        led = Ledger(snap.nodes)
        jobs = {j.id: j for j in snap.jobs}
        for a in genome.to_plan(row, NEXT_FIT, "ga", {}).assignments:
            led.place(demand_of(jobs[a.job], a.gpus), led.index[a.node], a.gpu_ids, a.job)
        assert f == int(((led.gpu_free == GPU_MILLI).sum(axis=1) ** 2).sum())


def test_adaptive_mutation_mutates_below_average_offspring_more() -> None:
    sizes = np.full(400, 10_000, dtype=np.int64)   # a drawn value is almost never the old one
    offspring = np.zeros((200, 400), dtype=np.int64)
    fitness = lambda rows: np.where(np.arange(len(rows)) < 100, 0.0, 1.0)  # noqa: E731
    ga = SimpleNamespace(last_generation_fitness=np.array([0.5]),
                         numpy_random_generator=np.random.default_rng(0))
    out = _AdaptiveMutation(fitness, sizes)(offspring, ga)
    changed = (out != offspring).mean(axis=1)
    assert changed[:100].mean() == pytest.approx(MUTATION_LOW_QUALITY, abs=0.01)
    assert changed[100:].mean() == pytest.approx(MUTATION_HIGH_QUALITY, abs=0.01)
    assert (out < sizes).all() and (out >= 0).all()


# -- policy ga ----------------------------------------------------------------------------

@pytest.mark.parametrize("decoder,fitness", [("next-fit", "consolidated"),
                                             ("next-fit", "allocation"),
                                             ("skip", "consolidated"),
                                             ("strict", "allocation")])
def test_ga_is_feasible_and_never_below_its_seeds(decoder: str, fitness: str) -> None:
    """Without backfilling (the paper's GA): never below First-Fit, Tetris, Best-Fit."""
    for seed in range(4):
        snap = demand_snapshot(seed, n_nodes=6, n_tasks=40)
        plan = decide(snap, np.random.default_rng(seed), "ga", decoder=decoder,
                      fitness=fitness, backfill=False, **SMALL)
        check_plan(snap, plan)
        assert plan.objective_name == "gpu_allocation"
        assert plan.objective == pytest.approx(allocation(snap, plan))
        for baseline in ("first-fit", "tetris", "best-fit"):
            other = decide(snap, np.random.default_rng(seed), baseline)
            assert plan.objective >= allocation(snap, other) - 1e-12, (baseline, seed)


def test_ga_keeps_running_tasks_on_their_gpus() -> None:
    snap = demand_snapshot(3)
    plan = decide(snap, np.random.default_rng(0), "ga", **SMALL)
    for job in snap.jobs:
        if job.running is not None:
            cfg = plan.config_of(job.id)
            assert cfg is not None and cfg.node == job.running.node
            assert cfg.gpu_ids == job.running.gpu_ids


@pytest.mark.parametrize("policy,snap", [
    ("ga", demand_snapshot(1)),
    ("ga", random_snapshot(np.random.default_rng(2), 8, 25)),
    ("ga-energy", random_snapshot(np.random.default_rng(3), 8, 25, scenario=2)),
])
def test_same_seed_same_plan_bit_for_bit(policy: str, snap: Snapshot) -> None:
    a = decide(snap, np.random.default_rng(42), policy, **SMALL)
    b = decide(snap, np.random.default_rng(42), policy, **SMALL)
    assert a == b
    assert a.objective.hex() == b.objective.hex()


@pytest.mark.parametrize("population", [1, 2, 3])
def test_tiny_populations_run(population: int) -> None:
    snap = demand_snapshot(0, n_nodes=3, n_tasks=10)
    plan = decide(snap, np.random.default_rng(0), "ga", population=population, generations=2)
    check_plan(snap, plan)


@pytest.mark.parametrize("bad", [{"population": 0}, {"generations": -1},
                                 {"population": 2.5}, {"decoder": "best"},
                                 {"fitness": "utilisation"}])
def test_bad_ga_options_name_their_field(bad: dict) -> None:
    snap = demand_snapshot(0, n_nodes=2, n_tasks=4)
    ga_only = "decoder" in bad or "fitness" in bad
    for policy in ("ga", "ga-energy") if not ga_only else ("ga",):
        s = snap if policy == "ga" else random_snapshot(np.random.default_rng(0), 2, 4)
        with pytest.raises(InputError) as err:
            decide(s, np.random.default_rng(0), policy, **bad)
        assert str(err.value).startswith(next(iter(bad)))


# -- policy ga-energy ---------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_the_energy_decoder_is_f_obj(seed: int) -> None:
    snap = random_snapshot(np.random.default_rng(seed), 6 + 4 * seed, 10 + 15 * seed,
                           scenario=1 + seed % 2)
    problem = compile_problem(snap)
    batch = construct(problem, 20, np.random.default_rng(seed))
    exact = EnergyGenome(problem, work_conserving=False)   # rg's rows decode to themselves
    rows = np.array([exact.chromosome(batch.node[r], batch.cfg[r]) for r in range(20)])
    f, _, _ = exact.decode(rows)
    assert f == pytest.approx(batch.f_obj, rel=1e-9)
    from andreas.optimizer.solution import to_plan
    rng = np.random.default_rng(seed)
    for genome in (exact, EnergyGenome(problem)):
        random_rows = np.floor(rng.random((5, genome.n_genes)) * genome.sizes).astype(np.int64)
        f, node, cfg = genome.decode(random_rows)
        for r in range(5):
            plan = to_plan(problem, node[r], cfg[r], np.full(problem.n_nodes, -1), policy="x",
                           objective=f[r], objective_name="f_obj")
            check_plan(snap, plan)
            assert evaluate(snap, plan).f_obj == pytest.approx(f[r], rel=1e-9)
            if genome.work_conserving:     # a job waits only when no configuration fits
                placed = node[r] >= 0
                free = genome.node_gpus - np.bincount(
                    node[r][placed], weights=problem.cfg_g[cfg[r][placed]],
                    minlength=problem.n_nodes)
                for k, j in enumerate(genome.gene_job):
                    if node[r][j] < 0:
                        span = slice(genome.cand_ptr[k], genome.cand_ptr[k + 1])
                        assert (free[genome.cand_node[span]]
                                < problem.cfg_g[genome.cand_cfg[span]]).all()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), nodes=st.integers(1, 12), jobs=st.integers(1, 40),
       scenario=st.sampled_from([1, 2]))
def test_ga_energy_is_never_worse_than_rg_nor_greedy(seed: int, nodes: int, jobs: int,
                                                     scenario: int) -> None:
    snap = random_snapshot(np.random.default_rng(seed), nodes, jobs, scenario=scenario)
    ga = decide(snap, np.random.default_rng(seed), "ga-energy", iterations=30, **SMALL)
    rg = decide(snap, np.random.default_rng(seed), "rg", iterations=30)
    greedy = decide(snap, np.random.default_rng(seed), "greedy")
    check_plan(snap, ga)
    assert ga.objective_name == "f_obj"
    assert ga.objective == pytest.approx(evaluate(snap, ga).f_obj, rel=1e-12)
    assert ga.objective <= rg.objective * (1 + 1e-9) + 1e-9
    assert ga.objective <= greedy.objective * (1 + 1e-9) + 1e-9


def test_ga_energy_refuses_cloud_and_rigid_tasks() -> None:
    cloud = random_snapshot(np.random.default_rng(0), 3, 5, cloud=True)
    with pytest.raises(InputError, match="on-premise"):
        decide(cloud, np.random.default_rng(0), "ga-energy")
    with pytest.raises(InputError, match="elastic"):
        decide(demand_snapshot(0, 2, 4), np.random.default_rng(0), "ga-energy")


# -- the simulator and the CLI ------------------------------------------------------------

def demand_trace(n_tasks: int = 16) -> Trace:
    jobs = tuple(task(f"t{k:02d}", [250, 500, 1000][k % 3], submit=40.0 * k, epochs=3)
                 for k in range(n_tasks))
    return Trace(nodes=(node("n0"), node("n1", "V100", 4)), jobs=jobs, name="slices")


def test_the_simulator_passes_population_and_generations() -> None:
    trace = demand_trace()
    opts = SimOptions(period_s=0, ga_population=6, ga_generations=3)
    res = simulate(trace, "ga", opts)
    assert len(res.jobs) == len(trace.jobs)
    assert 0 < res.gpu_utilization <= 1
    with pytest.raises(InputError, match="ga_population"):
        SimOptions(ga_population=0)


def test_the_simulator_passes_ga_s_fitness_and_only_to_ga(monkeypatch) -> None:
    import andreas.simulator.engine as engine
    from andreas.optimizer.genetic import DEFAULT_FITNESS, FITNESSES
    from andreas.simulator.results import GA_FITNESSES

    assert set(GA_FITNESSES) == set(FITNESSES) and DEFAULT_FITNESS in GA_FITNESSES
    seen: list[tuple[str, object, object]] = []
    real = engine.decide

    def spy(snapshot, rng, name, **kw):
        seen.append((name, kw.get("fitness"), kw.get("backfill")))
        return real(snapshot, rng, name, **kw)

    monkeypatch.setattr(engine, "decide", spy)
    opts = SimOptions(period_s=0, ga_population=6, ga_generations=2, ga_fitness="allocation",
                      ga_backfill=False)
    for policy in ("ga", "first-fit"):
        simulate(demand_trace(6), policy, opts)
    assert {(f, b) for name, f, b in seen if name == "ga"} == {("allocation", False)}
    assert {(f, b) for name, f, b in seen if name == "first-fit"} == {(None, None)}
    with pytest.raises(InputError, match="ga_fitness"):
        SimOptions(ga_fitness="utilisation")


def test_simulate_ga_and_bad_ga_options_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    dump_trace(demand_trace(), path)
    out = tmp_path / "out"
    ok = CliRunner().invoke(main, [
        "simulate", "--trace", str(path), "--policies", "first-fit,ga", "--json",
        "--workers", "1", "--no-plots", "--out", str(out), "--ga-population", "8",
        "--ga-generations", "3", "--no-ga-backfill"])
    assert ok.exit_code == 0, ok.output
    rows = {r["policy"]: r for r in json.loads(ok.stdout)}
    assert rows["ga"]["options"]["ga_population"] == 8
    assert rows["ga"]["options"]["ga_fitness"] is None
    assert rows["ga"]["options"]["ga_backfill"] is False
    assert 0 < rows["ga"]["gpu_utilization_scheduling"] <= 1
    for flag, value in (("--ga-population", "0"), ("--ga-generations", "-3"),
                        ("--ga-population", "-1"), ("--ga-fitness", "utilisation")):
        bad = tmp_path / f"bad{flag}{value}"
        result = CliRunner().invoke(main, [
            "simulate", "--trace", str(path), "--policies", "ga", "--quiet",
            "--out", str(bad), flag, value])
        assert result.exit_code == 2, result.output
        last = result.stderr.strip().splitlines()[-1]      # click's or andreas' one line
        assert flag in last and value in last, result.stderr
        assert not bad.exists()


# -- the seeds: Tetris and Best-Fit as matrices equal their former loops -------------------

def _tetris_loop(snapshot: Snapshot) -> Plan:
    """decide_tetris before it kept its scores in a matrix (commit 69b8b25)."""
    from andreas.optimizer.packing import Packing, _capacities, _finite
    from andreas.resources import held_milli
    p = Packing(snapshot)
    led = p.ledger
    caps = _capacities(snapshot)
    left = list(p.waiting)
    demands = {job.id: demand_of(job) for job in left}
    accepted = {job.id: p.candidates(job, demands[job.id]) for job in left}
    while left:
        free = np.stack([_finite(led.cpu_free), _finite(led.mem_free),
                         np.clip(led.gpu_free, 0, None).sum(axis=1).astype(float)], axis=1)
        free_n = np.divide(free, caps, out=np.zeros_like(free), where=caps > 0)
        top = None
        for k, job in enumerate(left):
            d = demands[job.id]
            vec = np.array([d.cpu_milli, d.memory_mib, held_milli(d)], dtype=float)
            nodes = accepted[job.id]
            if len(nodes) == 0:
                continue
            scores = (np.divide(vec, caps[nodes], out=np.zeros((len(nodes), 3)),
                                where=caps[nodes] > 0) * free_n[nodes]).sum(axis=1)
            for j in np.argsort(-scores, kind="stable"):
                if top is not None and scores[j] <= top[0]:
                    break
                slots = led.fit(d, int(nodes[j]))
                if slots is not None:
                    top = (float(scores[j]), k, int(nodes[j]), slots)
                    break
        if top is None:
            break
        _, k, node, slots = top
        job = left.pop(k)
        p.place(job, demands[job.id], node, slots)
    return p.plan("tetris", [job.id for job in left])


def _best_fit_loop(snapshot: Snapshot) -> Plan:
    """decide_best_fit before it fitted every node at once (commit 69b8b25)."""
    from andreas.model import GPU_MILLI, Assignment
    from andreas.optimizer.packing import Packing
    p = Packing(snapshot)
    postponed = []
    for job in p.waiting:
        demand = demand_of(job)
        whole = Demand(gpus=demand.gpus, cpu_milli=demand.cpu_milli,
                       memory_mib=demand.memory_mib, gpu_memory_mib=demand.gpu_memory_mib)
        pick = None
        for i in p.candidates(job, demand):
            slots = p.ledger.fit(whole, int(i))
            if slots is None:
                continue
            free = int((p.ledger.gpu_free[i] == GPU_MILLI).sum())
            if pick is None or free < pick[0]:
                pick = (free, int(i), slots)
        if pick is None:
            postponed.append(job.id)
            continue
        _, node, slots = pick
        p.ledger.place(whole, node, slots, job.id)
        p.assignments.append(Assignment(job=job.id, node=snapshot.nodes[node].name,
                                        gpus=demand.gpus, gpu_ids=slots))
    return p.plan("best-fit", postponed)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), nodes=st.integers(1, 9), tasks=st.integers(0, 45),
       elastic=st.booleans())
def test_tetris_and_best_fit_plan_as_their_former_loops(seed: int, nodes: int, tasks: int,
                                                        elastic: bool) -> None:
    snap = (random_snapshot(np.random.default_rng(seed), nodes, max(tasks, 1))
            if elastic else demand_snapshot(seed, nodes, tasks))
    rng = np.random.default_rng(0)
    assert decide(snap, rng, "tetris") == _tetris_loop(snap)
    assert decide(snap, rng, "best-fit") == _best_fit_loop(snap)


# -- EASY backfilling: the reservation for the oldest task that fits nowhere now ----------

def _reservation_snapshot(*waiting: Job) -> Snapshot:
    """Two V100x4 nodes: a runs a 2-GPU task for 500 s more, b a 1-GPU task for 300 s."""
    nodes = (node("a", "V100", 4), node("b", "V100", 4))
    x = task("x", gpus=2, types=("V100",), epochs=5, running=Config(node="a", gpus=2,
                                                                     gpu_ids=(0, 1)))
    y = task("y", gpus=1, types=("V100",), epochs=3, running=Config(node="b", gpus=1,
                                                                     gpu_ids=(0,)))
    return Snapshot(now_s=10.0, nodes=nodes, jobs=(x, y, *waiting))


def test_the_reservation_is_the_node_where_the_oldest_blocked_task_starts_soonest() -> None:
    head = task("h", gpus=4, types=("V100",), submit=1.0)
    held = reservation(Packing(_reservation_snapshot(head)))
    assert held == Reservation(job="h", node=1, start_s=pytest.approx(300.0))


def test_no_reservation_when_the_oldest_fits_or_for_a_task_no_node_can_hold() -> None:
    fits = task("f", gpus=2, types=("V100",), submit=1.0)
    assert reservation(Packing(_reservation_snapshot(fits))) is None
    # an 8-GPU task fits no 4-GPU node even empty: it blocks nobody, the next one is held
    never = task("huge", gpus=8, types=("V100",), submit=0.5)
    head = task("h", gpus=4, types=("V100",), submit=1.0)
    held = reservation(Packing(_reservation_snapshot(never, head)))
    assert held is not None and held.job == "h"


def test_backfilling_keeps_the_reserved_node_for_tasks_done_before_its_start() -> None:
    head = task("h", gpus=4, types=("V100",), submit=1.0)
    short = task("s", gpus=1, types=("V100",), epochs=2, submit=2.0)    # 200 s <= 300 s
    long_ = task("l", gpus=1, types=("V100",), epochs=4, submit=3.0)    # 400 s > 300 s
    snap = _reservation_snapshot(head, short, long_)
    genome = PackingGenome(snap, backfill=True)
    cands = {j.id: set(c.tolist()) for j, c in zip(genome.jobs, genome.candidates)}
    assert cands == {"s": {0, 1}, "l": {0}}
    assert "h" in genome.unplaceable
    assert {j.id: set(c.tolist()) for j, c in
            zip(PackingGenome(snap).jobs, PackingGenome(snap).candidates)} == \
        {"s": {0, 1}, "l": {0, 1}}
    for seed in range(5):
        plan = decide(snap, np.random.default_rng(seed), "ga", backfill=True, **SMALL)
        check_plan(snap, plan)
        assert plan.config_of("l") is None or plan.config_of("l").node == "a"
        assert plan.stats["reserved"] == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_ga_with_reservation_is_feasible_and_respects_it(seed: int) -> None:
    snap = demand_snapshot(seed, n_nodes=6, n_tasks=40)
    base = Packing(snap)
    held = reservation(base)
    # the genome finds the same reservation from its own candidate lists
    assert PackingGenome(snap, backfill=True).reservation == held
    plan = decide(snap, np.random.default_rng(seed), "ga", backfill=True, **SMALL)
    check_plan(snap, plan)
    if held is None:
        return
    kind = base.types[held.node]
    name = snap.nodes[held.node].name
    jobs = {j.id: j for j in snap.jobs}
    for a in plan.assignments:
        job = jobs[a.job]
        if job.running is None and a.node == name:
            assert job.remaining_s(kind, a.gpus) <= held.start_s


@pytest.mark.parametrize("seed", range(4))
def test_ga_backfills_by_default_and_is_never_below_first_fit_under_its_reservation(
        seed: int) -> None:
    snap = demand_snapshot(seed, n_nodes=6, n_tasks=40)
    plan = decide(snap, np.random.default_rng(seed), "ga", **SMALL)
    genome = PackingGenome(snap, backfill=True)
    assert plan.stats["reserved"] == float(genome.reservation is not None)
    zeros = np.zeros(genome.n_genes, dtype=np.int64)
    first_fit = genome.to_plan(zeros, NEXT_FIT, "first-fit", {})
    check_plan(snap, first_fit)
    assert plan.objective >= allocation(snap, first_fit) - 1e-12
