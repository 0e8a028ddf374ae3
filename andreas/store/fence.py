"""The agent's fence reads: is a container's attempt still the job's current one here?

A node cut off from the manager may still run a job the manager has meanwhile ended
there ("node unreachable") and started elsewhere. The node's agent asks the store, for
each andreas container it runs, whether its (job, attempt) is still the job's latest
attempt, open, and placed on this node; the answer is a *verdict* per container (see
``agents/fence.py`` for what the agent does with it), with the attempt's planned GPU
power limit (``agents/powerlimits.py`` applies it). The agent's MariaDB account may read
only the five columns this needs (``andreas/store/accounts.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from andreas.store.chunks import chunks
from andreas.store.nodes import Db, run
from andreas.store.tables import job_attempts as JobAttempt
from andreas.store.tables import nodes as Node


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """``stale``: the store says the container must not run (ended, superseded, or placed
    on another node), with ``why``; False also for attempts the store does not know (e.g.
    ``andreas profile`` runs, which have no attempt row: the manager decides about those)."""

    stale: bool
    why: str = ""
    power_limit_w: float | None = None      # the limit the plan chose (None: the default)


def verdicts(db: Db, node_name: str,
             keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Verdict]:
    """One verdict per (job, attempt) running on node ``node_name``."""
    wanted = set(keys)
    out = {k: Verdict(stale=False) for k in wanted}
    if not wanted:
        return out
    node_id = run(db, select(Node.c.id).where(Node.c.name == node_name)).scalar()
    rows: dict[str, dict[int, tuple[int | None, float | None]]] = {}
    limits: dict[tuple[str, int], float | None] = {}
    for ids in chunks(sorted({j for j, _ in wanted})):
        for job_id, attempt, where, end_s, limit in run(db,
                select(JobAttempt.c.job_id, JobAttempt.c.attempt, JobAttempt.c.node_id,
                       JobAttempt.c.end_s, JobAttempt.c.power_limit_w)
                .where(JobAttempt.c.job_id.in_(ids))):
            rows.setdefault(job_id, {})[attempt] = (where, end_s)
            limits[job_id, attempt] = limit
    for key in wanted:
        if limits.get(key) is not None:
            out[key] = Verdict(stale=False, power_limit_w=limits[key])
    for job_id, attempt in wanted:
        mine = rows.get(job_id, {})
        latest = max(mine, default=0)
        if attempt not in mine:
            if latest > attempt:
                out[job_id, attempt] = Verdict(stale=True,
                                               why=f"superseded by attempt {latest}")
            continue
        where, end_s = mine[attempt]
        if end_s is not None:
            out[job_id, attempt] = Verdict(stale=True, why="attempt ended in the store")
        elif latest > attempt:
            out[job_id, attempt] = Verdict(stale=True, why=f"superseded by attempt {latest}")
        elif node_id is not None and where != node_id:
            out[job_id, attempt] = Verdict(stale=True, why="attempt placed on another node")
    return out
