"""The fence's timing without Docker: a stub engine, the store's verdicts as functions, a
manual monotonic clock (what the real engine and store add: tests/agents_docker)."""

from __future__ import annotations

import threading

from agents.fence import DEFAULT_GRACE_S, Fence
from andreas.job import container_labels
from andreas.store.fence import Verdict


class Api:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.signals: list[tuple[str, str]] = []

    def add(self, cid: str, job: str, attempt: int, grace_s: float | None = None) -> None:
        self.rows.append({"Id": cid, "Names": [f"/andreas-{job}-{attempt}"],
                          "Labels": container_labels(job, attempt, (), grace_s=grace_s)})

    def containers(self, filters: dict) -> list[dict]:
        assert filters == {"label": "andreas.job", "status": "running"}
        return list(self.rows)

    def kill(self, cid: str, signal: str) -> None:
        self.signals.append((cid, signal))


class Client:
    def __init__(self) -> None:
        self.api = Api()


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_stale_verdict_sigterm_then_sigkill_after_the_labelled_grace():
    client, clock = Client(), Clock()
    client.api.add("c1", "j", 1, grace_s=30)
    client.api.add("c2", "k", 3)                        # no grace label: Docker's 10 s
    stale = {("j", 1): Verdict(stale=True, why="attempt ended in the store"),
             ("k", 3): Verdict(stale=True, why="superseded by attempt 4")}
    fence = Fence(docker=lambda: client, verdicts=lambda keys: stale, check_s=5.0,
                  after_s=60.0, mono=clock)
    fence.check()
    assert client.api.signals == [("c1", "SIGTERM"), ("c2", "SIGTERM")]
    fence.check()                                       # one SIGTERM per container
    assert len(client.api.signals) == 2
    clock.t += DEFAULT_GRACE_S
    fence.kill_due()
    assert client.api.signals[2:] == [("c2", "SIGKILL")]
    clock.t += 30.0 - DEFAULT_GRACE_S
    fence.kill_due()
    assert client.api.signals[3:] == [("c1", "SIGKILL")]
    assert (fence.stats.stopped, fence.stats.killed, fence.stats.self_fenced) == (2, 2, 0)
    client.api.rows.clear()                             # exited: forgotten
    fence.check()
    assert fence.stopping == {}


def test_current_containers_run_on_and_the_self_fence_counts_from_the_last_answer():
    client, clock = Client(), Clock()
    client.api.add("c1", "j", 1, grace_s=5)
    answers: list[object] = [{("j", 1): Verdict(stale=False)}]

    def verdicts(keys):
        answer = answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    fence = Fence(docker=lambda: client, verdicts=verdicts, check_s=5.0, after_s=60.0,
                  mono=clock)
    fence.check()
    assert client.api.signals == [] and fence.last_ok == 100.0
    answers[0] = ConnectionError("Can't connect to MySQL server")
    clock.t = 159.9                                    # 59.9 s after the last answer
    fence.check()
    assert client.api.signals == [] and fence.stats.failed_checks == 1
    clock.t = 160.0
    fence.check()
    assert client.api.signals == [("c1", "SIGTERM")] and fence.stats.self_fenced == 1
    answers[0] = {("j", 1): Verdict(stale=False)}      # back: nothing more is stopped
    fence.check()                                      # (collects the last failed query)
    fence.check()
    assert fence.last_ok == 160.0 and client.api.signals == [("c1", "SIGTERM")]


def test_a_hung_store_query_does_not_delay_the_self_fence():
    """The query runs in the fence's worker; the check waits for it only until the
    self-fence is due, then stops the containers anyway."""
    client, clock = Client(), Clock()
    client.api.add("c1", "j", 1, grace_s=5)
    release = threading.Event()

    def hung(keys):
        release.wait(10)
        return {("j", 1): Verdict(stale=False)}

    fence = Fence(docker=lambda: client, verdicts=hung, check_s=5.0, after_s=0.2,
                  mono=clock)
    clock.t += 0.2                                     # the fence is due now
    fence.check()
    assert client.api.signals == [("c1", "SIGTERM")]
    assert fence.stats.self_fenced == 1 and fence.stats.checks == 0
    release.set()


