"""DockerExecutor.watch against the real daemon: labelled containers' start, die and
destroy wake the manager with the node's name, unlabelled ones do not; stop (or close)
ends every thread and closes its connection; an unreachable engine is retried with
back-off, one warning, no exception."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time

import pytest

from andreas.executor import events as docker_executor
from andreas.executor.base import NodeRef
from andreas.executor.docker import DockerExecutor
from tests.manager.helpers import wait_for


def watch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("andreas-events")]


def unix_sockets() -> set[str]:
    """This process's open Unix-domain sockets (inodes), as the Docker clients' connections
    are: not the pipes or TCP sockets that other threads of a pytest worker may open."""
    with open("/proc/net/unix") as f:
        unix = {line.split()[6] for line in f.readlines()[1:]}
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:                              # closed meanwhile
            continue
        if target.startswith("socket:[") and target[8:-1] in unix:
            inodes.add(target[8:-1])
    return inodes


def quiet_replay_window(woken: list[str]) -> None:
    """A new stream replays the engine's last WATCH_REPLAY_S (+1, whole seconds) of
    events, earlier tests' included: let that window pass, then forget those wakes."""
    time.sleep(docker_executor.WATCH_REPLAY_S + 1.2)
    woken.clear()


@pytest.fixture
def thread_errors(monkeypatch) -> list:
    """Exceptions that escaped any thread during the test."""
    seen: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    return seen


def test_labelled_container_events_wake_with_the_node_name(executor, node, request_for,
                                                          new_job, run_container,
                                                          thread_errors):
    woken: list[str] = []
    stop = threading.Event()
    executor.watch(lambda: [node], woken.append, stop)
    try:
        assert wait_for(lambda: executor.watching() == ["local"])
        quiet_replay_window(woken)
        other = run_container("true")                # no andreas label
        other.wait(timeout=30)
        other.remove()
        time.sleep(0.5)
        assert woken == []
        job = new_job()
        cid = executor.start(node, request_for(job, "sleep 30"))
        assert wait_for(lambda: len(woken) >= 1)     # start
        time.sleep(0.3)
        assert woken == ["local"]                    # start only (create is not asked for)
        executor.kill(node, cid)
        assert wait_for(lambda: len(woken) >= 2)     # die
        n = len(woken)
        executor.remove(node, cid)
        assert wait_for(lambda: len(woken) > n)      # destroy
        assert set(woken) == {"local"}
    finally:
        stop.set()
    assert wait_for(lambda: not watch_threads(), 3)
    assert thread_errors == []


def test_stop_and_close_end_the_threads_and_their_connections(settings, node, request_for,
                                                              new_job, monkeypatch,
                                                              thread_errors, caplog):
    monkeypatch.setattr(docker_executor, "WATCH_NODES_S", 0.3)
    monkeypatch.setattr(docker_executor, "WATCH_REFRESH_S", 0.5)   # reopen often
    ex = DockerExecutor(settings)
    gc.collect()
    before = unix_sockets()
    n1 = NodeRef(name="n1", docker_endpoint=node.docker_endpoint)
    n2 = NodeRef(name="n2", docker_endpoint=node.docker_endpoint)
    nodes = [n1, n2]
    woken: list[str] = []
    stop = threading.Event()
    caplog.set_level(logging.INFO, logger="andreas.executor")
    try:
        ex.watch(lambda: list(nodes), woken.append, stop)
        assert wait_for(lambda: ex.watching() == ["n1", "n2"])
        assert {t.name for t in watch_threads()} == {"andreas-events", "andreas-events-n1",
                                                     "andreas-events-n2"}
        nodes.remove(n2)                              # dropped: its thread ends
        assert wait_for(lambda: ex.watching() == ["n1"]
                        and "andreas-events-n2" not in {t.name for t in watch_threads()})
        quiet_replay_window(woken)                    # streams refreshed a few times
        job = new_job()
        cid = ex.start(node, request_for(job, "true"))
        assert wait_for(lambda: woken.count("n1") >= 2)           # start, die
        assert "n2" not in woken
        assert wait_for(lambda: not any(c.running for c in ex.containers(node)
                                        if c.container_id == cid))
        ex.remove(node, cid)
        t0 = time.monotonic()
        stop.set()
        assert wait_for(lambda: not watch_threads(), 3)
        assert time.monotonic() - t0 < 2.5
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        # a second watch ended by the executor's close, stop never set
        ex.watch(lambda: [n1], woken.append, threading.Event())
        assert wait_for(lambda: ex.watching() == ["n1"])
    finally:
        ex.close()
    assert not watch_threads()
    gc.collect()
    assert unix_sockets() <= before                   # no client or socket left open
    assert thread_errors == []


@pytest.mark.slow
def test_an_unreachable_engine_is_retried_with_back_off_and_one_warning(settings, tmp_path,
                                                                        caplog,
                                                                        thread_errors):
    calls: list[str] = []
    real = DockerExecutor(settings)

    def factory(endpoint: str):
        calls.append(endpoint)
        return real._default_client(endpoint)

    ex = DockerExecutor(settings, client_factory=factory)
    gone = NodeRef(name="gone", docker_endpoint=f"unix://{tmp_path}/no-engine.sock")
    refused = NodeRef(name="plain", docker_endpoint="tcp://127.0.0.1:9")    # no TLS: refused
    stop = threading.Event()
    caplog.set_level(logging.INFO, logger="andreas.executor")
    try:
        ex.watch(lambda: [gone, refused], lambda name: None, stop)   # returns at once
        time.sleep(2.5)
        assert 1 <= len(calls) <= 5                  # 0 s, 1 s, 3 s: a handful, no spin
        assert set(calls) == {gone.docker_endpoint}  # the refused scheme never connects
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 2, warnings          # one per node and outage
        assert any("node gone" in w for w in warnings)
        assert any("node plain" in w and "refused" in w for w in warnings)
        assert ex.watching() == []
    finally:
        stop.set()
        assert wait_for(lambda: not watch_threads(), 3)
        ex.close()
        real.close()
    assert thread_errors == []


def test_rewatch_follows_the_nodes_at_once_and_a_dropped_node_is_no_outage(
        settings, node, caplog, thread_errors):
    """The manager stops watching a node before it switches it off: ``rewatch`` ends its
    stream before the supervisor's next look (WATCH_NODES_S), with no warning, and
    watches a node added back at once."""
    ex = DockerExecutor(settings)
    n1 = NodeRef(name="n1", docker_endpoint=node.docker_endpoint)
    nodes = [n1]
    stop = threading.Event()
    caplog.set_level(logging.INFO, logger="andreas.executor")
    try:
        ex.watch(lambda: list(nodes), lambda name: None, stop)
        assert wait_for(lambda: ex.watching() == ["n1"])
        time.sleep(0.5)                   # the supervisor has looked; next in WATCH_NODES_S
        nodes.clear()
        t0 = time.monotonic()
        ex.rewatch()
        assert ex.watching() == []
        assert wait_for(lambda: "andreas-events-n1" not in {t.name for t in watch_threads()},
                        3)
        nodes.append(n1)
        ex.rewatch()
        assert wait_for(lambda: ex.watching() == ["n1"], 3)
        assert time.monotonic() - t0 < docker_executor.WATCH_NODES_S / 2
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    finally:
        stop.set()
        assert wait_for(lambda: not watch_threads(), 3)
        ex.close()
    assert thread_errors == []
