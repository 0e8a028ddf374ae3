"""Greedy and ANDREAS Randomized Greedy (Algorithm 1), both minimising f_obj (in the cloud
f_mix: ``costs.evaluate``, docs/design/objectives.md "Choosing the plan by the mix")."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from andreas.model import Plan, Snapshot
from andreas.costs import objective_name
from andreas.optimizer.construction import DEFAULT_SWAP_SCALE, compile_ordered, construct
from andreas.optimizer.problem import DEFAULT_ORDER
from andreas.optimizer.solution import to_plan
from andreas.policies import EnergyPrice

if TYPE_CHECKING:
    from andreas.interference import Sharing

DEFAULT_ITERATIONS = 1000
# Width of the restricted candidate list (1 = every candidate). On single snapshots a wide
# list finds better plans (optimum reached on 79 % of tiny snapshots with 1.0 against 29 %
# with 0.05), but over whole workloads it costs more: every reshuffle of the plan makes
# real jobs redo partial epochs, which a one-period objective sees only in part. Measured
# with the simulator (N = 20, scenarios 1 and 2, exponential and high arrivals), the
# thesis' values are at or near the best: 0.05 for rg; 1.0 was up to 2x dearer.
DEFAULT_ALPHA = 0.05
PR_ALPHA = DEFAULT_ALPHA
# The fallback to the greedy plan: on premise, where moves cost work (epoch checkpoints,
# restart overheads), rg and pr keep the greedy's plan unless theirs is lower by more than
# this share of the greedy's objective (ONPREM_FALLBACK while the greedy plan runs every
# job, SHORTAGE_FALLBACK while it leaves one waiting): a one-period objective favours
# plans that lose in the long run there (docs/design/optimizer.md, "Fallback to the
# greedy plan"; docs/results.md, "The long run").
ONPREM_FALLBACK = math.inf
SHORTAGE_FALLBACK = math.inf
# The moves' hysteresis (``move_margin``, ``costs.move_costs``): the work a move throws
# away counts 1 + margin times when rg and pr choose their plan, so a move must save
# margin times its own cost. Why: a plan prices a move's saving as if the new
# configuration lasted to the job's end, but the next event plans again, and in the
# cloud moved jobs went back and forth between packings (docs/results.md, "In the cloud,
# mixed arrivals"). Unset: CLOUD_MOVE_MARGIN in the cloud, 0 on premise (where rg and pr
# keep the greedy plan); no margin changes the papers' mode, whose moves are free.
CLOUD_MOVE_MARGIN = 3.0


def realistic_onprem(snapshot: Snapshot) -> bool:
    """On premise where every restart costs an overhead (the simulator's default mode, the
    manager): not the cloud, not the papers' mode, not a bare snapshot."""
    return not snapshot.cloud and snapshot.params.restart_overhead_s > 0


def energy_price_of(energy_price: str | None, snapshot: Snapshot) -> str:
    """The pricing in force: ``energy_price``, or unset above idle where restarts cost an
    overhead on premise (cheaper than the node's whole draw on every grid and power-limit
    trace measured, docs/results.md "The long run") and the node's whole draw elsewhere."""
    if energy_price is not None:
        return energy_price
    return EnergyPrice.ABOVE_IDLE if realistic_onprem(snapshot) else EnergyPrice.NODE


def keep_node_of(keep_node: bool | None, snapshot: Snapshot) -> bool:
    """``keep_node``, or unset: on where ``energy_price_of`` prices above idle: the two were
    measured together (without it, above-idle re-packs running jobs at every decision)."""
    return realistic_onprem(snapshot) if keep_node is None else bool(keep_node)


def move_margin_of(move_margin: float | None, snapshot: Snapshot) -> float:
    """The hysteresis in force: ``move_margin``, or the default where it is unset."""
    if move_margin is not None:
        return float(move_margin)
    return CLOUD_MOVE_MARGIN if snapshot.cloud else 0.0


def fallback_margin(problem, fallback: float | None, greedy_waits: bool) -> float:
    """The margin a plan must beat the greedy row's objective by (0: no fallback): by
    default ``ONPREM_FALLBACK`` / ``SHORTAGE_FALLBACK`` on premise where restarts cost
    something (``Problem.moves_cost``), else 0 (the cloud, where the search wins, and
    the papers' mode, whose plans are unchanged). With ``floor`` the policies do not
    fall back: the floor's guarantee (never above a work-conserving baseline plan) is
    per snapshot, what the caller asked for."""
    if fallback is not None:
        return fallback
    if problem.cloud or not problem.moves_cost:
        return 0.0
    return SHORTAGE_FALLBACK if greedy_waits else ONPREM_FALLBACK


