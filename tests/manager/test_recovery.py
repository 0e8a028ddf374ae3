"""Failures, retries, bad images, unreachable nodes and a manager that restarts: adopt,
orphans, vanished containers, a crash between the attempt's transaction and the start."""

from __future__ import annotations

from sqlalchemy import update

from andreas.store import Decision, JobAttempt, JobState, Node, NodeState, transition
from tests.manager.helpers import (add_job, add_node, attempts, check_capacity, dump, job,
                                   make, node_state, state_of)
from tests.manager.test_flows import set_target


def test_failures_are_retried_from_the_checkpoint_then_the_job_fails(mstore):
    add_node(mstore, "a", gpus=1)
    add_job(mstore, "j")
    m, ex, clock = make(mstore, max_retries=2)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    for n in (1, 2):
        ex.exit("j", 1, log="loading data\nTraceback (most recent call last):\nValueError: bad")
        report = m.tick()                 # failure recorded, retried at once (same target)
        assert "failed" in report.triggers
        assert job(mstore, "j").failures == n
        assert state_of(mstore, "j") is JobState.RUNNING
        assert attempts(mstore, "j")[-2].reason.startswith("exit 1: loading data | Traceback")
    assert ex.find("j").request.restart_count == 2
    ex.exit("j", 1, log="ValueError: bad")
    m.tick()
    j = job(mstore, "j")
    assert j.state is JobState.FAILED and j.failures == 3
    assert j.reason == "exit 1: ValueError: bad"
    m.tick()
    assert len(attempts(mstore, "j")) == 3             # never started again


def test_out_of_memory_kill_is_a_failure_not_a_preemption(mstore):
    add_node(mstore, "a", gpus=1)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    ex.exit("j", 137, oom=True)
    m.tick()
    assert job(mstore, "j").failures == 1
    assert attempts(mstore, "j")[0].reason.startswith("exit 137 (out of memory)")


def test_missing_or_forbidden_image_fails_the_job_with_the_reason(mstore):
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "missing", image="nope:1")
    add_job(mstore, "forbidden", image="evil:1")
    m, ex, clock = make(mstore)
    ex.missing_images.add("nope:1")
    ex.forbidden_images.add("evil:1")
    set_target(m, {"missing": ("a", 1), "forbidden": ("a", 1)})
    m.tick()
    for job_id, text in (("missing", "not found"), ("forbidden", "allowlist")):
        j = job(mstore, job_id)
        assert j.state is JobState.FAILED and text in j.reason
        (a,) = attempts(mstore, job_id)
        assert a.end_s is not None and text in a.reason
    check_capacity(mstore, ex)


def test_a_pull_that_may_pass_keeps_the_job_waiting_then_fails_it_after_the_grace(mstore):
    """Registry down: no attempt, no failure counted, the job waits; once
    image_pull_grace_s has passed it fails with the reason. A pull that recovers in time
    starts the job."""
    add_node(mstore, "a", gpus=2)
    add_job(mstore, "stuck", image="reg/stuck:1")
    add_job(mstore, "late", image="reg/late:1")
    m, ex, clock = make(mstore, image_pull_grace_s=600.0)
    ex.pull_failing |= {"reg/stuck:1", "reg/late:1"}
    set_target(m, {"stuck": ("a", 1), "late": ("a", 1)})
    m.tick()
    clock.advance(300.0)
    m.tick()
    for job_id in ("stuck", "late"):
        j = job(mstore, job_id)
        assert j.state is JobState.QUEUED and j.failures == 0 and attempts(mstore, job_id) == []
    ex.pull_failing.discard("reg/late:1")              # the registry answers again
    m.tick()
    assert state_of(mstore, "late") is JobState.RUNNING
    clock.advance(301.0)
    m.tick()
    j = job(mstore, "stuck")
    assert j.state is JobState.FAILED and attempts(mstore, "stuck") == []
    assert j.reason.startswith("image not available for 600 s") and "no such host" in j.reason
    check_capacity(mstore, ex)


