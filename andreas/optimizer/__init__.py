"""The Job Optimizer: every policy is ``decide(snapshot, rng, **options) -> Plan``.

Policies are looked up by name in a registry; modules are imported on first use so
that importing andreas does no work.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from andreas.errors import InputError

if TYPE_CHECKING:   # hints only: the agent and `andreas submit` read MANAGER_POLICIES
    import numpy as np

    from andreas.model import Plan, Snapshot

Policy = Callable[..., "Plan"]

# name -> (module, function, one-line description)
POLICIES: dict[str, tuple[str, str, str]] = {
    "greedy": ("andreas.optimizer.greedy", "decide_greedy",
               "pressure-sorted greedy, best configuration, best fit (minimises f_obj)"),
    "rg": ("andreas.optimizer.greedy", "decide_rg",
           "ANDREAS randomized greedy, best f_obj of MaxIt constructions"),
    "pr": ("andreas.optimizer.relinking", "decide_pr",
           "randomized construction + path relinking + post-processing (maximises f_bar)"),
    "fifo": ("andreas.optimizer.baselines", "decide_fifo",
             "first in first out, one job per node, jobs keep their resources"),
    "edf": ("andreas.optimizer.baselines", "decide_edf",
            "earliest deadline first, one job per node, jobs keep their resources"),
    "priority": ("andreas.optimizer.baselines", "decide_priority",
                 "highest tardiness weight first, one job per node, jobs keep their resources"),
    "milp": ("andreas.optimizer.milp", "decide_milp",
             "exact MILP of f_obj solved by HiGHS (time limit, MIP gap; small snapshots)"),
    "hierarchical": ("andreas.optimizer.hierarchical", "decide_hierarchical",
                     "the papers' Hierarchical Method: 5-node controllers, MILP at 5 % gap each"),
    "dp-wct": ("andreas.optimizer.dp", "decide_dp_wct",
               "Saxena et al.'s DP as path relinking adapts it: F1 = F2 = F_WCT, one job per node"),
    "dp-fastwct": ("andreas.optimizer.dp", "decide_dp_fastwct",
                   "DP baseline: fastest configuration, F2 = F_WCT, one job per node"),
    "dp-fastb": ("andreas.optimizer.dp", "decide_dp_fastb",
                 "DP baseline: fastest configuration, F2 = F_B (constant B), one job per node"),
    "dp-adjwct": ("andreas.optimizer.dp", "decide_dp_adjwct",
                  "DP baseline: F1 = adjusted tardiness (eq. 5), F2 = F_WCT, one job per node"),
    "first-fit": ("andreas.optimizer.packing", "decide_first_fit",
                  "packing baseline: each waiting task on the first node where it fits"),
    "round-robin": ("andreas.optimizer.packing", "decide_round_robin",
                    "packing baseline: nodes in turn regardless of load"),
    "tetris": ("andreas.optimizer.packing", "decide_tetris",
               "packing baseline: best alignment (dot product) of demand and free resources"),
    "best-fit": ("andreas.optimizer.packing", "decide_best_fit",
                 "packing baseline: exclusive GPUs, node with the fewest free GPUs that fits"),
    "ojpp-greedy": ("andreas.optimizer.sharing", "decide_ojpp_greedy",
                    "GPU sharing: best-fit decreasing under collision, interference and "
                    "balance bounds (interference-aware placement, Alg. 1-2)"),
    "ojpp-heuristic": ("andreas.optimizer.sharing", "decide_ojpp_heuristic",
                       "GPU sharing: ojpp-greedy ordered by gregariousness (Alg. 3)"),
    "i-greedy": ("andreas.optimizer.sharing", "decide_i_greedy",
                 "GPU sharing baseline: greedy with the interference bound only"),
    "b-greedy": ("andreas.optimizer.sharing", "decide_b_greedy",
                 "GPU sharing baseline: greedy with the balance bound only"),
    "c-greedy": ("andreas.optimizer.sharing", "decide_c_greedy",
                 "GPU sharing baseline: greedy with the collision bound only"),
    "ojpap": ("andreas.optimizer.sharing", "decide_ojpap",
              "GPU sharing: ojpp-heuristic plus the online adjustment (Alg. 4): moves jobs "
              "off GPUs whose measured interference (EWMA) breaks the bound, within a "
              "migration budget"),
    "ga": ("andreas.optimizer.genetic", "decide_ga",
           "genetic scheduling paper: a GA (PyGAD) over task-to-node genes maximising GPU "
           "allocation, seeded with First-Fit / Tetris / Best-Fit"),
    "ga-energy": ("andreas.optimizer.genetic_energy", "decide_ga_energy",
                  "the same GA over node and GPU count of elastic jobs minimising f_obj, "
                  "seeded with rg's constructions (never worse than rg)"),
    # rolling horizon (issue 33): one small block, ported to the registry at merge
    "horizon": ("andreas.optimizer.horizon", "decide_horizon",
                "rolling horizon: the next hours as a time-indexed MILP (HiGHS) warm-started "
                "from greedy and rg, starts what its plan starts now (never above greedy's "
                "plan on its objective)"),
}

# Policies that share GPUs under the interference bounds (they take ``sharing=``).
SHARING_POLICIES = ("ojpp-greedy", "ojpp-heuristic", "ojpap", "i-greedy", "b-greedy",
                    "c-greedy")

# Policies that place rigid multi-resource tasks (GPU fractions, CPU, memory) through
# andreas.resources; the others plan whole dedicated GPUs of elastic jobs only.
PACKING_POLICIES = ("first-fit", "round-robin", "tetris", "best-fit", "ga",
                    *SHARING_POLICIES)

# Policies that place jobs on the GPUs on-premise nodes own and refuse cloud snapshots
# (a VM has no GPUs until a plan configures it): the packers and ga-energy, whose genes
# are on-premise nodes.
ON_PREMISE_POLICIES = (*PACKING_POLICIES, "ga-energy")

# The genetic policies (they take ``population=`` and ``generations=``).
GA_POLICIES = ("ga", "ga-energy")

# Policies that choose the GPUs' power limit with the rest (andreas/levels.py); the others
# plan every GPU at its default limit.
LEVEL_POLICIES = ("greedy", "rg", "pr", "milp")

# Policies that keep state from one decision to the next (the simulator and the manager
# hand each one its own dict as ``state``).
STATEFUL_POLICIES = ("round-robin", "ojpap")


# Energy policies that also plan rigid tasks (they share GPUs where f_obj says so).
ENERGY_SHARING_POLICIES = ("greedy", "rg")


def plans_demands(name: str) -> bool:
    """Whether the policy honours ``Job.demand`` (fractions, CPU, memory)."""
    return name in PACKING_POLICIES or name in ENERGY_SHARING_POLICIES


def takes_sharing(name: str) -> bool:
    """Whether the policy takes the sharing bounds as ``sharing=``."""
    return name in SHARING_POLICIES or name in ENERGY_SHARING_POLICIES


# The policies `andreas manager run` offers (the others are for studies: exact, DP, ...).
# rg, greedy and the packing ones also place jobs submitted with a GPU share; ojpap moves
# a share to another GPU when its measured slowdown stays above the bound.
MANAGER_POLICIES = ("rg", "pr", "greedy", "horizon", "fifo", "edf", "priority", "ojpp-heuristic",
                    "ojpp-greedy", "ojpap", "best-fit", "first-fit")

# name -> rescheduling period (s) the simulator uses when the user gives none: the paper
# runs its DP baselines every Delta t = 15 min (its best) and the others every H = 1 h
# (path-relinking-2022 §4.2.2). Policies not listed follow the trace's period_s.
DEFAULT_PERIOD_S: dict[str, float] = {
    "dp-wct": 900.0, "dp-fastwct": 900.0, "dp-fastb": 900.0, "dp-adjwct": 900.0,
}


def default_period_s(name: str) -> float | None:
    """The policy's own rescheduling period, or None to use the trace's."""
    return DEFAULT_PERIOD_S.get(name)


def get_policy(name: str) -> Policy:
    try:
        module, func, _ = POLICIES[name]
    except KeyError:
        raise InputError(f"policy: unknown policy {name!r} "
                         f"(known: {', '.join(POLICIES)})") from None
    return getattr(importlib.import_module(module), func)


def decide(snapshot: Snapshot, rng: np.random.Generator, policy: str = "rg",
           **options: Any) -> Plan:
    """Run the named policy on a snapshot."""
    fn = get_policy(policy)
    if snapshot.cloud and policy in ON_PREMISE_POLICIES:
        # Packing places tasks on GPUs a node owns; a cloud VM has none until configured.
        what = "packs tasks on" if policy in PACKING_POLICIES else "plans jobs on"
        raise InputError(f"policy: {policy!r} {what} on-premise GPUs; a cloud "
                         f"snapshot needs an energy policy (rg, pr, greedy, ...)")
    if policy not in LEVEL_POLICIES or any(j.demand is not None for j in snapshot.jobs):
        from andreas.levels import without_levels
        snapshot = without_levels(snapshot)
    if snapshot.energy.tariff is None or snapshot.cloud:
        return fn(snapshot, rng, **options)
    return _with_deferrals(fn, snapshot, rng, options)


def _with_deferrals(fn: Policy, snapshot: Snapshot, rng: np.random.Generator,
                    options: dict[str, Any]) -> Plan:
    """Under a time-of-use tariff, waiting jobs that are cheaper to start in a later hour
    within their slack (``costs.deferrals``) wait; the policy plans the others."""
    from dataclasses import replace

    from andreas.costs import deferrals

    held = {d.job for d in deferrals(snapshot)}
    if not held:
        return fn(snapshot, rng, **options)
    rest = replace(snapshot, jobs=tuple(j for j in snapshot.jobs if j.id not in held))
    plan = fn(rest, rng, **options)
    waiting = tuple(j.id for j in snapshot.jobs if j.id in held)
    return replace(plan, postponed=plan.postponed + waiting,
                   stats={**plan.stats, "deferred": float(len(waiting))})
