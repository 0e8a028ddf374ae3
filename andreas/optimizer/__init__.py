"""The Job Optimizer: every policy is ``decide(snapshot, rng, **options) -> Plan``.

Policies are looked up by name in a registry; modules are imported on first use so
that importing andreas does no work.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from andreas.errors import InputError
from andreas.model import Plan, Snapshot

Policy = Callable[..., Plan]

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
}


def get_policy(name: str) -> Policy:
    try:
        module, func, _ = POLICIES[name]
    except KeyError:
        raise InputError(f"policy: unknown policy {name!r} (known: {', '.join(POLICIES)})") from None
    return getattr(importlib.import_module(module), func)


def decide(snapshot: Snapshot, rng: np.random.Generator, policy: str = "rg",
           **options: Any) -> Plan:
    """Run the named policy on a snapshot."""
    return get_policy(policy)(snapshot, rng, **options)
