"""The power-down on both backends: idle empty nodes switched off by a fake command, woken
when a plan places a job on them, a command that fails or hangs leaving the node on (one
line, no secret in it), the reconciler and the snapshot leaving off nodes alone."""

from __future__ import annotations

import dataclasses
import logging
import stat
from pathlib import Path

import numpy as np
import pytest

from andreas.config import PowerSettings
from andreas.manager import Manager
from andreas.manager.power import redact, run_command
from andreas.store import JobAttempt, JobState, NodeState
from tests.manager.fakes import FakeExecutor
from tests.manager.helpers import (Clock, add_job, add_node, attempts, node_state, settings,
                                   state_of)

IDLE_S = 100.0


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def calls(tmp_path) -> Path:
    return tmp_path / "calls.log"


@pytest.fixture
def ok(tmp_path, calls) -> str:
    """A fake power command: writes its arguments and $ANDREAS_NODE to calls.log."""
    return script(tmp_path, "power.sh", f'echo "$* env=$ANDREAS_NODE" >> {calls}')


def manager(store, off, on, *, clock: Clock | None = None, timeout_s: float = 10.0,
            nodes: tuple[str, ...] = ()) -> tuple[Manager, FakeExecutor, Clock]:
    clock = clock or Clock()
    ex = FakeExecutor(clock)
    power = PowerSettings(enabled=True, idle_s=IDLE_S, off_command=off, on_command=on,
                          wake_lead_s=30.0, command_timeout_s=timeout_s, nodes=nodes)
    m = Manager(store, ex, dataclasses.replace(settings(), power=power), clock=clock,
                rng=np.random.default_rng(0))
    m.reconciler.observer.probe_backoff_s = 0.0
    m.power.probe_every_s = 0.0
    return m, ex, clock


