"""``andreas node drain|resume|unmark-profiling`` on SQLite and MariaDB, and what the
manager's snapshot makes of a drained node."""

from __future__ import annotations

from sqlalchemy import select, update

from andreas.store.models import Node, NodeState
from tests.jobs.conftest import run_cli
from tests.manager.helpers import add_node
from tests.store.conftest import backend, db_url, emptied, store  # noqa: F401


def state(store, name: str) -> tuple[NodeState, bool]:
    with store.session() as s:
        return s.execute(select(Node.state, Node.profiling).where(Node.name == name)).one()


def test_drain_then_resume(store, db_url):
    emptied(store)
    add_node(store, "gpu1")
    r = run_cli(db_url, "node", "drain", "gpu1")
    assert r.exit_code == 0 and "up -> draining" in r.output
    assert state(store, "gpu1") == (NodeState.DRAINING, False)
    assert "already draining" in run_cli(db_url, "node", "drain", "gpu1").output
    r = run_cli(db_url, "node", "resume", "gpu1")
    assert r.exit_code == 0 and "draining -> up" in r.output
    assert state(store, "gpu1")[0] is NodeState.UP


def test_a_drained_node_is_left_out_of_the_plan(store, db_url):
    from andreas.manager.estimates import Estimator
    from andreas.manager.snapshot import build_snapshot
    from andreas.manager.state import load_state
    from tests.manager.helpers import settings

    emptied(store)
    add_node(store, "gpu1")
    add_node(store, "gpu2")
    assert run_cli(db_url, "node", "drain", "gpu1").exit_code == 0
    cfg = settings().manager
    with store.session() as s:
        snap = build_snapshot(s, load_state(s), Estimator(cfg), cfg, 1e6).snapshot
    assert [n.name for n in snap.nodes] == ["gpu2"]


def test_resume_a_node_the_manager_marked_down(store, db_url):
    emptied(store)
    add_node(store, "gpu1")
    with store.session() as s:
        s.execute(update(Node).where(Node.name == "gpu1").values(state=NodeState.DOWN))
    r = run_cli(db_url, "node", "resume", "gpu1")
    assert r.exit_code == 0 and "down -> up" in r.output


def test_unmark_profiling(store, db_url):
    emptied(store)
    add_node(store, "gpu1")
    with store.session() as s:
        s.execute(update(Node).where(Node.name == "gpu1").values(profiling=True))
    r = run_cli(db_url, "node", "unmark-profiling", "gpu1")
    assert r.exit_code == 0 and "cleared" in r.output
    assert state(store, "gpu1") == (NodeState.UP, False)
    assert "nothing changed" in run_cli(db_url, "node", "unmark-profiling", "gpu1").output


def test_unknown_node_is_one_line_and_exit_2(store, db_url):
    emptied(store)
    for action in ("drain", "resume", "unmark-profiling"):
        r = run_cli(db_url, "node", action, "nope")
        assert r.exit_code == 2
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and "NODE 'nope'" in lines[0] and "no such node" in lines[0]
