"""The dry-run executor: what the manager would do, logged and recorded, no Docker.

``andreas manager run --dry-run`` uses it to show an operator the decisions and container
actions on a real store without touching a node. It keeps in-memory containers so the
manager's loop stays consistent: a started container runs until it is signalled (SIGTERM:
exit 143), killed (137) or, with ``complete_after_s``, finishes its work (exit 0), so a
laptop demo sees jobs complete.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from andreas.config import ExecutorSettings
from andreas.executor.base import (DRY_RUN_PREFIX, Capability, ContainerState, Executor, NodeRef,
                                   StartRequest, container_name)
from andreas.jobspec import image_allowed
from andreas.executor.errors import ContainerConflict, ImageNotAllowed

log = logging.getLogger("andreas.executor")


@dataclass(frozen=True, kw_only=True)
class DryRunAction:
    """One action the executor would have taken (``kind``: start, signal, kill, remove)."""

    kind: str
    node: str
    container_id: str
    job_id: str = ""
    attempt: int = 0
    detail: str = ""              # start: gpus and image; signal: the signal


class DryRunExecutor(Executor):
    """Records and logs actions instead of running containers.

    ``clock``: UTC seconds for start and exit times. ``complete_after_s``: seconds after
    which a started container exits 0 (a number, or a function of the request; None:
    never). ``settings``: when given, its image allow-list is applied as Docker would.
    """

    capabilities = Capability.IMAGES | Capability.COMMANDS

    def __init__(self, *, clock: Callable[[], float] = time.time,
                 complete_after_s: float | Callable[[StartRequest], float | None] | None = None,
                 settings: ExecutorSettings | None = None) -> None:
        self.clock = clock
        self.complete_after_s = complete_after_s
        self.settings = settings
        self.actions: list[DryRunAction] = []
        self._containers: dict[str, dict[str, ContainerState]] = {}   # node -> id -> state
        self._done_at: dict[str, float] = {}                            # id -> exit 0 at
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _record(self, action: DryRunAction, message: str, *args: object) -> None:
        self.actions.append(action)
        log.info(message, *args)

    def _finish_due(self, node: str) -> None:
        now = self.clock()
        for cid, c in self._containers.get(node, {}).items():
            if c.running and cid in self._done_at and now >= self._done_at[cid]:
                self._containers[node][cid] = replace(c, running=False, exit_code=0,
                                                      finished_s=self._done_at[cid])
                log.info("dry run: job=%s attempt=%d node=%s would have completed (exit 0)",
                         c.job_id, c.attempt, node)

    def _exit(self, node: NodeRef, container_id: str, code: int) -> ContainerState | None:
        c = self._containers.get(node.name, {}).get(container_id)
        if c is None or not c.running:
            return None
        self._containers[node.name][container_id] = replace(c, running=False, exit_code=code,
                                                            finished_s=self.clock())
        return c

    # ------------------------------------------------------------ Executor

    def ping(self, node: NodeRef) -> None:
        return None

    def start(self, node: NodeRef, request: StartRequest) -> str:
        patterns = self.settings.image_allowlist if self.settings is not None else ()
        if request.image and not image_allowed(request.image, patterns):
            raise ImageNotAllowed(f"image {request.image}: not in the image allowlist "
                                  f"({', '.join(patterns)})")
        name = container_name(request.job_id, request.attempt)
        with self._lock:
            here = self._containers.setdefault(node.name, {})
            if any(c.name == name for c in here.values()):
                raise ContainerConflict(f"container {name} exists on node {node.name} "
                                        "(dry run)")
            cid = f"{DRY_RUN_PREFIX}{next(self._ids):06d}"
            now = self.clock()
            here[cid] = ContainerState(container_id=cid, name=name, job_id=request.job_id,
                                       attempt=request.attempt, gpu_uuids=request.gpu_uuids,
                                       running=True, started_s=now)
            after = self.complete_after_s
            if callable(after):
                after = after(request)
            if after is not None:
                self._done_at[cid] = now + float(after)
            gpus = ",".join(request.gpu_uuids) or "-"
            if request.gpu_milli is not None:
                gpus += f"@{request.gpu_milli}m"
            self._record(DryRunAction(kind="start", node=node.name, container_id=cid,
                                      job_id=request.job_id, attempt=request.attempt,
                                      detail=f"gpus={gpus} image={request.image}"),
                         "would start job=%s attempt=%d node=%s gpus=%s image=%s",
                         request.job_id, request.attempt, node.name, gpus, request.image)
        return cid

    def signal(self, node: NodeRef, container_id: str, signal: str = "SIGTERM") -> None:
        with self._lock:
            c = self._containers.get(node.name, {}).get(container_id)
            self._record(DryRunAction(kind="signal", node=node.name, container_id=container_id,
                                      job_id=c.job_id if c else "",
                                      attempt=c.attempt if c else 0, detail=signal),
                         "would send %s to container %s (job=%s) node=%s", signal,
                         container_id, c.job_id if c else "?", node.name)
            if signal in ("SIGTERM", "TERM", "15"):
                self._exit(node, container_id, 143)
            elif signal in ("SIGKILL", "KILL", "9"):
                self._exit(node, container_id, 137)

    def kill(self, node: NodeRef, container_id: str) -> None:
        with self._lock:
            c = self._containers.get(node.name, {}).get(container_id)
            self._record(DryRunAction(kind="kill", node=node.name, container_id=container_id,
                                      job_id=c.job_id if c else "",
                                      attempt=c.attempt if c else 0, detail="SIGKILL"),
                         "would send SIGKILL to container %s (job=%s) node=%s",
                         container_id, c.job_id if c else "?", node.name)
            self._exit(node, container_id, 137)

    def containers(self, node: NodeRef) -> list[ContainerState]:
        with self._lock:
            self._finish_due(node.name)
            return list(self._containers.get(node.name, {}).values())

    def remove(self, node: NodeRef, container_id: str) -> None:
        with self._lock:
            c = self._containers.get(node.name, {}).pop(container_id, None)
            self._done_at.pop(container_id, None)
            if c is not None:
                self._record(DryRunAction(kind="remove", node=node.name,
                                          container_id=container_id, job_id=c.job_id,
                                          attempt=c.attempt),
                             "would remove container %s (job=%s attempt=%d) node=%s",
                             container_id, c.job_id, c.attempt, node.name)

    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        with self._lock:
            c = self._containers.get(node.name, {}).get(container_id)
        if c is not None and tail != 0:
            yield (f"dry run: container {c.name} on node {node.name} runs nothing; "
                   "no output\n").encode()
