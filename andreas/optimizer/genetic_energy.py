"""``ga-energy``: the genetic scheduler's machinery (``genetic.evolve``: tournament of 20 %,
single-point crossover, adaptive mutation, 40 % steady-state replacement, PyGAD) turned
on the ANDREAS objective f_obj (``andreas.costs.evaluate``), for elastic jobs on premise.

A chromosome has one gene per job (running ones too: the plan may keep, resize, move or
preempt them, as rg's), in rg's queue order (``problem.queue``); its value picks one of
the job's configurations (node n, g GPUs) with g at most n's GPUs and a finite time on
n's class. The decoder places the genes in order; a configuration that no longer fits
gives way to the next one that does, cyclically, so a job waits only when none fits:
decoded plans are work-conserving, as rg's constructions are. With a "wait" value in
the genes instead (``work_conserving=False``, the packing GA's ``skip``), the GA learns
to postpone jobs that still have slack, which f_obj charges nothing for, and the bill of
a whole trace explodes. f_obj is computed from the arrays rg's kernels use
(``problem.tard_cost``, ``post_cost``, ``class_cost_h``; the tests hold it equal to
``costs.evaluate``); the fitness is -f_obj.

The initial population is rg's: its randomized constructions (``construct``, the same
``iterations``, alpha and rng draws as ``rg``), rg's own plan first, then the best
distinct others, topped up with random work-conserving chromosomes. rg's plan is kept
unless the GA's best has a lower f_obj *and* restarts no more running jobs
(``solution.restarts``, pr's rule for the same reason: reshuffled plans make jobs redo
partial epochs, which one snapshot's f_obj underprices). So with the same seed
``ga-energy``'s f_obj is never above rg's, hence never above greedy's.

On single snapshots its f_obj is well below rg's; over whole generated traces it costs
more than rg (its plans run more jobs on fewer GPUs each, which the proxy rewards and the
jobs' due dates do not; docs/design/objectives.md).
It is a study policy, not offered by the manager. Cloud snapshots are refused (the
genes are on-premise nodes; a VM has no GPUs until a plan picks its type), as are rigid
multi-resource tasks (their energy plans are ``optimizer.sharing.decide_energy``'s).
"""

from __future__ import annotations


import numpy as np
from numba import njit

from andreas.costs import SECONDS_PER_HOUR, evaluate
from andreas.errors import InputError
from andreas.model import Plan, Snapshot
from andreas.optimizer.construction import DEFAULT_SWAP_SCALE, compile_ordered, construct
from andreas.optimizer.genetic import (DEFAULT_GENERATIONS, DEFAULT_POPULATION,
                                       Fitness, check_ga_options, evolve, initial_population)
from andreas.optimizer.greedy import DEFAULT_ALPHA, DEFAULT_ITERATIONS
from andreas.optimizer.problem import DEFAULT_ORDER, Problem
from andreas.optimizer.solution import restarts, to_plan


@njit(cache=True, nogil=True)
def _decode_energy(pop, cand_ptr, cand_node, cand_cfg, gene_job, node_gpus, node_class,
                   cfg_g, t, tard_cost, post_cost, class_cost_h, mu, work_conserving, out_f,
                   out_node, out_cfg):
    """f_obj of each row, its genes placed in order; a job whose configuration no longer
    fits takes the next one that does, cyclically (``work_conserving``: it waits only when
    none fits, whatever its gene), or waits; ``out_node`` / ``out_cfg`` get each job's
    node and configuration (-1: postponed)."""
    rows, genes = pop.shape
    n_nodes = node_gpus.shape[0]
    for b in range(rows):
        busy = np.zeros(n_nodes, np.int64)
        first_end = np.full(n_nodes, np.inf)
        f = 0.0
        for k in range(genes):
            j = gene_job[k]
            size = cand_ptr[k + 1] - cand_ptr[k]
            v = pop[b, k]
            out_node[b, j] = -1
            out_cfg[b, j] = -1
            if (v < 0 or v >= size) and not work_conserving:
                f += post_cost[j]
                continue
            n = -1
            c = -1
            for step in range(size if work_conserving else 1):
                e = cand_ptr[k] + (max(v, 0) + step) % size
                if busy[cand_node[e]] + cfg_g[cand_cfg[e]] <= node_gpus[cand_node[e]]:
                    n = cand_node[e]
                    c = cand_cfg[e]
                    break
            if n < 0:
                f += post_cost[j]
                continue
            g = cfg_g[c]
            busy[n] += g
            first_end[n] = min(first_end[n], t[j, c])
            f += tard_cost[j, c]
            out_node[b, j] = n
            out_cfg[b, j] = c
        for n in range(n_nodes):
            if busy[n] > 0:
                f += (first_end[n] / SECONDS_PER_HOUR * class_cost_h[node_class[n], busy[n]]
                      + mu * (node_gpus[n] - busy[n]))
        out_f[b] = f


