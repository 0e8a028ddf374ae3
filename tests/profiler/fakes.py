"""A fake engine whose containers print ANDREAS-PROGRESS lines: the manager tests'
FakeExecutor (its logs come back in one piece and its containers only exit when told) plus
a script per GPU count, streamed in chunks that split lines, as Docker's stream does."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from andreas.executor.base import NodeRef, StartRequest
from andreas.job import format_progress
from tests.manager.fakes import FakeExecutor

T0 = 1_800_000_000.0


class ScriptedExecutor(FakeExecutor):
    """``epoch_s(g, epoch)``: the container's epoch durations; ``behaviour[g]``: ``ok``
    (all epochs, exit 0), ``fail`` (one epoch, exit 1), ``hang`` (one epoch, then runs until
    killed), ``silent`` (exit 0 without progress lines). ``on_start(request)`` runs at each
    start (tests look at the store there). ``at_limit(limit_w)``: the factor a run's power
    limit (None: the default) stretches its epochs by; ``on_window(node, request, t0, t1)``
    gets each run's span by its own stamps (runs follow each other in time)."""

    def __init__(self, epoch_s: Callable[[int, int], float], *,
                 behaviour: dict[int, str] | None = None,
                 on_start: Callable[[NodeRef, StartRequest], None] | None = None,
                 at_limit: Callable[[float | None], float] = lambda limit_w: 1.0,
                 on_window: Callable[[NodeRef, StartRequest, float, float], None] | None = None
                 ) -> None:
        super().__init__()
        self.at_limit = at_limit
        self.on_window = on_window
        self.next_t = T0
        self.epoch_s = epoch_s
        self.behaviour = behaviour or {}
        self.on_start = on_start
        self.requests: list[StartRequest] = []

    def start(self, node: NodeRef, request: StartRequest) -> str:
        cid = super().start(node, request)
        self.requests.append(request)
        if self.on_start is not None:
            self.on_start(node, request)
        c = self.nodes[node.name][cid]
        g = len(request.gpu_uuids)
        kind = self.behaviour.get(g, "ok")
        epochs = 1 if kind in ("fail", "hang") else 0 if kind == "silent" else request.epochs
        t = t0 = self.next_t
        c.log.append("2027-01-15T08:00:00.000000000Z loading data ...")
        for e in range(1, epochs + 1):
            c.log.append(format_progress(request.job_id, e, request.epochs, "start", t=t))
            t += self.epoch_s(g, e) * self.at_limit(request.power_limit_w)
            c.log.append("2027-01-15T08:00:01Z " + format_progress(
                request.job_id, e, request.epochs, "end", t=t, metrics={"loss": 0.5}))
        c.log.append(format_progress("someone-else", 1, 1, "end", t=t))   # not ours: ignored
        self.next_t = t + 10.0
        if self.on_window is not None:
            self.on_window(node, request, t0, t)
        if kind != "hang":
            c.running, c.exit_code = False, 1 if kind == "fail" else 0
            c.finished_s = self.clock()
        return cid

    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        c = self._node(node).get(container_id)
        if c is None:
            return
        lines = c.log if tail is None else c.log[-tail:]
        data = "".join(f"{line}\n" for line in lines).encode()
        for start in range(0, len(data), 37):          # chunks that cut lines
            yield data[start:start + 37]
        while follow and c.running:
            time.sleep(0.01)
