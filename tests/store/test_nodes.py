"""Node states on both backends: the transition table, machines' conditional moves,
operators' moves and their errors, the profiling flag, the inventory reads."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import select, update

from andreas.errors import InputError
from andreas.store import InvalidTransition, JobAttempt, Node, NodeState
from andreas.store.nodes import (ALLOWED, UnknownNode, allowed, gpu_counts, held_gpu_indexes,
                                 insert_node, last_attempt_ends, list_nodes, move_if, operator_move,
                                 set_profiling, set_profiling_by_name, touch_heartbeat,
                                 usable_gpus)

from .helpers import add_job, add_node, unique

UP, DOWN, DRAINING = NodeState.UP, NodeState.DOWN, NodeState.DRAINING
OFF, WAKING = NodeState.OFF, NodeState.WAKING


def row(store, node_id: int) -> tuple[NodeState, bool]:
    with store.session() as s:
        return tuple(s.execute(select(Node.state, Node.profiling)
                               .where(Node.id == node_id)).one())


def put(store, node_id: int, state: NodeState) -> None:
    with store.session() as s:
        s.execute(update(Node).where(Node.id == node_id).values(state=state))


def test_the_table_lets_a_draining_node_leave_only_by_resume():
    assert ALLOWED[DRAINING] == {UP}
    assert ALLOWED[UP] == {DOWN, DRAINING, OFF} and ALLOWED[DOWN] == {UP, DRAINING}
    assert not any(allowed(s, s) for s in NodeState)


def test_off_and_waking_are_left_neither_by_the_agents_moves_nor_into_down():
    """The agent registers (down -> up) and shuts down (up -> down): a node the manager
    switched off or is waking is in neither, and never goes down (a failure)."""
    assert ALLOWED[OFF] == {WAKING, UP, DRAINING}
    assert ALLOWED[WAKING] == {UP, OFF, DRAINING}
    assert not allowed(DOWN, OFF) and not allowed(DRAINING, OFF)


@pytest.mark.parametrize("state", [OFF, WAKING])
def test_the_agents_moves_leave_an_off_or_waking_node(store, state):
    _, node_id, _ = add_node(store, gpus=1)
    put(store, node_id, state)
    with store.engine.begin() as conn:           # the agent writes through a Connection
        assert move_if(conn, node_id, DOWN, UP) is False     # registration
        assert move_if(conn, node_id, UP, DOWN) is False     # clean shutdown
    assert row(store, node_id)[0] is state


def test_manager_moves_store_when_they_happened(store):
    name, node_id, _ = add_node(store, gpus=1, state=UP)
    with store.session() as s:
        assert move_if(s, node_id, UP, OFF, at_s=123.5) is True
    with store.session() as s:
        assert s.scalar(select(Node.state_changed_s).where(Node.id == node_id)) == 123.5
        assert operator_move(s, name, UP, at_s=200.0) is OFF
        assert s.scalar(select(Node.state_changed_s).where(Node.id == node_id)) == 200.0
        assert move_if(s, node_id, UP, DOWN) is True          # the agent's: no time
        assert s.scalar(select(Node.state_changed_s).where(Node.id == node_id)) == 200.0


def test_last_attempt_ends_per_node(store):
    _, a, _ = add_node(store, gpus=1)
    _, b, _ = add_node(store, gpus=1)
    job = add_job(store, id=unique("j"))
    with store.session() as s:
        s.add_all([JobAttempt(job_id=job, attempt=1, node_id=a, gpu_ids=[0], start_s=1.0,
                              end_s=10.0),
                   JobAttempt(job_id=job, attempt=2, node_id=a, gpu_ids=[0], start_s=11.0,
                              end_s=30.0),
                   JobAttempt(job_id=job, attempt=3, node_id=b, gpu_ids=[0], start_s=31.0)])
    with store.session() as s:
        ends = last_attempt_ends(s)
    assert ends[a] == 30.0 and b not in ends


@pytest.mark.parametrize("old, new", list(itertools.product(NodeState, NodeState)))
def test_move_if_moves_only_allowed_pairs_from_where_the_node_is(store, old, new):
    _, node_id, _ = add_node(store, gpus=1)
    put(store, node_id, old)
    if not allowed(old, new):
        with pytest.raises(InvalidTransition, match=f"cannot go from {old.value} to "
                                                    f"{new.value}"):
            with store.session() as s:
                move_if(s, node_id, old, new)
        assert row(store, node_id)[0] is old
        return
    with store.session() as s:
        assert move_if(s, node_id, old, new) is True
    assert row(store, node_id)[0] is new


def test_move_if_leaves_a_node_that_is_elsewhere(store):
    """A clean agent shutdown (up -> down) does not undo an operator's drain."""
    _, node_id, _ = add_node(store, gpus=1)
    put(store, node_id, DRAINING)
    with store.engine.begin() as conn:           # the agent writes through a Connection
        assert move_if(conn, node_id, UP, DOWN) is False
    assert row(store, node_id)[0] is DRAINING