class EnergyGenome:
    """Each job's configurations (node, g) on premise and the chromosome <-> row mapping."""

    def __init__(self, problem: Problem, work_conserving: bool = True) -> None:
        p = problem
        self.p = p
        self.work_conserving = work_conserving
        self.gene_job = np.asarray(p.queue, dtype=np.int64)
        self.node_gpus = p.class_gpus[p.node_class].astype(np.int64)
        levels = p.cfg_index.shape[1]
        # every (node, g) of the cluster, by node then g; a job's genes are those it runs on
        pair_node = np.repeat(np.arange(p.n_nodes, dtype=np.int64), self.node_gpus)
        pair_g = np.concatenate([np.arange(1, g + 1) for g in self.node_gpus]).astype(
            np.int64) if p.n_nodes else np.zeros(0, dtype=np.int64)
        pair_cfg = p.cfg_index[p.node_class[pair_node], pair_g].astype(np.int64)
        runs = p.runnable[self.gene_job][:, pair_cfg] & (pair_cfg >= 0)
        rows, cols = np.nonzero(runs)
        sizes = np.bincount(rows, minlength=len(self.gene_job)).astype(np.int64)
        self.levels = levels
        # a value per configuration, and "wait" unless the decoder is work-conserving
        self.sizes = np.maximum(sizes, 1) if work_conserving else sizes + 1
        self.wait = np.zeros_like(sizes) if work_conserving else sizes   # a postponed job
        self.cand_ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.cand_node = pair_node[cols]
        self.cand_cfg = pair_cfg[cols]
        self.cand_key = self.cand_node * levels + pair_g[cols]   # ascending within a gene
        self.mu = float(p.snapshot.params.mu)

    @property
    def n_genes(self) -> int:
        return len(self.gene_job)

    def decode(self, pop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(f_obj per row, node per job, configuration per job)."""
        pop = np.ascontiguousarray(pop, dtype=np.int64)
        rows = len(pop)
        f = np.empty(rows)
        node = np.empty((rows, self.p.n_jobs), dtype=np.int64)
        cfg = np.empty((rows, self.p.n_jobs), dtype=np.int64)
        p = self.p
        _decode_energy(pop, self.cand_ptr, self.cand_node, self.cand_cfg, self.gene_job,
                       self.node_gpus, p.node_class, p.cfg_g, p.t_energy, p.tard_cost, p.post_cost,
                       p.class_cost_h, self.mu, self.work_conserving, f, node, cfg)
        return f, node, cfg

    def fitness(self) -> Fitness:
        return lambda pop: -self.decode(pop)[0]

    def chromosome(self, node: np.ndarray, cfg: np.ndarray) -> np.ndarray:
        """A construction's row (node and configuration per job, -1 postponed) as genes."""
        genes = self.wait.copy()
        for k, j in enumerate(self.gene_job):
            if node[j] < 0:
                continue
            key = int(node[j]) * self.levels + int(self.p.cfg_g[cfg[j]])
            keys = self.cand_key[self.cand_ptr[k]:self.cand_ptr[k + 1]]
            hit = int(np.searchsorted(keys, key))
            if hit < len(keys) and keys[hit] == key:
                genes[k] = hit
        return genes

    def random_feasible(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """Rows with a uniform configuration per job, the jobs that do not fit waiting."""
        if rows <= 0:
            return np.zeros((0, self.n_genes), dtype=np.int64)
        ncand = self.cand_ptr[1:] - self.cand_ptr[:-1]
        pop = np.floor(rng.random((rows, self.n_genes)) * ncand).astype(np.int64)
        _, node, cfg = self.decode(pop)
        return np.array([self.chromosome(node[r], cfg[r]) for r in range(rows)])


def decide_ga_energy(snapshot: Snapshot, rng: np.random.Generator, *,
                     population: int = DEFAULT_POPULATION,
                     generations: int = DEFAULT_GENERATIONS,
                     iterations: int | None = None, alpha: float = DEFAULT_ALPHA,
                     swap_scale: float = DEFAULT_SWAP_SCALE, order: str = DEFAULT_ORDER,
                     floor: bool = False, work_conserving: bool = True,
                     steady: bool = True) -> Plan:
    """rg's constructions evolved by the genetic scheduler on f_obj (module docstring)."""
    check_ga_options(population, generations)
    if snapshot.cloud:
        raise InputError("policy: 'ga-energy' plans jobs on on-premise GPUs; a cloud "
                         "snapshot needs an energy policy (rg, pr, greedy, ...)")
    if any(j.demand is not None for j in snapshot.jobs):
        raise InputError("policy: 'ga-energy' plans elastic jobs on whole GPUs; rigid "
                         "multi-resource tasks need greedy, rg or a packing policy")
    iterations = iterations or DEFAULT_ITERATIONS
    problem = compile_ordered(snapshot, rng, order=order)
    batch = construct(problem, max(1, iterations), rng, alpha=alpha, swap_scale=swap_scale,
                      floor=floor)
    rg_row = batch.best()
    init_seed, ga_seed = (int(x) for x in rng.integers(0, 2**32, size=2))
    genome = EnergyGenome(problem, work_conserving)
    stats: dict[str, float] = {"jobs": problem.n_jobs, "population": population,
                               "iterations": iterations, "generations": 0,
                               "evaluations": 0, "rg_f_obj": float(batch.f_obj[rg_row]),
                               "greedy_f_obj": float(batch.f_obj[0])}
    node, cfg = batch.node[rg_row], batch.cfg[rg_row]
    if genome.n_genes:
        rows = batch.candidates
        ranked = [rg_row] + [int(r) for r in rows[np.argsort(batch.f_obj[rows],
                                                             kind="stable")]]
        init_rng = np.random.default_rng(init_seed)
        initial = initial_population(
            [genome.chromosome(batch.node[r], batch.cfg[r]) for r in ranked[:population]],
            lambda n: genome.random_feasible(init_rng, n), population)
        result = evolve(genome.fitness(), genome.sizes, initial, generations=generations,
                        seed=ga_seed)
        stats.update(generations=result.generations, evaluations=result.evaluations,
                     ga_f_obj=-result.fitness)
        f, nodes, cfgs = genome.decode(result.best[None, :])
        better = f[0] < batch.f_obj[rg_row] - 1e-9 * max(1.0, abs(batch.f_obj[rg_row]))
        if better and steady:
            better = restarts(problem, nodes[0], cfgs[0]) <= restarts(problem, node, cfg)
        if better:
            node, cfg = nodes[0], cfgs[0]
            stats["improved"] = 1.0
    plan = to_plan(problem, node, cfg, np.full(problem.n_nodes, -1, dtype=np.int64),
                   policy="ga-energy", objective=0.0, objective_name="f_obj", stats=stats)
    return Plan(policy=plan.policy, assignments=plan.assignments, postponed=plan.postponed,
                objective=evaluate(snapshot, plan).f_obj, objective_name="f_obj",
                stats=plan.stats, revisit_s=plan.revisit_s)
