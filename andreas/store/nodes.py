"""Node states: the allowed moves in one table, and the only writers of ``nodes.state``
and ``nodes.profiling``.

::

    up ◄──────► down          agent (register / clean shutdown), manager (engine lost / back)
     ▲ ╲         │
     │  ╲        ▼
     └── draining ◄──         operator (`andreas node drain` / `resume`)
    up ──► off ──► waking ──► up    manager's power-down (``andreas.manager.power``):
           ▲         │              switched off from the plan, switched on for it, up
           └─────────┘              when its engine answers (off again: it never did)

``off`` and ``waking`` are left only by the manager or an operator: neither the agent's
registration (``down`` -> ``up``) nor its clean shutdown (``up`` -> ``down``) starts from
them, so a machine halting or booting under the manager's command never looks like a
failure, nor like a node to plan on before the manager has seen its engine.

A node is born ``up`` (:func:`insert_node`, the agent's registration). Two kinds of
writers move it. Machines (the agent, the manager's reconciler) move a node
only when it is still where they saw it (:func:`move_if`): a conditional ``UPDATE … WHERE
state = old``, so an operator's ``draining`` is never overwritten by a heartbeat or a
probe. Operators move a node from wherever it is (:func:`operator_move`), with an
InputError naming the node when the move is not allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from sqlalchemy import Connection, CursorResult, Executable, func, insert, select, update

from andreas.errors import InputError
from andreas.store.errors import InvalidTransition
from andreas.store.tables import NodeState
from andreas.store.tables import gpus as Gpu
from andreas.store.tables import job_attempts as JobAttempt
from andreas.store.tables import nodes as Node

if TYPE_CHECKING:     # the agent passes Connections: it never imports sqlalchemy.orm
    from sqlalchemy.orm import Session

UP, DOWN, DRAINING = NodeState.UP, NodeState.DOWN, NodeState.DRAINING
OFF, WAKING = NodeState.OFF, NodeState.WAKING

ALLOWED: Mapping[NodeState, frozenset[NodeState]] = {
    UP: frozenset({DOWN, DRAINING, OFF}),
    DOWN: frozenset({UP, DRAINING}),
    # A draining node leaves only by an operator's resume: neither a clean agent
    # shutdown nor a lost engine may turn it into something the manager would plan on.
    DRAINING: frozenset({UP}),
    # off -> up: a failed switch-off is undone, or an operator switched it on by hand.
    OFF: frozenset({WAKING, UP, DRAINING}),
    # waking -> off: switched on but its engine never answered (or the command failed).
    WAKING: frozenset({UP, OFF, DRAINING}),
}

Db: TypeAlias = "Session | Connection"
"""What the store's functions take: an ORM session or a Core connection, in the caller's
transaction (callers outside the store name the type through this alias)."""


def run(db: Db, statement: Executable) -> CursorResult[*tuple[Any, ...]]:
    """Execute a Core statement (on :mod:`andreas.store.tables`) in the caller's
    transaction. A Session flushes its pending objects first when it autoflushes, as it
    does before its ORM statements, so a caller's unflushed changes are seen as before."""
    if not isinstance(db, Connection) and db.autoflush:
        db.flush()
    # cast: a Session types its results as ORM ones, but a Core statement's result is
    # the connection's CursorResult there too
    return cast("CursorResult[*tuple[Any, ...]]", db.execute(statement))


def inserted_id(result: CursorResult[*tuple[Any, ...]]) -> int:
    """The new row's id: an INSERT of one row on an autoincrement key always sets it."""
    key = result.inserted_primary_key
    if key is None:
        raise RuntimeError("INSERT returned no primary key")
    return int(key[0])


class UnknownNode(InputError):
    """No node has this name; ``name`` lets a command name its own option or argument."""

    def __init__(self, name: str) -> None:
        super().__init__(f"node {name!r}: no such node (see `andreas nodes`)")
        self.name = name


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    """A ``nodes`` row as the profiler and ``andreas costs`` read it."""

    id: int
    name: str
    state: NodeState
    profiling: bool
    gpu_type: str
    gpu_count: int
    docker_endpoint: str


def allowed(old: NodeState, new: NodeState) -> bool:
    return new in ALLOWED[old]


def check_move(node: str | int, old: NodeState, new: NodeState) -> None:
    """InvalidTransition naming the node, both states and what is allowed from ``old``."""
    if not allowed(old, new):
        targets = ", ".join(s.value for s in NodeState if s in ALLOWED[old])
        raise InvalidTransition(f"node {node}: cannot go from {old.value} to {new.value} "
                                f"(allowed from {old.value}: {targets})")


def move_if(db: Db, node_id: int, old: NodeState, new: NodeState, *,
            at_s: float | None = None) -> bool:
    """``old`` -> ``new`` if the node is still ``old``; returns whether it moved.
    ``at_s``: stored as ``state_changed_s`` (the manager's moves; the agent's account may
    not write that column and passes none)."""
    check_move(node_id, old, new)
    values: dict = {"state": new}
    if at_s is not None:
        values["state_changed_s"] = at_s
    done = run(db, update(Node).where(Node.c.id == node_id, Node.c.state == old)
               .values(**values))
    return done.rowcount == 1


def insert_node(db: Db, *, name: str, docker_endpoint: str, gpu_type: str,
                gpu_count: int) -> int:
    """A new node, ``up``; returns its id."""
    return inserted_id(run(db, insert(Node).values(
        name=name, state=UP, docker_endpoint=docker_endpoint, gpu_type=gpu_type,
        gpu_count=gpu_count)))


def state_of(db: Db, name: str) -> NodeState:
    """The node's state; UnknownNode when there is none."""
    state = run(db, select(Node.c.state).where(Node.c.name == name)).scalar_one_or_none()
    if state is None:
        raise UnknownNode(name)
    return state


