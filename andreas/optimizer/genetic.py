"""The genetic scheduler of the genetic-scheduling paper (Kwon and Bahn, Appl. Sci. 2024,
Algorithms 1-3) as policy ``ga``, and the GA machinery ``ga-energy`` shares.

Algorithm 1, the candidate pairs: for each waiting task, the nodes that accept its GPU
type and where its whole demand fits *now* (the ledger of ``andreas.resources``). A
chromosome has one integer gene per waiting task that has a candidate, in submission
order, so a crossover never duplicates or loses a task; gene value k < len(candidates)
puts the task on its k-th candidate node, the value len(candidates) leaves it waiting.

Algorithm 3, the fitness: the gain in GPU allocation, or -1 when a task does not fit
where its gene puts it (decoder ``strict``). The repairs ``skip`` (the task waits) and
``next-fit`` (the default: the next candidate that still holds it, so the chromosome of
zeros is First-Fit) place what fits: with ``strict`` crossovers of good plans overbook
nodes and evolution stalls at the seeds.

Beyond the paper, two rules that decide whether large tasks ever get a node: the
default fitness ``consolidated`` breaks the allocation's ties by the whole free GPUs
left together on nodes (``allocation`` is Algorithm 3's own), and EASY backfilling
(``backfill``, on by default) reserves a node for the oldest task that fits nowhere now,
so that only tasks done before it can start take that node meanwhile.

Algorithm 2 through PyGAD: population 100, 20 % tournament, single-point crossover, 40 %
steady-state replacement and adaptive mutation, 0.25 per gene below the mean fitness and
0.1 above (the paper's wording contradicts its numbers; poor solutions should move more).
The mutation (``_AdaptiveMutation``) and the fitness (``_decode_packing``, numba) are
batched over the population: PyGAD's own adaptive mutation draws gene by gene in Python.

Seeds: First-Fit, Tetris and Best-Fit, then random feasible chromosomes; the GA's best
replaces them only when strictly fitter (the fitness does not see fragmentation), and
Tetris' and Best-Fit's own plans are compared at the end, so without a reservation ``ga``
is never below them on GPU allocation. The random rows and PyGAD's generators are seeded
from ``rng``, so a seed reproduces a plan bit for bit. Running tasks keep their GPUs.

Every rule, with the reasons: docs/design/optimizer.md, "The genetic scheduler".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numba import njit

from andreas.errors import InputError
from andreas.model import GPU_MILLI, Demand, Job, Plan, Snapshot
from andreas.optimizer.packing import Packing, decide_best_fit, decide_tetris, reservation
from andreas.resources import demand_of, held_milli

DEFAULT_POPULATION = 100          # the paper's choice (its Figure 5)
DEFAULT_GENERATIONS = 50          # keeps one event at 100 nodes well under a second
TOURNAMENT_SHARE = 0.2            # tournament of 20 % of the population (Section 3.3)
REPLACED_SHARE = 0.4              # steady state: 40 % replaced per generation (Section 3.5)
MUTATION_LOW_QUALITY = 0.25       # per gene, offspring below the mean fitness
MUTATION_HIGH_QUALITY = 0.10      # per gene, offspring at or above it
INFEASIBLE = -1.0                 # Algorithm 3's fitness of a chromosome that does not fit
TIE_WEIGHT = 0.5                  # the consolidation term, in milli-GPU of allocation: < 1

Fitness = Callable[[np.ndarray], np.ndarray]


def check_ga_options(population: int, generations: int) -> None:
    """Positive integers, else an InputError naming the field."""
    for field, value in (("population", population), ("generations", generations)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InputError(f"{field}: must be a positive integer, got {value!r}",
                             field=field)


# -- the GA through PyGAD --------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Evolution:
    """The best chromosome of the last population, its fitness and the counters."""

    best: np.ndarray
    fitness: float
    seed_fitness: float          # the best fitness of the initial population
    generations: int
    evaluations: int


class _AdaptiveMutation:
    """Adaptive mutation (Section 3.4): each gene of an offspring whose fitness is below
    the population's mean takes a uniform value of its space with probability
    ``MUTATION_LOW_QUALITY``, otherwise ``MUTATION_HIGH_QUALITY``."""

    def __init__(self, fitness: Fitness, sizes: np.ndarray) -> None:
        self.fitness = fitness
        self.sizes = sizes
        self.evaluations = 0

    def __call__(self, offspring: np.ndarray, ga: Any) -> np.ndarray:
        rows = np.asarray(offspring, dtype=np.int64)
        if rows.size == 0:
            return offspring
        own = self.fitness(rows)
        self.evaluations += len(rows)
        mean = float(np.mean(ga.last_generation_fitness))
        rate = np.where(own < mean, MUTATION_LOW_QUALITY, MUTATION_HIGH_QUALITY)
        rng = ga.numpy_random_generator
        hit = rng.random(rows.shape) < rate[:, None]
        drawn = np.floor(rng.random(rows.shape) * self.sizes).astype(np.int64)
        return np.where(hit, drawn, rows)


def evolve(fitness: Fitness, sizes: np.ndarray, initial: np.ndarray, *, generations: int,
           seed: int) -> Evolution:
    """Run the paper's GA over integer chromosomes, gene k in [0, sizes[k]), from the
    ``initial`` population (its row count is the population size); maximises ``fitness``
    (a batch of rows -> one value each)."""
    import pygad

    population = len(initial)
    keep = min(int(round((1 - REPLACED_SHARE) * population)), population - 1)
    offspring = population - keep

    def batch(_ga: Any, solutions: np.ndarray, _index: Any) -> np.ndarray | float:
        rows = np.asarray(solutions, dtype=np.int64)
        if rows.ndim == 1:                      # PyGAD calls a batch of one row by row
            return float(fitness(rows[None, :])[0])
        return fitness(rows)

    mutation = _AdaptiveMutation(fitness, sizes)
    ga = pygad.GA(
        num_generations=generations, num_parents_mating=max(1, offspring),
        fitness_func=batch, fitness_batch_size=population,
        initial_population=initial.astype(np.int64), gene_type=int,
        parent_selection_type="tournament",
        K_tournament=max(1, min(population, int(round(TOURNAMENT_SHARE * population)))),
        crossover_type="single_point", mutation_type=mutation, keep_elitism=keep,
        random_seed=seed, suppress_warnings=True, save_solutions=False,
        save_best_solutions=False)
    seed_fitness = float(np.max(fitness(initial)))
    ga.run()
    final = np.asarray(ga.population, dtype=np.int64)
    scores = fitness(final)
    best = int(np.argmax(scores))
    return Evolution(best=final[best].copy(), fitness=float(scores[best]),
                     seed_fitness=seed_fitness, generations=int(ga.generations_completed),
                     evaluations=int(ga.num_fitness_evaluations) + mutation.evaluations)


# -- policy ga: packing rigid tasks for GPU allocation ------------------------------------

SKIP, NEXT_FIT, STRICT = 0, 1, 2          # decoders: what a gene whose node is full does
DECODERS = {"skip": SKIP, "next-fit": NEXT_FIT, "strict": STRICT}
DEFAULT_DECODER = "next-fit"
# fitnesses: Algorithm 3's allocation gain, or that gain with its ties broken by the free
# whole GPUs left together on nodes (sum over nodes of their free whole GPUs squared)
ALLOCATION, CONSOLIDATED = 0, 1
FITNESSES = {"allocation": ALLOCATION, "consolidated": CONSOLIDATED}
DEFAULT_FITNESS = "consolidated"
DEFAULT_BACKFILL = True    # EASY backfilling around the oldest blocked task (packing.reservation)


@njit(cache=True, nogil=True)
def _fits(k, n, d_gpus, d_need, d_cpu, d_mem, d_gmem, d_peak, gf, cf, mf, gm, pk, ok):
    """``Ledger.fit`` of task k on node n: True and ``ok`` marks the GPUs that hold it."""
    if d_cpu[k] > cf[n] or d_mem[k] > mf[n]:
        return False
    count = 0
    for s in range(gf.shape[1]):
        peak = max(pk[n, s], d_peak[k])
        ok[s] = gf[n, s] >= d_need[k] and gm[n, s] >= d_gmem[k] + peak
        if ok[s]:
            count += 1
    return count >= d_gpus[k]


@njit(cache=True, nogil=True)
def _decode_packing(pop, cand_ptr, cand_node, d_gpus, d_need, d_shared, d_cpu, d_mem,
                    d_gmem, d_peak, d_held, gpu_free0, cpu_free0, mem_free0, gmem_free0,
                    peak0, decoder, out_gain, out_pop, out_free):
    """Place each row's genes in order with ``Ledger.fit``'s rule. A task whose node is
    full waits (SKIP), goes to the next candidate that holds it, cyclically (NEXT_FIT), or
    makes the row infeasible (STRICT: ``out_gain`` -1). ``out_gain`` gets the milli-GPU
    placed, ``out_pop`` the candidate each task took (its wait value if none), ``out_free``
    the sum over nodes of their whole free GPUs squared after the placement."""
    rows, genes = pop.shape
    width = gpu_free0.shape[1]
    ok = np.empty(width, np.bool_)
    chosen = np.empty(width, np.int64)
    for b in range(rows):
        gf = gpu_free0.copy()
        cf = cpu_free0.copy()
        mf = mem_free0.copy()
        gm = gmem_free0.copy()
        pk = peak0.copy()
        gain = 0
        for k in range(genes):
            size = cand_ptr[k + 1] - cand_ptr[k]
            v = pop[b, k]
            out_pop[b, k] = size
            if v < 0 or v >= size:
                continue
            tries = size if decoder == NEXT_FIT else 1
            n = -1
            for step in range(tries):
                c = (v + step) % size
                if _fits(k, cand_node[cand_ptr[k] + c], d_gpus, d_need, d_cpu, d_mem,
                         d_gmem, d_peak, gf, cf, mf, gm, pk, ok):
                    n = cand_node[cand_ptr[k] + c]
                    out_pop[b, k] = c
                    break
            if n < 0:
                if decoder == STRICT:
                    gain = -1
                    break
                continue
            if d_shared[k]:         # the fullest GPUs that hold the slice, lowest first
                for r in range(d_gpus[k]):
                    pick = -1
                    for s in range(width):
                        if ok[s] and (pick < 0 or gf[n, s] < gf[n, pick]):
                            pick = s
                    chosen[r] = pick
                    ok[pick] = False
            else:                   # the lowest-numbered free whole GPUs
                r = 0
                for s in range(width):
                    if ok[s] and r < d_gpus[k]:
                        chosen[r] = s
                        r += 1
            cf[n] -= d_cpu[k]
            mf[n] -= d_mem[k]
            for r in range(d_gpus[k]):
                s = chosen[r]
                gf[n, s] -= d_need[k]
                gm[n, s] -= d_gmem[k]
                pk[n, s] = max(pk[n, s], d_peak[k])
            gain += d_held[k]
        out_gain[b] = gain
        free = 0
        for n in range(gf.shape[0]):
            whole = 0
            for s in range(width):
                if gf[n, s] == GPU_MILLI:
                    whole += 1
            free += whole * whole
        out_free[b] = free


class PackingGenome:
    """Algorithm 1's candidate pairs and the chromosome <-> plan mapping of ``ga``."""

    def __init__(self, snapshot: Snapshot, *, backfill: bool = False) -> None:
        self.snapshot = snapshot
        base = Packing(snapshot)
        led = base.ledger
        self.capacity = led.capacity_milli()
        self.before = led.allocated_milli()
        self.jobs: list[Job] = []           # one per gene, submission order
        self.candidates: list[np.ndarray] = []
        self.unplaceable: list[str] = []    # waiting tasks with no candidate: they wait
        types = np.array(base.types, dtype=object)
        fitting: list[tuple[Job, Demand, np.ndarray]] = []
        for job in base.waiting:
            demand = demand_of(job)
            need = demand.gpu_milli if demand.shared else GPU_MILLI
            peak = np.maximum(led.gpu_peak, demand.gpu_memory_peak_mib)
            gpu_ok = ((led.gpu_free >= need)
                      & (led.gpu_mem_free >= demand.gpu_memory_mib + peak)).sum(axis=1)
            accepts = np.array([job.runs_on(t, demand.gpus) for t in types], dtype=bool)
            fits = (accepts & (led.cpu_free >= demand.cpu_milli)
                    & (led.mem_free >= demand.memory_mib) & (gpu_ok >= demand.gpus))
            fitting.append((job, demand, np.flatnonzero(fits).astype(np.int64)))
        self.reservation = (reservation(base, blocked=[j for j, _, n in fitting if not len(n)])
                            if backfill else None)
        held = self.reservation
        demands: list[Demand] = []
        for job, demand, nodes in fitting:
            if held is not None and held.node in nodes:
                # backfilling: the reserved node only for tasks done before its start
                left = job.remaining_s(base.types[held.node], demand.gpus)
                if left is None or left > held.start_s:
                    nodes = nodes[nodes != held.node]
            if len(nodes):
                self.jobs.append(job)
                self.candidates.append(nodes)
                demands.append(demand)
            else:
                self.unplaceable.append(job.id)
        sizes = [len(c) for c in self.candidates]
        self.sizes = np.array([s + 1 for s in sizes], dtype=np.int64)    # + wait
        self.cand_ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.cand_node = (np.concatenate(self.candidates) if self.candidates
                          else np.zeros(0, dtype=np.int64))
        self.d_gpus = np.array([d.gpus for d in demands], dtype=np.int64)
        self.d_need = np.array([d.gpu_milli if d.shared else GPU_MILLI for d in demands],
                               dtype=np.int64)
        self.d_shared = np.array([d.shared for d in demands], dtype=np.bool_)
        self.d_cpu = np.array([d.cpu_milli for d in demands], dtype=float)
        self.d_mem = np.array([d.memory_mib for d in demands], dtype=float)
        self.d_gmem = np.array([d.gpu_memory_mib for d in demands], dtype=float)
        self.d_peak = np.array([d.gpu_memory_peak_mib for d in demands], dtype=float)
        self.d_held = np.array([held_milli(d) for d in demands], dtype=np.int64)
        self.state = (led.gpu_free.copy(), led.cpu_free.copy(), led.mem_free.copy(),
                      led.gpu_mem_free.copy(), led.gpu_peak.copy())
        # the consolidation term's largest value: every GPU of every node free
        self.free_max = max(1, sum(n.gpus ** 2 for n in snapshot.nodes))

    @property
    def n_genes(self) -> int:
        return len(self.jobs)

    def decode(self, pop: np.ndarray, decoder: int) -> tuple[np.ndarray, np.ndarray]:
        """(milli-GPU placed per row, -1 where infeasible; the candidate each task took)."""
        gain, placed, _ = self.decode_all(pop, decoder)
        return gain, placed

    def decode_all(self, pop: np.ndarray,
                   decoder: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``decode`` and, per row, the sum over nodes of their whole free GPUs squared."""
        pop = np.ascontiguousarray(pop, dtype=np.int64)
        gain = np.empty(len(pop), dtype=np.int64)
        free = np.empty(len(pop), dtype=np.int64)
        placed = np.empty_like(pop)
        _decode_packing(pop, self.cand_ptr, self.cand_node, self.d_gpus, self.d_need,
                        self.d_shared, self.d_cpu, self.d_mem, self.d_gmem, self.d_peak,
                        self.d_held, *self.state, decoder, gain, placed, free)
        return gain, placed, free

    def fitness(self, decoder: int, fitness: int = ALLOCATION) -> Fitness:
        """Algorithm 3 over a batch: the gain in GPU allocation, or -1 (STRICT decoder)
        for a chromosome that overbooks a node. CONSOLIDATED adds less than one milli-GPU
        of allocation (``TIE_WEIGHT`` of it) times the share of the whole free GPUs left
        together (sum of squares per node over its largest value): it only breaks ties."""
        def score(pop: np.ndarray) -> np.ndarray:
            gain, _, free = self.decode_all(pop, decoder)
            value = gain / self.capacity
            if fitness == CONSOLIDATED:
                value = value + TIE_WEIGHT / self.capacity * free / self.free_max
            return np.where(gain < 0, INFEASIBLE, value)
        return score

    def chromosome(self, plan: Plan) -> np.ndarray:
        """A plan of the same snapshot as genes: each task's node as its candidate index."""
        where = {a.job: a.node for a in plan.assignments}
        index = {n.name: i for i, n in enumerate(self.snapshot.nodes)}
        genes = self.sizes - 1                              # wait
        for k, job in enumerate(self.jobs):
            if job.id in where:
                hit = np.flatnonzero(self.candidates[k] == index[where[job.id]])
                if len(hit):
                    genes[k] = int(hit[0])
        return genes

    def random_feasible(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """Rows with a uniform candidate per task, the tasks that do not fit then waiting."""
        if rows <= 0:
            return np.zeros((0, self.n_genes), dtype=np.int64)
        pop = np.floor(rng.random((rows, self.n_genes)) * (self.sizes - 1)).astype(np.int64)
        return self.decode(pop, SKIP)[1]

    def to_plan(self, genes: np.ndarray, decoder: int, policy: str,
                stats: dict[str, float]) -> Plan:
        """The decoder's placement through a fresh ``Ledger`` (the reference the compiled
        decoder is tested against)."""
        p = Packing(self.snapshot)
        postponed = list(self.unplaceable)
        for k, job in enumerate(self.jobs):
            v, size = int(genes[k]), len(self.candidates[k])
            demand = demand_of(job)
            pick = None
            for step in range(size if decoder == NEXT_FIT else 1):
                if v >= size:
                    break
                node = int(self.candidates[k][(v + step) % size])
                slots = p.ledger.fit(demand, node)
                if slots is not None:
                    pick = (node, slots)
                    break
            if pick is None:
                postponed.append(job.id)
            else:
                p.place(job, demand, *pick)
        order = {j.id: i for i, j in enumerate(p.waiting)}
        return p.plan(policy, sorted(postponed, key=order.__getitem__), stats)


def allocation(snapshot: Snapshot, plan: Plan) -> float:
    """Milli-GPU the plan's tasks hold (a slice its fraction) over the cluster's capacity:
    what the simulator integrates as GPU utilisation. Best-Fit's own objective counts
    the whole GPUs its ledger reserves for slices instead."""
    jobs = {j.id: j for j in snapshot.jobs}
    held = sum(held_milli(demand_of(jobs[a.job], a.gpus)) for a in plan.assignments)
    capacity = sum(n.gpus for n in snapshot.nodes) * GPU_MILLI
    return held / capacity if capacity else 0.0


def initial_population(seeds: Sequence[np.ndarray], random_rows: Callable[[int], np.ndarray],
                       population: int) -> np.ndarray:
    """The seeds first (duplicates dropped, at most ``population``), then random rows."""
    rows: list[np.ndarray] = []
    seen: set[bytes] = set()
    for s in seeds:
        key = np.asarray(s, dtype=np.int64).tobytes()
        if key not in seen and len(rows) < population:
            seen.add(key)
            rows.append(np.asarray(s, dtype=np.int64))
    extra = random_rows(population - len(rows))
    return np.vstack([np.array(rows), extra]) if len(extra) else np.array(rows)


def decide_ga(snapshot: Snapshot, rng: np.random.Generator, *,
              population: int = DEFAULT_POPULATION, generations: int = DEFAULT_GENERATIONS,
              decoder: str = DEFAULT_DECODER, fitness: str = DEFAULT_FITNESS,
              backfill: bool = DEFAULT_BACKFILL) -> Plan:
    """The genetic-scheduling paper's GA: waiting tasks on nodes for the largest GPU
    allocation (module docstring)."""
    check_ga_options(population, generations)
    if decoder not in DECODERS:
        raise InputError(f"decoder: must be one of {', '.join(DECODERS)}, got {decoder!r}",
                         field="decoder")
    if fitness not in FITNESSES:
        raise InputError(f"fitness: must be one of {', '.join(FITNESSES)}, got {fitness!r}",
                         field="fitness")
    mode = DECODERS[decoder]
    genome = PackingGenome(snapshot, backfill=backfill)
    # First-Fit is the chromosome of zeros under next-fit (each task on the first node that
    # still holds it); Tetris and Best-Fit are their plans written as genes
    first_fit = genome.decode(np.zeros((1, genome.n_genes), dtype=np.int64), NEXT_FIT)[1][0]
    others = {"tetris": decide_tetris(snapshot, rng), "best-fit": decide_best_fit(snapshot, rng)}
    init_seed, ga_seed = (int(x) for x in rng.integers(0, 2**32, size=2))
    stats: dict[str, float] = {"tasks": genome.n_genes, "population": population,
                               "generations": 0, "evaluations": 0,
                               "reserved": float(genome.reservation is not None)}
    if genome.n_genes == 0:
        return genome.to_plan(first_fit, mode, "ga", stats)
    init_rng = np.random.default_rng(init_seed)
    seeds = np.array([first_fit, *(genome.chromosome(p) for p in others.values())])
    initial = initial_population(list(seeds), lambda n: genome.random_feasible(init_rng, n),
                                 population)
    score = genome.fitness(mode, FITNESSES[fitness])
    result = evolve(score, genome.sizes, initial, generations=generations, seed=ga_seed)
    stats.update(generations=result.generations, evaluations=result.evaluations,
                 fitness=result.fitness, seed_fitness=result.seed_fitness)
    # the GA's best only if it beats the seeds: among equals, a seed (First-Fit first)
    # rather than whichever equal chromosome the evolution left on top
    finalists = np.vstack([seeds, result.best[None, :]])
    winner = int(np.argmax(score(finalists)))
    stats["from_seed"] = float(winner < len(seeds))
    plan = genome.to_plan(finalists[winner], mode, "ga", stats)
    value = allocation(snapshot, plan)
    if genome.reservation is None:      # their own plans ignore a reservation
        best_name, best = max(others.items(), key=lambda kv: allocation(snapshot, kv[1]))
        if allocation(snapshot, best) > value + 1e-12:
            # a seed that decodes differently from its own plan did better (module docstring)
            value = allocation(snapshot, best)
            plan = replace(best, policy="ga", stats={**stats, "kept_" + best_name: 1.0})
    return replace(plan, objective=value)
