"""Random sequences of submissions, exits, cancellations, node failures and policies:
no node is ever over capacity and the store stays consistent, after every tick."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from sqlalchemy import select, update

from andreas.store import Job, JobAttempt, JobState, Node, NodeState, transition
from andreas.store.jobs import TERMINAL
from tests.manager.helpers import add_job, add_node, check_capacity, make

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

POLICIES = ("greedy", "rg", "pr", "fifo", "edf", "priority")


def check_consistent(store, ex) -> None:
    check_capacity(store, ex)
    with store.session() as s:
        jobs = {j.id: j.state for j in s.scalars(select(Job))}
        open_attempts = Counter(j for (j,) in s.execute(
            select(JobAttempt.job_id).where(JobAttempt.end_s.is_(None))))
    for job_id, state in jobs.items():
        if state in (JobState.RUNNING, JobState.PREEMPTING):
            assert open_attempts[job_id] == 1, (job_id, state)
        elif state not in TERMINAL:
            assert open_attempts[job_id] == 0, (job_id, state)
        else:
            assert open_attempts[job_id] <= 1
    reachable = [n for n in ex.nodes if n not in ex.unreachable]
    per_job = Counter(c.job_id for n in reachable for c in ex.running(n))
    assert all(v == 1 for v in per_job.values()), per_job


@pytest.mark.parametrize("seed", range(4))
def test_random_sequences_keep_capacity_and_consistency(mstore, seed):
    rng = random.Random(seed)
    add_node(mstore, "n1", gpus=2)
    add_node(mstore, "n2", gpus=4)
    add_node(mstore, "n3", gpus=1, gpu_type="T4", unhealthy=())
    m, ex, clock = make(mstore, max_retries=1, policy=POLICIES[seed % len(POLICIES)])
    m.start()
    jobs = 0
    for _ in range(60):
        event = rng.random()
        if event < 0.3:
            jobs += 1
            add_job(mstore, f"j{jobs}", epochs=rng.randint(1, 20),
                    due_s=clock() + rng.uniform(600, 40_000), weight=rng.choice([1.0, 2.0]),
                    max_gpus=rng.choice([None, 1, 2]), submit_s=clock(),
                    application=rng.choice(["resnet50", "vgg19", "mystery-app"]))
        elif event < 0.55 and ex.running():
            c = rng.choice(ex.running())
            ex.exit(c.job_id, rng.choice([0, 0, 1, 143, 137]))
        elif event < 0.62:
            name = rng.choice(["n1", "n2", "n3"])
            (ex.unreachable.symmetric_difference_update({name}))
        elif event < 0.67:
            with mstore.session() as s:
                ids = [j for (j,) in s.execute(select(Job.id).where(
                    Job.state.in_([JobState.QUEUED, JobState.RUNNING, JobState.PREEMPTED])))]
                if ids:
                    transition(s, rng.choice(ids), JobState.CANCELLED)
        elif event < 0.72:
            with mstore.session() as s:
                s.execute(update(Node).where(Node.name == rng.choice(["n1", "n2", "n3"]))
                          .values(state=rng.choice([NodeState.UP, NodeState.DRAINING])))
        elif event < 0.8:
            ex.sigterm_exit = rng.choice([None, 143])
        elif event < 0.85:
            m.request("period")
        clock.advance(rng.choice([1, 5, 30, 120]))
        m.tick()
        check_consistent(mstore, ex)
    ex.unreachable.clear()
    ex.sigterm_exit = 143
    for _ in range(5):
        clock.advance(120)
        m.tick()
        check_consistent(mstore, ex)
    with mstore.session() as s:
        states = Counter(j.state for j in s.scalars(select(Job)))
    assert sum(states.values()) == jobs
