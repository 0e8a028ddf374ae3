"""``andreas node drain|resume|unmark-profiling NODE``: an operator's actions on one node.

- ``drain``: up (or down) -> draining. The manager starts nothing new there; jobs running
  there are pinned (not moved, not stopped) until they end. For maintenance: drain, wait
  until ``andreas nodes`` shows no job on it, then stop the node.
- ``resume``: draining or down -> up. The manager plans on it again at its next tick; a
  node whose engine still does not answer is marked down again by the manager.
- ``unmark-profiling``: clears the Job Profiler's mark, which a profiler killed with
  SIGKILL leaves behind (the node is otherwise kept out of production scheduling).

Each change is one conditional UPDATE, so it races safely with the manager's own marks.
"""

from __future__ import annotations

import click
from sqlalchemy import select, update

from andreas.cli_db import _db_errors
from andreas.config import load_settings
from andreas.errors import InputError
from andreas.store.engine import Store, open_store
from andreas.store.models import Node, NodeState

_MOVES = {"drain": (NodeState.DRAINING, (NodeState.UP, NodeState.DOWN)),
          "resume": (NodeState.UP, (NodeState.DRAINING, NodeState.DOWN))}


def change_state(store: Store, name: str, action: str) -> tuple[NodeState, NodeState]:
    """Apply ``drain`` / ``resume`` to node ``name``; returns (before, after). Already in
    the wanted state: nothing changes (before == after). Unknown node: InputError."""
    new, allowed = _MOVES[action]
    with store.session() as s:
        before = s.execute(select(Node.state).where(Node.name == name)).scalar_one_or_none()
        if before is None:
            raise InputError(f"NODE {name!r}: no such node (see `andreas nodes`)")
        if before is new:
            return before, before
        done = s.execute(update(Node).where(Node.name == name, Node.state.in_(allowed))
                         .values(state=new)).rowcount
        if not done:
            now = s.execute(select(Node.state).where(Node.name == name)).scalar_one()
            raise InputError(f"NODE {name!r}: cannot {action} a node that is {now.value}")
    return before, new


def unmark_profiling(store: Store, name: str) -> bool:
    """Clear the profiling mark; returns whether it was set. Unknown node: InputError."""
    with store.session() as s:
        was = s.execute(select(Node.profiling).where(Node.name == name)).scalar_one_or_none()
        if was is None:
            raise InputError(f"NODE {name!r}: no such node (see `andreas nodes`)")
        if was:
            s.execute(update(Node).where(Node.name == name).values(profiling=False))
    return bool(was)


@click.group("node")
def node_group() -> None:
    """An operator's actions on one node: drain it before maintenance, resume it, clear a
    stale profiling mark. `andreas nodes` lists them."""


def _on_store(action, node: str):
    """``action(store, node)`` on the configured store, which is closed afterwards."""
    store = open_store(settings=load_settings(), retries=0)
    try:
        return action(store, node)
    finally:
        store.dispose()


@node_group.command("drain")
@click.argument("node")
@_db_errors
def drain_cmd(node: str) -> None:
    """Start nothing new on NODE; its running jobs finish there (not moved, not stopped)."""
    before, after = _on_store(lambda store, name: change_state(store, name, "drain"), node)
    if before is after:
        click.echo(f"node {node}: already draining")
    else:
        click.echo(f"node {node}: {before.value} -> draining; running jobs finish there, "
                   "nothing new starts (`andreas node resume` undoes it)")


@node_group.command("resume")
@click.argument("node")
@_db_errors
def resume_cmd(node: str) -> None:
    """Put a draining or down NODE back into scheduling (the manager marks it down again
    if its Docker engine does not answer)."""
    before, after = _on_store(lambda store, name: change_state(store, name, "resume"), node)
    if before is after:
        click.echo(f"node {node}: already up")
    else:
        click.echo(f"node {node}: {before.value} -> up; planned on from the manager's next tick")


@node_group.command("unmark-profiling")
@click.argument("node")
@_db_errors
def unmark_profiling_cmd(node: str) -> None:
    """Clear NODE's profiling mark (left by a profiler that was killed)."""
    was = _on_store(unmark_profiling, node)
    click.echo(f"node {node}: " + ("profiling mark cleared; back in production scheduling"
                                   if was else "was not marked profiling; nothing changed"))


def register_node(main: click.Group) -> None:
    main.add_command(node_group)
