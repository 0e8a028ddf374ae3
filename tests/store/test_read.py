"""The read model (store/read.py), attempts and decisions, on SQLite and MariaDB."""

from __future__ import annotations

import pytest

from andreas.store.attempts import end_attempt, note_stop, open_attempt, record_container
from andreas.store.chunks import CHUNK
from andreas.store.decisions import add_decision, decision_refs, latest_decision
from andreas.store.errors import TransitionConflict
from andreas.store.jobs import record
from andreas.store.models import JobState
from andreas.store.read import load_jobs, load_nodes, node_names
from .helpers import add_job, add_node


def test_jobs_by_id_come_with_their_attempts_in_order(store):
    _, node_id, _ = add_node(store, gpus=2)
    job = add_job(store, grace_s=30.0)
    with store.session() as s:
        first = open_attempt(s, job_id=job, attempt=1, node_id=node_id, gpu_ids=[1, 0],
                             decision_id=None)
        open_attempt(s, job_id=job, attempt=2, node_id=node_id, gpu_ids=[0], decision_id=None)
        record_container(s, first, "c1", 10.0)
        note_stop(s, first, 11.0)
        note_stop(s, first, 99.0)                  # the first request is kept
        assert end_attempt(s, first, 12.0, exit_code=143, reason="stopped")
        assert not end_attempt(s, first, 13.0, exit_code=0, reason="again")
        record(s, job, failures=1, reason="why")
    with store.session() as s:
        view = load_jobs(s, ids=[job, "no-such-job"])
    assert list(view) == [job]
    j = view[job]
    assert (j.state, j.grace_s, j.failures, j.reason, j.env) == (
        JobState.QUEUED, 30.0, 1, "why", {"LR": "0.1"})
    assert [a.attempt for a in j.attempts] == [1, 2]
    a = j.attempts[0]
    assert (a.gpu_ids, a.container_id, a.start_s, a.stop_requested_s, a.end_s, a.exit_code,
            a.reason, a.open) == ((1, 0), "c1", 10.0, 11.0, 12.0, 143, "stopped", False)
    assert j.latest.attempt == 2 and j.open_attempts == (j.attempts[1],)


def test_a_taken_attempt_number_is_a_conflict(store):
    _, node_id, _ = add_node(store, gpus=1)
    job = add_job(store)
    with store.session() as s:
        open_attempt(s, job_id=job, attempt=1, node_id=node_id, gpu_ids=[0], decision_id=None)
    with pytest.raises(TransitionConflict, match="attempt 1 exists already"):
        with store.session() as s:
            open_attempt(s, job_id=job, attempt=1, node_id=node_id, gpu_ids=[0],
                         decision_id=None)


def test_many_ids_are_read_in_chunks(store):
    jobs = [add_job(store) for _ in range(3)]
    wanted = jobs + [f"missing-{i}" for i in range(CHUNK + 5)]
    with store.session() as s:
        assert sorted(load_jobs(s, ids=wanted)) == sorted(jobs)


def test_nodes_and_names(store):
    name, node_id, _ = add_node(store, gpus=3)
    with store.session() as s:
        node = load_nodes(s)[name]
        assert node_names(s, [node_id, None, -1]) == {node_id: name}
    assert [g.index for g in node.gpus] == [0, 1, 2] and len(node.usable) == 3
    assert node.uuid_of(1) == f"GPU-{name}-1" and node.index_of(f"GPU-{name}-2") == 2


def test_latest_decision_and_refs(store):
    with store.session() as s:
        one = add_decision(s, t=5.0, trigger="submit" * 10, policy="rg", objective=None,
                           objective_name="energy", seconds=0.1, plan={"assignments": []})
        two = add_decision(s, t=6.0, trigger="period", policy="rg", objective=1.0,
                           objective_name="energy", seconds=0.1, plan={"assignments": []})
    with store.session() as s:
        latest = latest_decision(s)
        refs = decision_refs(s, [one, 10**9])
    assert (latest.id, latest.t_s, latest.trigger, latest.plan) == (
        two, 6.0, "period", {"assignments": []})
    assert list(refs) == [one] and len(refs[one].trigger) == 32