def test_operator_move_returns_the_state_it_left(store):
    name, node_id, _ = add_node(store, gpus=1)
    put(store, node_id, UP)
    with store.session() as s:
        assert operator_move(s, name, DRAINING) is UP
    with store.session() as s:
        assert operator_move(s, name, DRAINING) is DRAINING       # already there
    with store.session() as s:
        assert operator_move(s, name, UP) is DRAINING
    assert row(store, node_id)[0] is UP


def test_operator_move_refuses_a_move_the_table_forbids(store, monkeypatch):
    import andreas.store.nodes as nodes

    name, node_id, _ = add_node(store, gpus=1)
    put(store, node_id, UP)
    monkeypatch.setitem(nodes.ALLOWED, UP, frozenset({DOWN}))
    with pytest.raises(InputError, match=f"^node '{name}': cannot go from up to draining$"):
        with store.session() as s:
            operator_move(s, name, DRAINING)
    assert row(store, node_id)[0] is UP


def test_an_unknown_node_is_named(store):
    for action in (lambda s: operator_move(s, "nope", UP),
                   lambda s: set_profiling_by_name(s, "nope", True)):
        with pytest.raises(UnknownNode, match="^node 'nope': no such node") as err:
            with store.session() as s:
                action(s)
        assert err.value.name == "nope" and isinstance(err.value, InputError)


def test_profiling_flag_by_id_and_by_name(store):
    a, a_id, _ = add_node(store, gpus=1)
    _, b_id, _ = add_node(store, gpus=1)
    put(store, a_id, UP)
    put(store, b_id, UP)
    with store.session() as s:
        set_profiling(s, [a_id, b_id], True)
        set_profiling(s, [], False)                             # nothing to do
    assert row(store, a_id) == (UP, True) and row(store, b_id) == (UP, True)
    with store.session() as s:
        assert set_profiling_by_name(s, a, False) is True
    with store.session() as s:
        assert set_profiling_by_name(s, a, False) is False
    assert row(store, a_id) == (UP, False) and row(store, b_id) == (UP, True)


def test_a_new_node_is_up_and_its_heartbeat_leaves_the_state(store):
    name = unique("new")
    with store.session() as s:
        node_id = insert_node(s, name=name, docker_endpoint="unix:///var/run/docker.sock",
                              gpu_type="A100", gpu_count=4)
    put(store, node_id, DRAINING)
    with store.session() as s:
        touch_heartbeat(s, node_id, 123.5)
    with store.session() as s:
        got = s.execute(select(Node.state, Node.last_heartbeat_s)
                        .where(Node.id == node_id)).one()
        info = {n.name: n for n in list_nodes(s)}[name]
    assert tuple(got) == (DRAINING, 123.5)
    assert (info.id, info.gpu_type, info.gpu_count, info.profiling) == (node_id, "A100", 4,
                                                                        False)


def test_inventory_reads(store):
    from andreas.store import Gpu

    _, node_id, gpu_ids = add_node(store, gpus=4)
    job = add_job(store)
    with store.session() as s:
        s.execute(update(Gpu).where(Gpu.id == gpu_ids[2]).values(healthy=False))
        s.execute(update(Gpu).where(Gpu.id == gpu_ids[3]).values(index=-gpu_ids[3]))  # gone
        s.add(JobAttempt(job_id=job, attempt=1, node_id=node_id, gpu_ids=[1],
                         start_s=0.0, end_s=5.0))                # ended: holds nothing
        s.add(JobAttempt(job_id=job, attempt=2, node_id=node_id, gpu_ids=[0, 2],
                         start_s=6.0, end_s=None))
    with store.session() as s:
        assert held_gpu_indexes(s, node_id) == {0, 2}
        assert [i for i, _ in usable_gpus(s, node_id) if i >= 0] == [0, 1]
        assert gpu_counts(s)[node_id] == 3