def test_unreachable_node_preempts_its_jobs_which_are_replanned_elsewhere(mstore):
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "b", gpus=2)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 2)})
    m.tick()
    ex.unreachable.add("a")
    report = m.tick()
    assert "node-down" in report.triggers and report.decision_id is not None
    assert node_state(mstore, "a") is NodeState.DOWN
    (a1, *rest) = attempts(mstore, "j")
    assert a1.reason == "node unreachable" and a1.end_s is not None
    assert m.target.assignments["j"].node == "b"           # the new decision
    # Fenced: its copy on "a" may still be stopping (the engine's shutdown, or the agent's
    # fence); it starts on "b" after its grace + the agents' fence_after_s + 5 s.
    hold_s = job(mstore, "j").grace_s + m.reconciler.settings.manager.fence_after_s
    assert m.reconciler.settings.manager.fence_after_s == 60.0
    assert state_of(mstore, "j") is JobState.PREEMPTED and rest == []
    clock.advance(hold_s + 4.0)
    m.tick()
    assert state_of(mstore, "j") is JobState.PREEMPTED and attempts(mstore, "j")[1:] == []
    clock.advance(1.5)
    m.tick()
    rest = attempts(mstore, "j")[1:]
    assert state_of(mstore, "j") is JobState.RUNNING and rest and ex.node_of(ex.find("j", 2)) == "b"
    calls = len(ex.calls_of("containers"))
    m.tick()                                   # a down node is probed, not polled every tick
    assert node_state(mstore, "a") is NodeState.DOWN
    # back: marked up, rescheduled; its stale container (attempt 1) is stopped
    ex.unreachable.discard("a")
    m.reconciler.observer.probe_backoff_s = 0.0
    m.reconciler.observer.probe_after.clear()
    report = m.tick()
    assert "node-up" in report.triggers and node_state(mstore, "a") is NodeState.UP
    assert len(ex.calls_of("containers")) > calls
    m.tick()
    assert ex.find("j", 1).running is False and "SIGTERM" in ex.find("j", 1).signals
    check_capacity(mstore, ex)


def test_restarted_manager_adopts_running_containers_and_changes_nothing(mstore):
    add_node(mstore, "a", gpus=4)
    for i in range(3):
        add_job(mstore, f"j{i}")
    m, ex, clock = make(mstore)
    m.start()
    before, calls = dump(mstore), len(ex.actions())
    m.close()
    m2, _, _ = make(mstore, clock=clock, executor=ex)
    m2.start()
    m2.tick()
    jobs_before, attempts_before, _ = before
    jobs_after, attempts_after, _ = dump(mstore)
    assert attempts_after == attempts_before          # same containers, nothing restarted
    assert [j[:2] for j in jobs_after] == [j[:2] for j in jobs_before]
    assert ex.actions()[calls:] == []


def test_container_id_missing_is_adopted(mstore):
    add_node(mstore, "a", gpus=1)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    with mstore.session() as s:
        s.execute(update(JobAttempt).values(container_id=None))
    m.tick()
    assert attempts(mstore, "j")[0].container_id == ex.find("j").id


def test_crash_between_transaction_and_start_is_repaired(mstore):
    """The attempt row and the running state were committed, the container never started."""
    node_id = add_node(mstore, "a", gpus=1)
    add_job(mstore, "j")
    with mstore.session() as s:
        s.add(JobAttempt(job_id="j", attempt=1, node_id=node_id, gpu_ids=[0]))
        s.flush()
        transition(s, "j", JobState.RUNNING)
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()             # attempt 1 closed as never started; the job is preempted...
    a1 = attempts(mstore, "j")[0]
    assert a1.reason == "container never started" and a1.end_s is not None
    assert job(mstore, "j").failures == 0
    m.tick()             # ...and started again as attempt 2 on its target
    assert state_of(mstore, "j") is JobState.RUNNING
    assert [a.attempt for a in attempts(mstore, "j")] == [1, 2] and ex.find("j", 2).running


def test_vanished_container_preempts_the_job(mstore):
    add_node(mstore, "a", gpus=1)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    ex.nodes["a"].clear()                      # someone ran `docker rm -f`
    m.tick()
    a1 = attempts(mstore, "j")[0]
    assert a1.reason == "container vanished"
    m.tick()
    assert state_of(mstore, "j") is JobState.RUNNING and ex.find("j", 2).running


