"""``andreas node drain|resume|unmark-profiling NODE``: an operator's actions on one node.

- ``drain``: up (or down) -> draining. The manager starts nothing new there; jobs running
  there are pinned (not moved, not stopped) until they end. For maintenance: drain, wait
  until ``andreas nodes`` shows no job on it, then stop the node.
- ``resume``: draining or down -> up. The manager plans on it again at its next tick; a
  node whose engine still does not answer is marked down again by the manager.
- ``unmark-profiling``: clears the Job Profiler's mark, which a profiler killed with
  SIGKILL leaves behind (the node is otherwise kept out of production scheduling).

Each change is one conditional UPDATE (:mod:`andreas.store.nodes`, the transition table),
so it races safely with the manager's own marks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from andreas.cli.common import db_errors
from andreas.config import load_settings
from andreas.errors import InputError
from andreas.store.opener import open_store
from andreas.store.models import NodeState
from andreas.store.nodes import Db, UnknownNode, operator_move, set_profiling_by_name

T = TypeVar("T")


@click.group("node")
def node_group() -> None:
    """An operator's actions on one node: drain it before maintenance, resume it, clear a
    stale profiling mark. `andreas nodes` lists them."""


def _on_store(action: Callable[[Db, str], T], node: str) -> T:
    """``action(session, node)`` in one transaction on the configured store, which is
    closed afterwards; an unknown node is named as the NODE argument."""
    store = open_store(settings=load_settings(), retries=0)
    try:
        with store.session() as s:
            return action(s, node)
    except UnknownNode as e:
        raise InputError(f"NODE {e.name!r}: no such node (see `andreas nodes`)") from None
    finally:
        store.dispose()


@node_group.command("drain")
@click.argument("node")
@db_errors
def drain_cmd(node: str) -> None:
    """Start nothing new on NODE; its running jobs finish there (not moved, not stopped)."""
    before = _on_store(lambda s, name: operator_move(s, name, NodeState.DRAINING), node)
    if before is NodeState.DRAINING:
        click.echo(f"node {node}: already draining")
    else:
        click.echo(f"node {node}: {before.value} -> draining; running jobs finish there, "
                   "nothing new starts (`andreas node resume` undoes it)")


@node_group.command("resume")
@click.argument("node")
@db_errors
def resume_cmd(node: str) -> None:
    """Put a draining or down NODE back into scheduling (the manager marks it down again
    if its Docker engine does not answer)."""
    before = _on_store(lambda s, name: operator_move(s, name, NodeState.UP), node)
    if before is NodeState.UP:
        click.echo(f"node {node}: already up")
    else:
        click.echo(f"node {node}: {before.value} -> up; planned on from the manager's next tick")


@node_group.command("mark-profiling")
@click.argument("node")
@db_errors
def mark_profiling_cmd(node: str) -> None:
    """Reserve NODE for profiling: the manager plans no production job there and runs
    the first epochs of new applications on it (see `[profiler]` in andreas.toml)."""
    was = _on_store(lambda s, name: set_profiling_by_name(s, name, True), node)
    click.echo(f"node {node}: " + ("already marked profiling" if was else
                                   "marked profiling; new applications are measured here, "
                                   "production jobs running there finish there"))


@node_group.command("unmark-profiling")
@click.argument("node")
@db_errors
def unmark_profiling_cmd(node: str) -> None:
    """Clear NODE's profiling mark (left by a profiler that was killed, or to give a
    profiling node back to production; a `[profiler] nodes` entry marks it again when
    the manager starts)."""
    was = _on_store(lambda s, name: set_profiling_by_name(s, name, False), node)
    click.echo(f"node {node}: " + ("profiling mark cleared; back in production scheduling"
                                   if was else "was not marked profiling; nothing changed"))


def register_node(main: click.Group) -> None:
    main.add_command(node_group)
