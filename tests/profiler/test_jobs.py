"""Profiling containers have ``jobs`` rows (completed from the start, weight 0, no attempt),
on SQLite and MariaDB: the agents' epoch events and job energy for them pass the foreign
key, and the manager's snapshot never sees them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from andreas.job import valid_job_id
from andreas.manager.estimates import Estimator
from andreas.manager.snapshot import build_snapshot
from andreas.manager.state import load_state
from andreas.profiler.nodes import profile_job_id
from andreas.profiler.run import (GRACE_S, JOB_REASON, ProfileRequest, profile_application)
from andreas.store import (Job, JobAttempt, JobEnergyRow, JobState, insert_epoch_events,
                           insert_job_energy)
from tests.manager.helpers import add_job, add_node, settings
from tests.profiler.fakes import ScriptedExecutor
from tests.profiler.test_run import amdahl

NOW = 1_800_000_000.0


def profile(store, executor, *, clock=None, **kw):
    ticks = itertools.count(NOW, 10.0)
    request = ProfileRequest(image="registry.example/new:1", app="newapp",
                             command=("python", "-u", "train.py"), env={"SECRET": "x"},
                             **{"epochs": 3, "nodes": ("p",), **kw})
    return profile_application(store, executor, request,
                               clock=clock or (lambda: next(ticks)),
                               rng=np.random.default_rng(7))


def job_rows(store) -> dict[str, Job]:
    with store.session() as s:
        rows = {j.id: j for j in s.scalars(select(Job).where(Job.id.like("profile-%")))}
        s.expunge_all()
    return rows


def test_each_container_has_a_completed_job_row_written_before_it_starts(pstore):
    add_node(pstore, "p", gpus=4)
    before_start = []

    def on_start(node, req):
        with pstore.session() as s:
            j = s.get(Job, req.job_id)
            before_start.append(None if j is None else (j.state, j.epochs_done))

    fake = ScriptedExecutor(amdahl, behaviour={2: "fail", 3: "hang", 4: "silent"},
                            on_start=on_start)
    [result] = profile(pstore, fake, timeout_s=0.3)
    assert before_start == [(JobState.COMPLETED, 0)] * 4
    got = job_rows(pstore)
    assert sorted(got) == sorted(r.job_id for r in result.runs)
    assert sorted(got) == sorted(q.job_id for q in fake.requests)
    done = {1: 3, 2: 1, 3: 1, 4: 0}                          # epochs measured per g
    for r in result.runs:
        j = got[r.job_id]
        assert (j.state, j.weight, j.reason) == (JobState.COMPLETED, 0.0, JOB_REASON)
        assert (j.application, j.image, j.command, j.env) == (
            "newapp", "registry.example/new:1", ["python", "-u", "train.py"], {})
        assert (j.epochs, j.epochs_done, j.max_gpus, j.grace_s) == (3, done[r.g], r.g,
                                                                      GRACE_S)
        assert j.submit_s == j.due_s and j.submit_s >= NOW
        assert j.state_changed_s > j.submit_s                # updated when the run ended
        assert j.failures == 0 and j.predicted_cost is None
    with pstore.session() as s:
        assert s.scalars(select(JobAttempt)).all() == []     # no attempt: never adopted


def test_skipped_g_gets_no_row_and_interrupted_runs_keep_theirs(pstore):
    node_id = add_node(pstore, "p", gpus=2)
    add_job(pstore, "pinned")
    with pstore.session() as s:
        s.add(JobAttempt(job_id="pinned", attempt=1, node_id=node_id, gpu_ids=[0],
                         start_s=NOW - 60))
    [result] = profile(pstore, ScriptedExecutor(amdahl))
    assert [r.status for r in result.runs] == ["ok", "skipped"]
    assert set(job_rows(pstore)) == {result.runs[0].job_id}

    fake = ScriptedExecutor(amdahl, behaviour={1: "hang"})

    def ctrl_c(event):
        if event.kind == "epoch":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        profile_application(pstore, fake, ProfileRequest(image="i", app="other", nodes=("p",),
                                                         gpus=(1,)),
                            on_event=ctrl_c, rng=np.random.default_rng(0),
                            clock=iter([NOW, NOW + 5]).__next__)
    [req] = fake.requests
    j = job_rows(pstore)[req.job_id]
    assert (j.state, j.epochs_done, j.submit_s, j.state_changed_s) == (
        JobState.COMPLETED, 0, NOW, NOW + 5)


def test_agent_records_for_profiling_jobs_pass_the_foreign_key(pstore):
    node_id = add_node(pstore, "p", gpus=2)
    [result] = profile(pstore, ScriptedExecutor(amdahl), gpus=(2,))
    job_id = result.runs[0].job_id
    events = [dict(job_id=job_id, attempt=1, epoch=e, start_s=NOW + 60 * e,
                   end_s=NOW + 60 * e + 50, node_id=node_id, gpu_type="V100", gpus=2)
              for e in (1, 2, 3)]
    with pstore.session() as s:                              # as agents/store_writer.py does
        assert insert_epoch_events(s, events, skip_duplicates=True) == 3
        assert insert_job_energy(s, [JobEnergyRow(job_id, 1, NOW + 60, node_id, 60.0, 2,
                                                  30_000, 5_000)],
                                 skip_duplicates=True) == 1
    with pytest.raises(IntegrityError):                      # the key is enforced here
        with pstore.session() as s:
            insert_epoch_events(s, [dict(events[0], job_id="profile-unknown-p-g2-000000")],
                                skip_duplicates=True)


def test_the_manager_snapshot_leaves_profiling_jobs_out(pstore):
    add_node(pstore, "p", gpus=2)
    [result] = profile(pstore, ScriptedExecutor(amdahl))
    add_job(pstore, "prod", application="newapp")            # the control: planned
    cfg = settings().manager
    with pstore.session() as s:
        state = load_state(s)
        build = build_snapshot(s, state, Estimator(cfg), cfg, NOW + 100)
    profiling = {r.job_id for r in result.runs}
    assert profiling and not profiling & set(state.jobs)
    assert [j.id for j in build.snapshot.jobs] == ["prod"]
    assert not profiling & set(build.pinned + build.unrunnable)


@pytest.mark.parametrize("app, node, g", [
    ("a" * 128, "n" * 128, 1), ("x.y+z_" * 20, "node.with-dots" * 9, 1024),
    ("+", "-", 7), ("newapp", "p", 1)])
def test_generated_ids_are_valid_job_ids(app, node, g):
    rng = np.random.default_rng(0)
    for _ in range(20):
        job_id = profile_job_id(app, node, g, rng)
        assert valid_job_id(job_id) and len(job_id) <= 64
        assert job_id.startswith("profile-") and f"-g{g}-" in job_id


def test_long_image_is_an_input_error(pstore):
    from andreas.errors import InputError

    add_node(pstore, "p", gpus=1)
    with pytest.raises(InputError, match="^image: at most 512"):
        profile_application(pstore, ScriptedExecutor(amdahl),
                            ProfileRequest(image="r/" + "x" * 600, app="a", nodes=("p",)))