def test_orphans_are_stopped_and_old_attempts_removed(mstore):
    add_node(mstore, "a", gpus=4)
    add_job(mstore, "done", state=JobState.QUEUED)
    m, ex, clock = make(mstore)
    set_target(m, {"done": ("a", 1)})
    m.tick()
    ex.exit("done", 0)
    m.tick()
    unknown = ex.add("a", "ghost", 1, gpu_uuids=("GPU-fake-a-3",))
    finished_old = ex.add("a", "done", 0, running=False, exit_code=143)  # an older attempt
    ex.sigterm_exit = None
    m.tick()
    assert unknown.signals == ["SIGTERM"]
    assert finished_old.id not in ex.nodes["a"]                   # removed
    assert ex.find("done", 1) is not None                         # the latest is kept
    clock.advance(31)                                             # executor stop_grace_s
    m.tick()
    assert unknown.signals == ["SIGTERM", "SIGKILL"]


def test_exited_containers_go_after_keep_exited_s_and_their_log_stays_in_the_store(mstore):
    """Retention on the nodes: the latest attempt's container stays keep_exited_s (3600 s
    by default) after it ended, then the end of its log goes to the store and it is
    removed; a superseded attempt's container goes at once, its log kept too."""
    from andreas.manager.stopping import kept_log
    from andreas.store.attempts import stored_log

    add_node(mstore, "a", gpus=2)
    add_job(mstore, "done")
    m, ex, clock = make(mstore)
    assert m.reconciler.settings.executor.keep_exited_s == 3600.0
    set_target(m, {"done": ("a", 1)})
    m.tick()
    ex.exit("done", 1, log="epoch 1\nTraceback\nValueError: bad")   # a failure: retried
    m.tick()
    m.tick()                                             # the next observation sees it
    first, second = attempts(mstore, "done")
    assert ex.find("done", 1) is None                    # superseded: removed at once ...
    with mstore.session() as s:                          # ... its log kept
        assert stored_log(s, first.id) == ("epoch 1\nTraceback\nValueError: bad\n", clock())
        assert stored_log(s, second.id) is None
    ex.exit("done", 0, log="epoch 10 done")
    m.tick()
    assert state_of(mstore, "done") is JobState.COMPLETED
    kept = ex.find("done", 2)
    clock.advance(3599.0)
    m.tick()
    assert ex.find("done", 2) is kept                    # not yet
    clock.advance(1.0)
    m.tick()
    assert ex.find("done", 2) is None and ("remove", "a", kept.id) in ex.calls
    with mstore.session() as s:
        assert stored_log(s, second.id) == ("epoch 10 done\n", clock())
    # a log over 64 KiB keeps its end, cut at a line start
    big = b"".join(b"line %06d\n" % i for i in range(10_000))
    text = kept_log(big)
    assert len(text.encode()) <= 64 * 1024 and text.startswith("line ")
    assert text.endswith("line 009999\n") and len(text) == 64 * 1024 - 64 * 1024 % 12


def test_profiling_node_containers_are_left_alone(mstore):
    add_node(mstore, "p", gpus=1, profiling=True)
    add_node(mstore, "a", gpus=1)
    m, ex, clock = make(mstore)
    probe = ex.add("p", "profile-run", 1)
    m.start()
    m.tick()
    assert probe.running and probe.signals == []


def test_cancelled_job_container_is_stopped(mstore):
    add_node(mstore, "a", gpus=1)
    add_job(mstore, "j", grace_s=20.0)
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    ex.sigterm_exit = None
    with mstore.session() as s:
        transition(s, "j", JobState.CANCELLED)
    m.tick()
    assert ex.find("j").signals == ["SIGTERM"]
    assert attempts(mstore, "j")[0].stop_requested_s == clock()
    clock.advance(21)
    m.tick()
    assert ex.find("j").signals == ["SIGTERM", "SIGKILL"]
    m.tick()
    a = attempts(mstore, "j")[0]
    assert a.end_s is not None and a.exit_code == 137
    assert state_of(mstore, "j") is JobState.CANCELLED


def test_draining_node_keeps_its_jobs_but_gets_no_new_ones(mstore):
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "b", gpus=2)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 2)})
    m.tick()
    with mstore.session() as s:
        s.execute(update(Node).where(Node.name == "a").values(state=NodeState.DRAINING))
    add_job(mstore, "k")
    report = m.tick()
    assert "node-down" in report.triggers
    with mstore.session() as s:
        plan = s.get(Decision, report.decision_id).plan
    assert plan["pinned"] == ["j"] and "a" not in plan["nodes"]
    assert ex.find("j", 1).running and ex.find("j", 1).signals == []
    assert ex.node_of(ex.find("k")) == "b"