def test_after_zero_never_self_fences_and_docker_down_is_retried():
    client, clock = Client(), Clock()
    client.api.add("c1", "j", 1)
    made = []

    def docker():
        made.append(1)
        if len(made) == 1:
            raise ConnectionError("Docker down")
        return client

    def down(keys):
        raise ConnectionError("store down")

    fence = Fence(docker=docker, verdicts=down, check_s=5.0, after_s=0.0, mono=clock)
    fence.check()                                      # Docker down: nothing seen
    assert fence.client is None and fence.stats.failed_checks == 0
    clock.t += 3600.0
    fence.check()
    assert len(made) == 2 and fence.stats.failed_checks == 1
    assert client.api.signals == [] and fence.stats.self_fenced == 0


# ---------------------------------------------------------------------- engine gone

GRACEFUL = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
            "print('ready', flush=True)\ntime.sleep(120)\n")
STUBBORN = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(120)\n")


def process(script: str):
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


class CrashingApi(Api):
    """An engine that lists its containers (each with its main process) until it crashes;
    the containers' processes run on without it."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: dict[str, int] = {}
        self.crashed = False

    def containers(self, filters: dict) -> list[dict]:
        if self.crashed:
            raise ConnectionError("Error while fetching server API version: connection "
                                  "refused")
        return super().containers(filters)

    def inspect_container(self, cid: str) -> dict:
        return {"State": {"Pid": self.pids[cid]}}

    def kill(self, cid: str, signal: str) -> None:
        if self.crashed:
            raise ConnectionError("connection refused")
        super().kill(cid, signal)


def test_with_the_engine_gone_stale_processes_are_stopped_through_proc():
    client, clock = Client(), Clock()
    client.api = CrashingApi()
    graceful, stubborn = process(GRACEFUL), process(STUBBORN)
    try:
        for cid, job, p in (("c1", "j", graceful), ("c2", "k", stubborn)):
            client.api.add(cid, job, 1, grace_s=5)
            client.api.pids[cid] = p.pid
        verdict = {("j", 1): Verdict(stale=False), ("k", 1): Verdict(stale=False)}
        fence = Fence(docker=lambda: client, verdicts=lambda keys: verdict, check_s=5.0,
                      after_s=60.0, mono=clock)
        fence.check()                                   # listed: processes remembered
        assert {r.process.pid for r in fence.known.values()} == {graceful.pid, stubborn.pid}
        client.api.crashed = True                       # dockerd SIGKILLed; shims run on
        fence.check()
        assert fence.engine_down and graceful.poll() is None and stubborn.poll() is None
        verdict = {k: Verdict(stale=True, why="attempt ended in the store") for k in verdict}
        fence.check()                                   # the manager ended the attempts
        assert graceful.wait(10) == 143                 # SIGTERM reached it without Docker
        assert stubborn.poll() is None and fence.stats.without_engine == 2
        clock.t += 5.0
        fence.kill_due()
        assert stubborn.wait(10) == -9                  # SIGKILL after the grace period
        fence.check()
        assert fence.known == {} and fence.stopping == {}
        assert client.api.signals == []                 # nothing went through the engine
    finally:
        for p in (graceful, stubborn):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_pid_reused_by_another_process_is_never_signalled():
    from andreas.infra import procs

    p = process(GRACEFUL)
    try:
        now = procs.ref(p.pid)
        assert now is not None and procs.alive(now)
        other = procs.ProcessRef(pid=p.pid, start_ticks=now.start_ticks + 1)
        assert not procs.alive(other) and not procs.send(other, __import__("signal").SIGTERM)
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
