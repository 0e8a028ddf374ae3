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
