"""An in-memory container engine for the manager tests: implements ``Executor`` exactly,
records every call, and lets a test decide when containers exit and which nodes answer."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from andreas.executor.base import (ContainerState, Executor, NodeRef, StartRequest,
                                   container_name)
from andreas.executor.errors import (ContainerConflict, ImageNotAllowed, ImageNotFound,
                                     ImagePullFailed, NodeUnreachable)


@dataclass
class FakeContainer:
    id: str
    name: str
    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...]
    running: bool = True
    exit_code: int | None = None
    oom_killed: bool = False
    started_s: float | None = 0.0
    finished_s: float | None = None
    log: list[str] = field(default_factory=list)
    request: StartRequest | None = None
    signals: list[str] = field(default_factory=list)

    def state(self) -> ContainerState:
        return ContainerState(container_id=self.id, name=self.name, job_id=self.job_id,
                              attempt=self.attempt, gpu_uuids=self.gpu_uuids,
                              running=self.running, exit_code=self.exit_code,
                              oom_killed=self.oom_killed, started_s=self.started_s,
                              finished_s=self.finished_s)


class FakeExecutor(Executor):
    """Nodes by name; ``sigterm_exit``: the exit code a container gives on SIGTERM (None:
    it ignores SIGTERM and only SIGKILL stops it)."""

    def __init__(self, clock: Callable[[], float] = lambda: 0.0) -> None:
        self.clock = clock
        self.nodes: dict[str, dict[str, FakeContainer]] = {}
        self.unreachable: set[str] = set()
        self.missing_images: set[str] = set()
        self.forbidden_images: set[str] = set()
        self.pull_failing: set[str] = set()     # images whose pull fails in a way that may pass
        self.sigterm_exit: int | None = 143
        self.calls: list[tuple] = []
        self._ids = itertools.count(1)

    # -------------------------------------------------------------- test helpers

    def _node(self, node: NodeRef | str) -> dict[str, FakeContainer]:
        name = node if isinstance(node, str) else node.name
        if name in self.unreachable:
            where = "" if isinstance(node, str) else f" ({node.docker_endpoint})"
            raise NodeUnreachable(f"node {name}{where}: engine unreachable (fake)")
        return self.nodes.setdefault(name, {})

    def add(self, node: str, job_id: str, attempt: int, *, running: bool = True,
            gpu_uuids: tuple[str, ...] = (), exit_code: int | None = None) -> FakeContainer:
        c = FakeContainer(id=f"c{next(self._ids):06d}", name=container_name(job_id, attempt),
                          job_id=job_id, attempt=attempt, gpu_uuids=gpu_uuids, running=running,
                          exit_code=exit_code, started_s=self.clock(),
                          finished_s=None if running else self.clock())
        self.nodes.setdefault(node, {})[c.id] = c
        return c

    def find(self, job_id: str, attempt: int | None = None) -> FakeContainer | None:
        found = [c for cs in self.nodes.values() for c in cs.values() if c.job_id == job_id
                 and (attempt is None or c.attempt == attempt)]
        return max(found, key=lambda c: c.attempt) if found else None

    def node_of(self, container: FakeContainer) -> str:
        return next(n for n, cs in self.nodes.items() if container.id in cs)

    def exit(self, job_id: str, code: int, *, log: str = "", oom: bool = False) -> None:
        """The job's running container (its newest) exits with ``code``."""
        live = [c for cs in self.nodes.values() for c in cs.values()
                if c.job_id == job_id and c.running]
        c = max(live, key=lambda c: c.attempt) if live else None
        assert c is not None and c.running, f"job {job_id} has no running container"
        c.running, c.exit_code, c.oom_killed = False, code, oom
        c.finished_s = self.clock()
        if log:
            c.log.extend(log.splitlines())

    def running(self, node: str | None = None) -> list[FakeContainer]:
        return [c for n, cs in self.nodes.items() for c in cs.values()
                if c.running and (node is None or n == node)]

    def calls_of(self, method: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == method]

    # -------------------------------------------------------------- Executor

    def rewatch(self) -> None:
        self.calls.append(("rewatch",))

    def ping(self, node: NodeRef) -> None:
        self.calls.append(("ping", node.name))
        self._node(node)

    def ensure_image(self, node: NodeRef, image: str) -> None:
        self.calls.append(("ensure_image", node.name, image))
        self._node(node)
        if image in self.pull_failing:
            raise ImagePullFailed(f"image {image}: not on node {node.name} and the pull "
                                  "failed: dial tcp: lookup registry: no such host (fake)")

    def start(self, node: NodeRef, request: StartRequest) -> str:
        self.calls.append(("start", node.name, request.job_id, request.attempt,
                           request.gpu_uuids))
        containers = self._node(node)
        if request.image in self.forbidden_images:
            raise ImageNotAllowed(f"image {request.image}: not in the image allowlist")
        if request.image in self.missing_images:
            raise ImageNotFound(f"image {request.image}: not found on node {node.name}")
        name = container_name(request.job_id, request.attempt)
        if any(c.name == name for c in containers.values()):
            raise ContainerConflict(f"container {name} exists on node {node.name}")
        c = self.add(node.name, request.job_id, request.attempt, gpu_uuids=request.gpu_uuids)
        c.request = request
        return c.id

    def signal(self, node: NodeRef, container_id: str, signal: str = "SIGTERM") -> None:
        self.calls.append(("signal", node.name, container_id, signal))
        c = self._node(node).get(container_id)
        if c is None or not c.running:
            return
        c.signals.append(signal)
        if signal == "SIGTERM" and self.sigterm_exit is not None:
            c.running, c.exit_code, c.finished_s = False, self.sigterm_exit, self.clock()

    def kill(self, node: NodeRef, container_id: str) -> None:
        self.calls.append(("kill", node.name, container_id))
        c = self._node(node).get(container_id)
        if c is not None and c.running:
            c.signals.append("SIGKILL")
            c.running, c.exit_code, c.finished_s = False, 137, self.clock()

    def containers(self, node: NodeRef) -> list[ContainerState]:
        self.calls.append(("containers", node.name))
        return [c.state() for c in self._node(node).values()]

    def remove(self, node: NodeRef, container_id: str) -> None:
        self.calls.append(("remove", node.name, container_id))
        c = self._node(node).get(container_id)
        if c is not None and c.running:
            raise AssertionError(f"removed running container {container_id}")
        self._node(node).pop(container_id, None)

    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        c = self._node(node).get(container_id)
        lines = c.log if c is not None else []
        if tail is not None:
            lines = lines[-tail:]
        yield "".join(f"{line}\n" for line in lines).encode()

    def actions(self) -> list[tuple]:
        """Calls that change something (not the listings)."""
        return [c for c in self.calls if c[0] not in ("containers", "ping")]