def keeps_greedy(problem, fallback: float | None, floor: bool) -> bool:
    """rg's and pr's plan is the greedy row whatever their search finds: no ``floor`` and
    an infinite fallback whether or not that row leaves a job waiting (on premise where
    moves cost, by default). They then build that row only: the search would be thrown
    away (and with ``keep_node`` it costs about 1 ms a construction at 100 x 450)."""
    return not floor and all(math.isinf(fallback_margin(problem, fallback, waits))
                             for waits in (False, True))


def falls_back(value: float, greedy_value: float, margin: float) -> bool:
    """Keep the greedy plan: the chosen one is not lower by more than ``margin``."""
    return margin > 0 and not value < greedy_value - margin * abs(greedy_value)


def has_demands(snapshot: Snapshot) -> bool:
    """Rigid multi-resource tasks: planned by ``optimizer.sharing.decide_energy`` (it
    shares GPUs where that lowers f_obj), not by the numba kernels of elastic jobs."""
    return any(j.demand is not None for j in snapshot.jobs)


def rg_choice(problem, batch, *, floor: bool = False, fallback: float | None = None
              ) -> tuple[int, bool]:
    """rg's row of a batch: the best candidate, or row 0 (the greedy) where the fallback
    keeps it; and whether it fell back."""
    best = batch.best()
    fell = best != 0 and not floor and falls_back(
        float(batch.f_mix[best]), float(batch.f_mix[0]),
        fallback_margin(problem, fallback, bool((batch.node[0] < 0).any())))
    return (0 if fell else best), fell


def decide_greedy(snapshot: Snapshot, rng: np.random.Generator, *,
                  order: str = DEFAULT_ORDER, energy_price: str | None = None,
                  keep_node: bool | None = None, sharing: Sharing | None = None) -> Plan:
    """Pressure-sorted queue, best configuration, best fit, sub-optimal fallback, else wait."""
    if has_demands(snapshot):
        from andreas.optimizer.sharing import decide_energy
        return decide_energy(snapshot, rng, policy="greedy", iterations=1, sharing=sharing)
    problem = compile_ordered(snapshot, rng, order=order,
                              energy_price=energy_price_of(energy_price, snapshot),
                              keep_node=keep_node_of(keep_node, snapshot))
    batch = construct(problem, 1, rng, randomize=False)
    return to_plan(problem, batch.node[0], batch.cfg[0], batch.node_cls[0], policy="greedy",
                   objective=batch.f_mix[0], objective_name=objective_name(problem.cloud),
                   stats={"jobs": problem.n_jobs})


def decide_rg(snapshot: Snapshot, rng: np.random.Generator, *,
              iterations: int | None = None, alpha: float = DEFAULT_ALPHA,
              swap_scale: float = DEFAULT_SWAP_SCALE, order: str = DEFAULT_ORDER,
              floor: bool = False, fallback: float | None = None,
              energy_price: str | None = None, keep_node: bool | None = None,
              move_margin: float | None = None,
              sharing: Sharing | None = None) -> Plan:
    """Best f_obj (cloud: f_mix) over ``iterations`` constructions: the greedy first, with
    ``floor`` the baselines' plans (when work-conserving), then randomized ones; so never worse than
    greedy, and with ``floor`` never worse than a baseline whose plan leaves no job
    waiting next to free GPUs. Off by default: it costs more in the long run
    (docs/design/objectives.md). Rigid tasks: ``has_demands``."""
    if has_demands(snapshot):
        from andreas.optimizer.sharing import DEMAND_ITERATIONS, decide_energy
        return decide_energy(snapshot, rng, policy="rg",
                             iterations=iterations or DEMAND_ITERATIONS, sharing=sharing)
    iterations = iterations or DEFAULT_ITERATIONS
    problem = compile_ordered(snapshot, rng, order=order,
                              energy_price=energy_price_of(energy_price, snapshot),
                              keep_node=keep_node_of(keep_node, snapshot),
                              move_margin=move_margin_of(move_margin, snapshot))
    if keeps_greedy(problem, fallback, floor):
        iterations = 1
    batch = construct(problem, max(1, iterations), rng, alpha=alpha, swap_scale=swap_scale,
                      floor=floor)
    best, fell = rg_choice(problem, batch, floor=floor, fallback=fallback)
    stats = {"jobs": problem.n_jobs, "iterations": iterations, "best_iteration": best,
             "fallback": int(fell),
             "best_strategy": batch.names[batch.strategy[best]],
             "greedy_f_obj": float(batch.f_obj[0]), "f_obj": float(batch.f_obj[best]),
             "distinct_solutions": len({row.tobytes() for row in batch.cfg})}
    return to_plan(problem, batch.node[best], batch.cfg[best], batch.node_cls[best],
                   policy="rg", objective=batch.f_mix[best],
                   objective_name=objective_name(problem.cloud), stats=stats)
