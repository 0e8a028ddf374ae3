"""Decisions (``decisions``: one row per rescheduling, with its plan document): the one
writer, and the reads of the manager (its target), the views and the reports."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from andreas.store.chunks import chunks
from andreas.store.models import Decision
from andreas.store.nodes import Db


@dataclass(frozen=True, kw_only=True)
class DecisionRef:
    """A decision named by an attempt (started or stopped it); None fields: the row is gone."""

    id: int
    t: float | None = None
    trigger: str | None = None
    policy: str | None = None


@dataclass(frozen=True, kw_only=True)
class DecisionInfo:
    """A decision with its plan document (None: not a JSON object)."""

    id: int
    t_s: float
    trigger: str
    policy: str
    plan: Mapping[str, Any] | None


def add_decision(s: Session, *, t: float, trigger: str, policy: str, objective: float | None,
                 objective_name: str, seconds: float, plan: Mapping[str, Any]) -> int:
    """Store a decision (names cut to their columns' widths); its id."""
    row = Decision(t=t, trigger=trigger[:32], policy=policy[:32], objective=objective,
                   objective_name=objective_name[:16], seconds=seconds, plan=plan)
    s.add(row)
    s.flush()
    return row.id


def latest_decision(db: Db) -> DecisionInfo | None:
    """The most recent decision (the highest id: the manager's target), None when none."""
    row = db.execute(select(Decision.id, Decision.t, Decision.trigger, Decision.policy,
                            Decision.plan).order_by(Decision.id.desc()).limit(1)).one_or_none()
    return None if row is None else _info(row)


def decisions_between(db: Db, since_s: float, until_s: float) -> tuple[DecisionInfo, ...]:
    """Decisions with ``since_s <= t < until_s``, in time order."""
    return tuple(_info(r) for r in db.execute(
        select(Decision.id, Decision.t, Decision.trigger, Decision.policy, Decision.plan)
        .where(Decision.t >= since_s, Decision.t < until_s).order_by(Decision.t, Decision.id)))


def recent_decisions(db: Db, since_s: float, limit: int) -> tuple[DecisionInfo, ...]:
    """The newest ``limit`` decisions with ``t >= since_s``, newest first."""
    return tuple(_info(r) for r in db.execute(
        select(Decision.id, Decision.t, Decision.trigger, Decision.policy, Decision.plan)
        .where(Decision.t >= since_s).order_by(Decision.id.desc()).limit(limit)))


def decision_refs(db: Db, ids: Collection[int]) -> dict[int, DecisionRef]:
    """The decisions with these ids that still exist."""
    out = {}
    for chunk in chunks(sorted(set(ids))):
        for i, t, trigger, policy in db.execute(
                select(Decision.id, Decision.t, Decision.trigger, Decision.policy)
                .where(Decision.id.in_(chunk))):
            out[i] = DecisionRef(id=i, t=t, trigger=trigger, policy=policy)
    return out


def _info(row: Any) -> DecisionInfo:
    i, t, trigger, policy, plan = row             # (a Row's ``.t`` is its typed tuple)
    return DecisionInfo(id=i, t_s=float(t), trigger=trigger, policy=policy,
                        plan=plan if isinstance(plan, Mapping) else None)
