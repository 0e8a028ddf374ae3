"""Node states: the allowed moves in one table, and the only writers of ``nodes.state``
and ``nodes.profiling``.

::

    up ◄──────► down          agent (register / clean shutdown), manager (engine lost / back)
     ▲ ╲         │
     │  ╲        ▼
     └── draining ◄──         operator (`andreas node drain` / `resume`)

Two kinds of writers use it. Machines (the agent, the manager's reconciler) move a node
only when it is still where they saw it (:func:`move_if`): a conditional ``UPDATE … WHERE
state = old``, so an operator's ``draining`` is never overwritten by a heartbeat or a
probe. Operators move a node from wherever it is (:func:`operator_move`), with an
InputError naming the node when the move is not allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, select, update
from sqlalchemy.orm import Session

from andreas.errors import InputError
from andreas.store.errors import InvalidTransition
from andreas.store.models import Node, NodeState

UP, DOWN, DRAINING = NodeState.UP, NodeState.DOWN, NodeState.DRAINING

ALLOWED: Mapping[NodeState, frozenset[NodeState]] = {
    UP: frozenset({DOWN, DRAINING}),
    DOWN: frozenset({UP, DRAINING}),
    # A draining node leaves only by an operator's resume: neither a clean agent
    # shutdown nor a lost engine may turn it into something the manager would plan on.
    DRAINING: frozenset({UP}),
}

Db = Session | Connection


def allowed(old: NodeState, new: NodeState) -> bool:
    return new in ALLOWED[old]


def check_move(node: str | int, old: NodeState, new: NodeState) -> None:
    """InvalidTransition naming the node, both states and what is allowed from ``old``."""
    if not allowed(old, new):
        targets = ", ".join(s.value for s in NodeState if s in ALLOWED[old])
        raise InvalidTransition(f"node {node}: cannot go from {old.value} to {new.value} "
                                f"(allowed from {old.value}: {targets})")


def move_if(db: Db, node_id: int, old: NodeState, new: NodeState) -> bool:
    """``old`` -> ``new`` if the node is still ``old``; returns whether it moved."""
    check_move(node_id, old, new)
    done = db.execute(update(Node).where(Node.id == node_id, Node.state == old)
                      .values(state=new).execution_options(synchronize_session=False))
    return done.rowcount == 1


def state_of(db: Db, name: str) -> NodeState:
    """The node's state; InputError naming the node when there is none."""
    state = db.execute(select(Node.state).where(Node.name == name)).scalar_one_or_none()
    if state is None:
        raise InputError(f"node {name!r}: no such node (see `andreas nodes`)")
    return state


def operator_move(db: Db, name: str, new: NodeState) -> NodeState:
    """An operator's move of node ``name`` to ``new``; returns the state it left (equal to
    ``new`` when it was already there and nothing changed)."""
    before = state_of(db, name)
    if before is new:
        return before
    if not allowed(before, new):
        raise InputError(f"node {name!r}: cannot go from {before.value} to {new.value}")
    done = db.execute(update(Node).where(Node.name == name, Node.state == before)
                      .values(state=new).execution_options(synchronize_session=False))
    if done.rowcount != 1:     # moved by the agent or the manager since we read it
        now = state_of(db, name)
        raise InputError(f"node {name!r}: changed to {now.value} meanwhile; try again")
    return before


def profiling_of(db: Db, name: str) -> bool:
    flag = db.execute(select(Node.profiling).where(Node.name == name)).scalar_one_or_none()
    if flag is None:
        raise InputError(f"node {name!r}: no such node (see `andreas nodes`)")
    return bool(flag)


def set_profiling(db: Db, node_ids: Iterable[int], flag: bool) -> None:
    """Mark (or clear) nodes as reserved for the Job Profiler: no production job there."""
    ids = list(node_ids)
    if ids:
        db.execute(update(Node).where(Node.id.in_(ids)).values(profiling=flag)
                   .execution_options(synchronize_session=False))


def set_profiling_by_name(db: Db, name: str, flag: bool) -> bool:
    """Set node ``name``'s profiling mark; returns what it was."""
    was = profiling_of(db, name)
    if was != flag:
        db.execute(update(Node).where(Node.name == name).values(profiling=flag)
                   .execution_options(synchronize_session=False))
    return was


def states(db: Db) -> dict[str, NodeState]:
    """Every node's state, by name."""
    return dict(db.execute(select(Node.name, Node.state)).all())
