"""Holding a waiting job back for cheaper hours under a tariff (see :func:`deferrals`).

The policies' objective cannot ask for it (a postponed job costs only the lateness waiting
adds), so this rule sits beside the objectives, on the same node kinds and run times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from andreas.costs import NodeKind, best_restart_s, node_kinds
from andreas.limits import SECONDS_PER_HOUR
from andreas.model import Snapshot


DEFER_MIN_SAVING = 0.05   # hold a job back only for at least 5 % off its energy cost
# ... and only to a start that would leave it this many more run times (plus H) before its
# due date: jobs held for the same cheap hours compete for nodes then, and an hour late
# costs more than a run's energy (measured: with 0 the held jobs' lateness ate the saving)
DEFER_SLACK_RUNS = 1.0


@dataclass(frozen=True, kw_only=True)
class Deferral:
    """A waiting job that is cheaper to start later: at ``start_s``, within its slack,
    its run costs ``saving`` (a fraction) less than if it started now."""

    job: str
    start_s: float
    saving: float


def deferrals(snapshot: Snapshot, kinds: tuple[NodeKind, ...] | None = None,
              min_saving: float = DEFER_MIN_SAVING) -> tuple[Deferral, ...]:
    """The waiting jobs worth holding back for cheaper hours (none without a tariff).

    f_obj cannot say "wait for the cheap hour": it charges a postponed job only the
    lateness waiting adds, so postponing any job with slack is free whatever the hour,
    and the constructions are work-conserving for that reason. This is the rule that
    holds a job back instead. For a waiting job with remaining time ``b`` on its best
    configuration, the energy cost of starting at ``s`` is its marginal power x the
    tariff's integral over [s, s + b); the power cancels in the comparison. The starts
    considered are those that leave ``DEFER_SLACK_RUNS`` run times plus one period H
    before its due date (the next decision may come up to H late, and the cheap hours may
    be crowded), within one day (the tariff repeats): the minimum of
    a piecewise-linear function of s lies where s or s + b crosses an hour, so those
    points and the ends are searched. The job waits when the cheapest saves at least
    ``min_saving`` of starting now. Running jobs are never held (a restart costs work)."""
    tariff = snapshot.energy.tariff
    if tariff is None or snapshot.cloud:
        return ()
    kinds = kinds if kinds is not None else node_kinds(snapshot)
    now, period = snapshot.now_s, snapshot.params.period_s
    out = []
    for job in snapshot.jobs:
        if job.running is not None:
            continue
        b = best_restart_s(snapshot, job, kinds)
        if b is None or b <= 0:
            continue
        latest = min(job.due_s - (1.0 + DEFER_SLACK_RUNS) * b - period, now + 86400.0)
        if latest <= now:
            continue
        hours = np.arange(math.floor(now / SECONDS_PER_HOUR) + 1,
                          math.floor((latest + b) / SECONDS_PER_HOUR) + 1) * SECONDS_PER_HOUR
        starts = np.concatenate(([now, latest], hours, hours - b))
        starts = starts[(starts >= now) & (starts <= latest)]
        cost = np.asarray(tariff.integral(starts, starts + b))
        k = int(np.argmin(cost))
        now_cost = float(cost[0])
        if now_cost > 0 and cost[k] <= (1.0 - min_saving) * now_cost:
            out.append(Deferral(job=job.id, start_s=float(starts[k]),
                                saving=1.0 - float(cost[k]) / now_cost))
    return tuple(out)
