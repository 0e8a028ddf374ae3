"""A copy that ran on after the manager ended its attempt blind (its node's engine did
not answer): once the engine answers again it is reported (a warning, the attempt's exit
code and reason) and its container is kept ``keep_exited_s`` so the node's agent can
read the epochs it logged meanwhile; an ordinary superseded container goes at once."""

from __future__ import annotations

import logging

from tests.manager.helpers import add_job, add_node, attempts, make
from tests.manager.test_flows import set_target


def test_a_copy_that_ran_on_is_reported_and_kept_for_its_epochs(mstore, caplog):
    caplog.set_level(logging.INFO, logger="andreas.manager")
    add_node(mstore, "a", gpus=1)
    add_node(mstore, "b", gpus=1)
    add_job(mstore, "j", grace_s=5.0)
    m, ex, clock = make(mstore, fence_after_s=0.0)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    ex.unreachable.add("a")                      # the engine crashed; the job runs on
    m.tick()
    (a1,) = attempts(mstore, "j")
    assert a1.reason == "node unreachable" and a1.exit_code is None
    clock.advance(11.0)                          # past the hold: restarted on b
    set_target(m, {"j": ("b", 1)})
    m.tick()
    assert ex.find("j", 2) is not None and ex.node_of(ex.find("j", 2)) == "b"
    clock.advance(3.0)
    old = ex.find("j", 1)                        # the fence stopped it, late:
    old.running, old.exit_code = False, 143      # 9 s after the manager ended it
    old.finished_s = a1.end_s + 9.0
    ex.unreachable.discard("a")
    m.reconciler.observer.probe_after.clear()
    m.tick()                                     # a answers again: marked up
    m.tick()
    a1 = attempts(mstore, "j")[0]
    assert a1.exit_code == 143
    assert a1.reason == "node unreachable; ran on 9 s after (exit 143)"
    assert ex.find("j", 1) is not None           # kept: the agent reads its epochs
    warned = [r.getMessage() for r in caplog.records if "ran on" in r.getMessage()]
    assert len(warned) == 1 and "job=j attempt=1 node=a ran on for 9 s" in warned[0]
    m.tick()
    assert len([r for r in caplog.records if "ran on for" in r.getMessage()]) == 1
    clock.advance(m.settings.executor.keep_exited_s + 1)
    m.tick()
    assert ex.find("j", 1) is None               # removed after keep_exited_s, log kept
    assert attempts(mstore, "j")[0].log_saved_s is not None


def test_a_superseded_container_that_stopped_in_time_is_removed_at_once(mstore):
    add_node(mstore, "a", gpus=1)
    add_job(mstore, "j")
    m, ex, clock = make(mstore)
    set_target(m, {"j": ("a", 1)})
    m.tick()
    ex.exit("j", 1)                              # a failure: retried as attempt 2
    m.tick()
    assert ex.find("j", 2) is not None
    m.tick()
    assert all(c.attempt == 2 for c in ex.nodes["a"].values())
    assert attempts(mstore, "j")[0].exit_code == 1
