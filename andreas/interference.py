"""Interference of jobs that share a GPU (the interference-aware placement paper, §3.2–3.3).

The paper measures the slowdown theta of co-located workers on real jobs; a trace has no
such measurements, so andreas predicts it from what a demand says, with two documented
terms and constants in ``Sharing``:

- contention: a worker slows down by ``contention`` for every whole GPU of compute
  (sum of the other residents' compute shares alpha) it shares its GPU with;
- memory collisions: while its variable memory part occurs together with another
  resident's (probability ``p_i * (1 - prod(1 - p_q))``), it runs ``collision_slowdown``
  slower.

``collision_probability`` is eq. 4, ``device_theta`` eq. 6, ``balance`` the spread of
eq. 8, ``gregariousness`` eq. 20. The simulator charges exactly these slowdowns, so a
policy that bounds them keeps the performance it promises.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from andreas.model import GPU_MILLI, Demand

Resident = tuple[str, Demand]


@dataclass(frozen=True, kw_only=True)
class Sharing:
    """OJPP bounds (the paper's Table 5 setting (0.1, 0.2, 0.1), its "most efficient and
    balanced") and the interference model's constants."""

    tau_bar: float = 0.1            # collision probability bound per GPU (eq. 5)
    theta_balance: float = 0.2      # theta': spread of a job's workers' slowdowns (eq. 8)
    theta_bar: float = 0.1          # bound on the slowdown of any worker of a GPU (eq. 7)
    contention: float = 0.1         # slowdown per whole GPU of co-located compute
    collision_slowdown: float = 1.0  # extra slowdown while memory peaks collide
    use_tau: bool = True            # which constraints a policy enforces (the paper's
    use_theta: bool = True          # I-, B- and C-Greedy keep only one of them)
    use_balance: bool = True
    ewma_a: float = 0.5             # OJPAP: weight of the past in the EWMA trigger (eq. 18)
    migration_budget_s: float = 1800.0  # OJPAP: c_bar, work a round of moves may cost (eq. 19)


def alpha(demand: Demand) -> float:
    """Compute share of one worker (1.0 for a whole GPU)."""
    return demand.gpu_milli / GPU_MILLI if demand.shared else 1.0


def collision_probability(ps: Iterable[float]) -> float:
    """Eq. 4: probability that two or more residents are in their memory peak at once."""
    ps = [p for p in ps if p > 0]
    none = math.prod(1 - p for p in ps)
    one = sum(p * math.prod(1 - q for k, q in enumerate(ps) if k != j)
              for j, p in enumerate(ps))
    return max(0.0, 1.0 - none - one)


def worker_theta(me: Demand, others: Sequence[Demand], model: Sharing) -> float:
    """Predicted slowdown (t' - t) / t of one worker of ``me`` sharing a GPU with ``others``."""
    if not others:
        return 0.0
    theta = model.contention * sum(alpha(d) for d in others)
    if me.peak_probability > 0:
        apart = math.prod(1 - d.peak_probability for d in others)
        theta += model.collision_slowdown * me.peak_probability * (1 - apart)
    return theta


def thetas(residents: Sequence[Resident], model: Sharing) -> list[float]:
    """Each resident's slowdown on one GPU, in the order given."""
    demands = [d for _, d in residents]
    return [worker_theta(d, demands[:k] + demands[k + 1:], model)
            for k, d in enumerate(demands)]


def device_theta(residents: Sequence[Resident], model: Sharing) -> float:
    """Eq. 6: the largest slowdown among a GPU's residents."""
    return max(thetas(residents, model), default=0.0)


def job_slowdown(worker_thetas: Sequence[float]) -> float:
    """A synchronous data-parallel job runs at the pace of its slowest worker."""
    return max(worker_thetas, default=0.0)


def balance(worker_thetas: Sequence[float]) -> float:
    """Eq. 8's left side: max - min slowdown over a job's workers."""
    return max(worker_thetas) - min(worker_thetas) if worker_thetas else 0.0


def pair_collision(a: Demand, b: Demand) -> float:
    """tau(i, q): collision probability of one worker of each on the same GPU."""
    return a.peak_probability * b.peak_probability


def gregariousness(job: Demand, queue: Iterable[Demand]) -> float:
    """Eq. 20: the job's largest pairwise collision probability with the rest of the queue."""
    return max((pair_collision(job, q) for q in queue), default=0.0)
