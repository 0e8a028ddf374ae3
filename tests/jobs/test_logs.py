"""`andreas logs`: the attempt's node and container come from the store; the output is the
executor's (a fake, passed through the click context object); errors are one line."""

from __future__ import annotations

import pytest

from andreas.store.models import JobAttempt, JobState
from andreas.service.views import log_source
from andreas.errors import InputError
from tests.jobs.conftest import FakeExecutor, run_cli
from tests.store.helpers import add_job, add_node, unique


@pytest.fixture(scope="module")
def job(store):
    """A job with attempt 1 (ended, container c-1) and attempt 2 (running, container c-2)
    on one node, and attempt 3 that never got a container."""
    name, node_id, _ = add_node(store, gpus=2)
    job_id = add_job(store, id=unique("logs"), state=JobState.RUNNING)
    with store.session() as s:
        s.add_all([
            JobAttempt(job_id=job_id, attempt=1, node_id=node_id, gpu_ids=[0],
                       container_id="c-1", start_s=1.0, end_s=2.0, exit_code=143),
            JobAttempt(job_id=job_id, attempt=2, node_id=node_id, gpu_ids=[0, 1],
                       container_id="c-2", start_s=3.0)])
    return job_id, name


def test_latest_attempt_by_default(db_url, job):
    job_id, node = job
    fake = FakeExecutor()
    seen = []

    def factory(settings):
        seen.append(settings)
        return fake

    r = run_cli(db_url, "logs", job_id, executor_factory=factory)
    assert r.exit_code == 0, r.output
    assert r.stdout == "epoch 1\nepoch 2\n"
    assert fake.log_calls == [(node, f"ssh://{node}", "c-2", False, None)]
    assert fake.closed
    assert seen[0].db_url == db_url          # the executor gets the configured settings


def test_attempt_follow_and_tail(db_url, job):
    job_id, node = job
    fake = FakeExecutor(chunks=(b"\xffbinary ok\n",))
    r = run_cli(db_url, "logs", job_id, "--attempt", "1", "-f", "--tail", "5",
                executor_factory=lambda settings: fake)
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == b"\xffbinary ok\n"
    assert fake.log_calls == [(node, f"ssh://{node}", "c-1", True, 5)]


def test_unknown_attempt_lists_the_known_ones(db_url, job):
    job_id, _ = job
    r = run_cli(db_url, "logs", job_id, "--attempt", "7",
                executor_factory=lambda settings: FakeExecutor())
    assert r.exit_code == 2
    assert r.stderr == f"andreas: error: --attempt 7: job {job_id} has attempt(s) 1, 2\n"


def test_node_unreachable_is_one_line(db_url, job):
    job_id, node = job
    fake = FakeExecutor(down=frozenset({node}))
    r = run_cli(db_url, "logs", job_id, executor_factory=lambda settings: fake)
    assert r.exit_code == 2
    assert r.stderr == (f"andreas: error: job {job_id} attempt 2 on node {node}: node {node} "
                        f"(ssh://{node}): engine unreachable (fake)\n")
    assert fake.closed


def test_no_container_and_not_started(db_url, store, job):
    job_id, _ = job
    with store.session() as s:
        s.add(JobAttempt(job_id=job_id, attempt=3, node_id=None, gpu_ids=[],
                         reason="image not found"))
    r = run_cli(db_url, "logs", job_id, executor_factory=lambda settings: FakeExecutor())
    assert r.exit_code == 2
    assert r.stderr == (f"andreas: error: job {job_id} attempt 3: no container was created "
                        "(image not found)\n")
    queued = add_job(store, id=unique("q"))
    r = run_cli(db_url, "logs", queued, executor_factory=lambda settings: FakeExecutor())
    assert r.exit_code == 2
    assert r.stderr == f"andreas: error: job {queued}: has not started yet (queued); no logs\n"


def test_log_source_library(store, job):
    job_id, node = job
    src = log_source(store, job_id, 1)
    assert (src.job_id, src.attempt, src.node.name, src.container_id, src.live) == (
        job_id, 1, node, "c-1", False)
    with pytest.raises(InputError, match="no such job"):
        log_source(store, "nope")


def test_removed_container_prints_the_kept_log_from_the_store(db_url, store):
    """Retention removed the container: the end of its log comes from the store, with a
    note on stderr; the engine is not asked."""
    from andreas.store.attempts import save_log_tail

    name, node_id, _ = add_node(store, gpus=1)
    job_id = add_job(store, id=unique("kept"), state=JobState.COMPLETED)
    with store.session() as s:
        row = JobAttempt(job_id=job_id, attempt=1, node_id=node_id, gpu_ids=[0],
                         container_id="c-gone", start_s=1.0, end_s=2.0, exit_code=0)
        s.add(row)
        s.flush()
        save_log_tail(s, row.id, "epoch 1\nepoch 2\ndone\n", 1_790_000_000.0)
    fake = FakeExecutor()
    r = run_cli(db_url, "logs", job_id, executor_factory=lambda settings: fake)
    assert r.exit_code == 0, r.output
    assert r.stdout == "epoch 1\nepoch 2\ndone\n"
    assert r.stderr == (f"andreas: job {job_id} attempt 1: its container was removed on "
                        "2026-09-21 14:13Z (retention); the end of its log, kept in the "
                        "store:\n")
    assert fake.log_calls == []
    r = run_cli(db_url, "logs", job_id, "--tail", "2", executor_factory=lambda settings: fake)
    assert r.stdout == "epoch 2\ndone\n"
    r = run_cli(db_url, "logs", job_id, "--tail", "0", executor_factory=lambda settings: fake)
    assert r.exit_code == 0 and r.stdout == ""
    src = log_source(store, job_id)
    assert (src.kept, src.kept_s) == ("epoch 1\nepoch 2\ndone\n", 1_790_000_000.0)