def lines(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


def test_idle_empty_nodes_go_off_and_one_wakes_for_a_job(mstore, ok, calls, caplog):
    caplog.set_level(logging.INFO, "andreas.manager")
    add_node(mstore, "n1", gpus=2)
    add_node(mstore, "n2", gpus=2)
    m, ex, clock = manager(mstore, [ok, "off", "{node}"], f"{ok} on {{node}}")
    m.start()
    clock.advance(IDLE_S - 1)
    m.tick()
    assert lines(calls) == []                     # idle, but not for idle_s yet
    assert node_state(mstore, "n1") is NodeState.UP
    clock.advance(2)
    m.tick()
    assert sorted(lines(calls)) == ["off n1 env=n1", "off n2 env=n2"]
    assert node_state(mstore, "n1") is node_state(mstore, "n2") is NodeState.OFF
    assert "node n1: switched off (" + ok in caplog.text
    m.tick()
    assert len(lines(calls)) == 2                 # off stays off: nothing more
    polled = len([c for c in ex.calls if c[0] == "containers"])
    ex.unreachable |= {"n1", "n2"}                # switched off: the engines do not answer
    m.tick()
    assert node_state(mstore, "n1") is NodeState.OFF          # not marked down
    assert len([c for c in ex.calls if c[0] == "containers"]) == polled   # nor polled

    add_job(mstore, "j1")
    clock.advance(5)
    m.tick()                                      # plans on an off node and switches it on
    (woken,) = [ln.split()[1] for ln in lines(calls) if ln.startswith("on ")]
    other = "n2" if woken == "n1" else "n1"
    assert m.target.assignments["j1"].node == woken
    assert node_state(mstore, woken) is NodeState.WAKING
    assert node_state(mstore, other) is NodeState.OFF
    assert state_of(mstore, "j1") is JobState.QUEUED          # nothing starts while waking
    m.tick()
    m.power.wait_probes()
    m.tick()
    assert node_state(mstore, woken) is NodeState.WAKING      # its engine does not answer
    ex.unreachable.discard(woken)                 # booted
    clock.advance(20)
    m.tick()
    m.power.wait_probes()
    m.tick()
    assert node_state(mstore, woken) is NodeState.UP
    m.tick()                                      # replanned with the node up: started
    assert "(node-up" in caplog.text              # by a node-up rescheduling (this tick or
                                                  # the one that saw it up)
    assert state_of(mstore, "j1") is JobState.RUNNING
    (a,) = attempts(mstore, "j1")
    assert ex.node_of(ex.find("j1")) == woken
    assert "woke up" in caplog.text
    clock.advance(IDLE_S * 2)
    m.tick()
    assert node_state(mstore, woken) is NodeState.UP          # busy: never off
    assert sum(ln.startswith("off ") for ln in lines(calls)) == 2


def test_a_node_is_no_longer_watched_when_its_off_command_runs(mstore, ok, calls):
    """Its engine going away is no outage: before the command runs, the manager's event
    watch leaves the node out and has re-read its nodes (found by the end-to-end test:
    each switch-off logged "no container events" for the node)."""
    add_node(mstore, "n1")
    add_node(mstore, "n2")
    m, ex, clock = manager(mstore, [ok, "off", "{node}"], [ok, "on", "{node}"],
                           nodes=("n1",))
    seen: list[tuple[set[str], int]] = []
    runner = m.power.runner

    def watching_runner(argv, **kw):
        seen.append(({r.name for r in m.watched_nodes()}, len(ex.calls_of("rewatch"))))
        return runner(argv, **kw)

    m.power.runner = watching_runner
    m.start()
    assert {r.name for r in m.watched_nodes()} == {"n1", "n2"}
    clock.advance(IDLE_S + 1)
    m.tick()
    assert lines(calls) == ["off n1 env=n1"]
    assert seen == [({"n2"}, 1)]                  # n1 left out, and the watch re-read
    m.tick()
    assert {r.name for r in m.watched_nodes()} == {"n2"}      # off: neither polled nor watched
    assert len(ex.calls_of("rewatch")) == 1       # only when a node is switched off


def test_a_failing_command_leaves_the_node_up_with_one_line_and_no_secret(
        mstore, tmp_path, caplog):
    add_node(mstore, "n1", gpus=1)
    bad = script(tmp_path, "bad.sh", 'echo "login as admin with s3cretpw failed" >&2; exit 3')
    m, ex, clock = manager(mstore, [bad, "-P", "s3cretpw", "{node}"], [bad])
    m.start()
    clock.advance(IDLE_S + 1)
    with caplog.at_level(logging.WARNING, "andreas.manager"):
        m.tick()
    assert node_state(mstore, "n1") is NodeState.UP
    (line,) = [r.getMessage() for r in caplog.records if "could not switch" in r.getMessage()]
    assert "node n1: could not switch it off (" + bad + " exit 3:" in line
    assert "s3cretpw" not in caplog.text and "***" in line
    assert "exit 3" in m.power.trouble["n1"]
    caplog.clear()
    clock.advance(IDLE_S - 1)
    with caplog.at_level(logging.WARNING, "andreas.manager"):
        m.tick()
    assert caplog.records == []                   # not tried again before idle_s
    assert node_state(mstore, "n1") is NodeState.UP


def test_a_hanging_command_is_killed_and_the_node_stays_up(mstore, tmp_path, caplog):
    add_node(mstore, "n1", gpus=1)
    hang = script(tmp_path, "hang.sh", "sleep 30")
    m, ex, clock = manager(mstore, [hang], [hang], timeout_s=0.3)
    m.start()
    clock.advance(IDLE_S + 1)
    with caplog.at_level(logging.WARNING, "andreas.manager"):
        m.tick()
    assert node_state(mstore, "n1") is NodeState.UP
    assert "timed out after 0.3 s (killed)" in caplog.text
    add_job(mstore, "j1")
    m.tick()
    assert state_of(mstore, "j1") is JobState.RUNNING     # the manager goes on as before


def test_a_failing_wake_leaves_the_node_off_and_the_job_waiting(mstore, tmp_path, ok, calls,
                                                                caplog):
    add_node(mstore, "n1", gpus=1, state=NodeState.OFF)
    bad = script(tmp_path, "bad.sh", "exit 1")
    m, ex, clock = manager(mstore, [ok, "off", "{node}"], [bad, "{node}"])
    add_job(mstore, "j1")
    with caplog.at_level(logging.WARNING, "andreas.manager"):
        m.start()
    assert node_state(mstore, "n1") is NodeState.OFF
    assert "node n1: could not switch it on (" + bad + " exit 1); it stays off" in caplog.text
    assert state_of(mstore, "j1") is JobState.QUEUED


def test_a_node_that_does_not_come_up_goes_off_again(mstore, ok, calls, caplog):
    add_node(mstore, "n1", gpus=1, state=NodeState.OFF)
    m, ex, clock = manager(mstore, [ok, "off", "{node}"], [ok, "on", "{node}"])
    ex.unreachable.add("n1")
    add_job(mstore, "j1")
    m.start()
    assert node_state(mstore, "n1") is NodeState.WAKING
    clock.advance(m.power.wake_timeout_s() + 1)
    with caplog.at_level(logging.WARNING, "andreas.manager"):
        m.tick()
    assert node_state(mstore, "n1") is NodeState.OFF
    assert "its engine did not answer within 90 s; off again" in caplog.text
    m.tick()
    assert lines(calls) == ["on n1 env=n1"]       # not retried before idle_s


def test_the_plan_uses_nodes_that_are_on_before_waking_one(mstore, ok, calls):
    add_node(mstore, "n1", gpus=2)
    add_node(mstore, "n2", gpus=2, state=NodeState.OFF)
    m, ex, clock = manager(mstore, [ok, "off", "{node}"], [ok, "on", "{node}"])
    add_job(mstore, "j1", max_gpus=1)
    add_job(mstore, "j2", max_gpus=1)
    m.start()
    assert {c.node for c in m.target.assignments.values()} == {"n1"}
    assert m.target.stats["nodes"] == 1           # the off node was not offered
    assert node_state(mstore, "n2") is NodeState.OFF and lines(calls) == []


def test_idle_time_comes_from_the_store_after_a_restart(mstore, ok, calls):
    node_id = add_node(mstore, "n1", gpus=1)
    add_node(mstore, "n2", gpus=1, state=NodeState.DRAINING)
    add_job(mstore, "j0", state=JobState.COMPLETED)
    clock = Clock()
    with mstore.session() as s:
        s.add(JobAttempt(job_id="j0", attempt=1, node_id=node_id, gpu_ids=[0],
                         start_s=clock() - 500, end_s=clock() - IDLE_S - 1, exit_code=0))
    m, ex, _ = manager(mstore, [ok, "off", "{node}"], [ok, "on", "{node}"], clock=clock)
    m.start()                                     # a new manager: the store says idle
    assert lines(calls) == ["off n1 env=n1"]      # draining nodes are the operator's
    assert node_state(mstore, "n1") is NodeState.OFF


def test_only_the_listed_nodes_are_switched(mstore, ok, calls):
    add_node(mstore, "n1", gpus=1)
    add_node(mstore, "n2", gpus=1)
    m, ex, clock = manager(mstore, [ok, "off", "{node}"], [ok], nodes=("n2",))
    m.start()
    clock.advance(IDLE_S + 1)
    m.tick()
    assert lines(calls) == ["off n2 env=n2"] and node_state(mstore, "n1") is NodeState.UP


def test_disabled_power_switches_nothing(mstore):
    add_node(mstore, "n1", gpus=1)
    clock = Clock()
    m = Manager(mstore, FakeExecutor(clock), settings(), clock=clock,
                rng=np.random.default_rng(0))
    m.start()
    clock.advance(1e6)
    m.tick()
    assert node_state(mstore, "n1") is NodeState.UP


def test_run_command_outcomes(tmp_path):
    ok = script(tmp_path, "ok.sh", "exit 0")
    assert run_command([ok], node="n1", timeout_s=5).ok
    gone = run_command([str(tmp_path / "missing")], node="n1", timeout_s=5)
    assert not gone.ok and gone.why.startswith("cannot run it:")
    assert redact("user admin pw hunter2 on n1", ["ipmi", "hunter2", "n1"], ["n1"]) == \
        "user admin pw *** on n1"


def load(tmp_path: Path, text: str):
    from andreas.config import load_settings
    path = tmp_path / "andreas.toml"
    path.write_text(text)
    return load_settings({"ANDREAS_CONFIG": str(path), "HOME": str(tmp_path)})


def test_power_settings_take_lists_or_strings(tmp_path):
    s = load(tmp_path, '[power]\nenabled = true\noff_command = "ssh {node}-bmc \'power off\'"\n'
                       'on_command = ["wake", "--host", "{node}"]\n')
    assert s.power.argv("off_command", "g1") == ("ssh", "g1-bmc", "power off")
    assert s.power.argv("on_command", "g1") == ("wake", "--host", "g1")


@pytest.mark.parametrize("text, message", [
    ("enabled = true\non_command = ['x']", "[power] off_command: needed when [power] enabled"),
    ("off_command = 'a \"b'\non_command = ['x']", "[power] off_command: cannot split"),
    ("idle_s = 0", "[power] idle_s must be > 0, got 0"),
    ("command_timeout_s = -1", "[power] command_timeout_s must be > 0"),
    ("on_command = ['ok', '']", "[power] on_command must be a list of non-empty strings"),
    ("wake = 1", "[power] unknown key 'wake'"),
])
def test_bad_power_settings_are_one_line(tmp_path, text, message):
    from andreas.errors import InputError
    with pytest.raises(InputError) as e:
        load(tmp_path, "[power]\n" + text + "\n")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_disabling_power_with_nodes_left_off_warns_at_start(mstore, caplog):
    """Nodes switched off while [power] was enabled stay off when it is disabled: the
    manager neither plans on them nor wakes them. It said nothing (issue 34)."""
    add_node(mstore, "a", gpus=2)
    add_node(mstore, "sleepy", gpus=2, state=NodeState.OFF)
    m = Manager(mstore, FakeExecutor(Clock()), settings(), clock=Clock(),
                rng=np.random.default_rng(0))
    with caplog.at_level(logging.WARNING, logger="andreas.manager"):
        m.start()
    [line] = [r.getMessage() for r in caplog.records if "[power] is disabled" in r.getMessage()]
    assert "sleepy" in line and "andreas node resume" in line and "a," not in line
    m.close()