def operator_move(db: Db, name: str, new: NodeState, *, at_s: float | None = None
                  ) -> NodeState:
    """An operator's move of node ``name`` to ``new``; returns the state it left (equal to
    ``new`` when it was already there and nothing changed). ``at_s``: stored as
    ``state_changed_s``."""
    before = state_of(db, name)
    if before is new:
        return before
    if not allowed(before, new):
        raise InputError(f"node {name!r}: cannot go from {before.value} to {new.value}")
    values: dict = {"state": new}
    if at_s is not None:
        values["state_changed_s"] = at_s
    done = run(db, update(Node).where(Node.c.name == name, Node.c.state == before)
               .values(**values))
    if done.rowcount != 1:     # moved by the agent or the manager since we read it
        now = state_of(db, name)
        raise InputError(f"node {name!r}: changed to {now.value} meanwhile; try again")
    return before


def profiling_of(db: Db, name: str) -> bool:
    flag = run(db, select(Node.c.profiling).where(Node.c.name == name)).scalar_one_or_none()
    if flag is None:
        raise UnknownNode(name)
    return bool(flag)


def set_profiling(db: Db, node_ids: Iterable[int], flag: bool) -> None:
    """Mark (or clear) nodes as reserved for the Job Profiler: no production job there."""
    ids = list(node_ids)
    if ids:
        run(db, update(Node).where(Node.c.id.in_(ids)).values(profiling=flag))


def set_profiling_by_name(db: Db, name: str, flag: bool) -> bool:
    """Set node ``name``'s profiling mark; returns what it was."""
    was = profiling_of(db, name)
    if was != flag:
        run(db, update(Node).where(Node.c.name == name).values(profiling=flag))
    return was


def states(db: Db) -> dict[str, NodeState]:
    """Every node's state, by name."""
    return dict(run(db, select(Node.c.name, Node.c.state)).all())


def count_by_state(db: Db) -> dict[NodeState, int]:
    """How many nodes are in each state (every state, 0 where none): the metrics exporter."""
    counts = dict.fromkeys(NodeState, 0)
    for state, n in run(db, select(Node.c.state, func.count()).group_by(Node.c.state)):
        counts[state] = int(n)
    return counts


def touch_heartbeat(db: Db, node_id: int, t_s: float) -> None:
    """The agent's sign of life (its state is left alone)."""
    run(db, update(Node).where(Node.c.id == node_id).values(last_heartbeat_s=t_s))


def set_power_caps(db: Db, name: str, caps: dict | None) -> None:
    """What the node's GPUs accept as power limits (its agent, once at start)."""
    run(db, update(Node).where(Node.c.name == name).values(power_caps=caps))


def power_caps(db: Db) -> dict[str, dict]:
    """Node name -> its reported power caps (nodes that reported any)."""
    return {name: caps for name, caps in run(db, select(Node.c.name, Node.c.power_caps))
            if isinstance(caps, dict)}


def list_nodes(db: Db) -> list[NodeInfo]:
    """Every node, by name."""
    return [NodeInfo(id=n.id, name=n.name, state=n.state, profiling=bool(n.profiling),
                     gpu_type=n.gpu_type, gpu_count=n.gpu_count,
                     docker_endpoint=n.docker_endpoint)
            for n in run(db, select(Node.c.id, Node.c.name, Node.c.state, Node.c.profiling,
                                    Node.c.gpu_type, Node.c.gpu_count, Node.c.docker_endpoint)
                         .order_by(Node.c.name))]


def last_attempt_ends(db: Db) -> dict[int, float]:
    """Node id -> the latest end of an attempt there (the power-down's idle clock; nodes
    where nothing ever ran are absent)."""
    return {int(n): float(t) for n, t in run(db,
        select(JobAttempt.c.node_id, func.max(JobAttempt.c.end_s))
        .where(JobAttempt.c.node_id.is_not(None), JobAttempt.c.end_s.is_not(None))
        .group_by(JobAttempt.c.node_id))}


def gpu_counts(db: Db) -> dict[int, int]:
    """Node id -> its GPUs in the inventory (GPUs that left a node, index < 0, excluded);
    nodes without GPU rows are absent."""
    return {int(n): int(c) for n, c in run(db,
        select(Gpu.c.node_id, func.count()).where(Gpu.c.gpu_index >= 0)
        .group_by(Gpu.c.node_id))}


def usable_gpus(db: Db, node_id: int) -> tuple[tuple[int, str], ...]:
    """(index, UUID) of the node's healthy, non-MIG GPUs, by index."""
    return tuple((int(i), u) for i, u in run(db,
        select(Gpu.c.gpu_index, Gpu.c.uuid)
        .where(Gpu.c.node_id == node_id, Gpu.c.healthy.is_(True),
               Gpu.c.mig_enabled.is_(False)).order_by(Gpu.c.gpu_index)))


def gpu_store_ids(db: Db, node_id: int, uuids: Iterable[str]) -> list[int]:
    """The store's ids of the node's GPUs with these UUIDs."""
    wanted = list(uuids)
    return [int(i) for (i,) in run(db, select(Gpu.c.id).where(Gpu.c.node_id == node_id,
                                                               Gpu.c.uuid.in_(wanted)))]


def held_gpu_indexes(db: Db, node_id: int) -> set[int]:
    """GPU indexes of the node that open attempts (containers not yet ended) hold."""
    held: set[int] = set()
    for (ids,) in run(db, select(JobAttempt.c.gpu_ids).where(JobAttempt.c.node_id == node_id,
                                                             JobAttempt.c.end_s.is_(None))):
        held.update(int(i) for i in ids or ())
    return held
