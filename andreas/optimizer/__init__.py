"""The Job Optimizer: every policy is ``decide(snapshot, rng, **options) -> Plan``.

Which policies exist, what they plan and which options they take is the registry's
(``andreas/policies.py``); :func:`decide` checks the options against it, imports the
policy's module on first use and runs it, so that importing andreas does no work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from andreas import policies
from andreas.errors import InputError

if TYPE_CHECKING:   # hints only: numpy and the model are imported by the policies
    import numpy as np

    from andreas.model import Plan, Snapshot

Policy = Callable[..., "Plan"]


def get_policy(name: str) -> Policy:
    """The named policy's function (an InputError for an unknown name)."""
    return policies.get(name).load()


def decide(snapshot: Snapshot, rng: np.random.Generator, policy: str = "rg",
           **options: Any) -> Plan:
    """Run the named policy on a snapshot; an option it does not take is an InputError."""
    spec = policies.get(policy)
    spec.check(options)
    fn = spec.load()
    if snapshot.cloud and not spec.cloud:
        # Packing places tasks on GPUs a node owns; a cloud VM has none until configured.
        what = "packs tasks on" if spec.kind is policies.TaskKind.RIGID else "plans jobs on"
        raise InputError(f"policy: {policy!r} {what} on-premise GPUs; a cloud "
                         f"snapshot needs an energy policy (rg, pr, greedy, ...)")
    if not spec.power_levels or any(j.demand is not None for j in snapshot.jobs):
        from andreas.levels import without_levels
        snapshot = without_levels(snapshot)
    if snapshot.energy.tariff is None or snapshot.cloud:
        return fn(snapshot, rng, **options)
    return _with_deferrals(fn, snapshot, rng, options)


def _with_deferrals(fn: Policy, snapshot: Snapshot, rng: np.random.Generator,
                    options: dict[str, Any]) -> Plan:
    """Under a time-of-use tariff, waiting jobs that are cheaper to start in a later hour
    within their slack (``deferral.deferrals``) wait; the policy plans the others."""
    from dataclasses import replace

    from andreas.deferral import deferrals

    held = {d.job for d in deferrals(snapshot)}
    if not held:
        return fn(snapshot, rng, **options)
    rest = replace(snapshot, jobs=tuple(j for j in snapshot.jobs if j.id not in held))
    plan = fn(rest, rng, **options)
    waiting = tuple(j.id for j in snapshot.jobs if j.id in held)
    return replace(plan, postponed=plan.postponed + waiting,
                   stats={**plan.stats, "deferred": float(len(waiting))})
