"""A tick's first phase: read the store and the labelled containers of the nodes.

Apart from the reconciler because reading is the one phase that acts on nothing: it
polls the nodes that matter in a thread pool and probes, with back-off, those the
manager marked down itself (see :mod:`andreas.manager.reconcile`).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from andreas.config import Settings
from andreas.executor.base import ContainerState, Executor, NodeRef
from andreas.executor.errors import EngineUnavailable
from andreas.manager.state import StoreState, load_state, node_ref
from andreas.store.engine import Store
from andreas.store.models import NodeState
from andreas.store.read import JobView, NodeView, load_jobs

log = logging.getLogger("andreas.manager")

PROBE_BACKOFF_S = 30.0            # a node marked down is probed at most this often


@dataclass(frozen=True, kw_only=True)
class Observation:
    """One tick's reading: the store and the containers of the nodes that answered."""

    now_s: float
    state: StoreState
    containers: Mapping[str, list[ContainerState]]
    failed: Mapping[str, str]                      # node -> why it did not answer
    others: Mapping[str, JobView] = field(default_factory=dict)  # jobs only containers name
    recovered: tuple[str, ...] = ()                # nodes marked down that answer again
    unknown: tuple[str, ...] = ()                  # the engine itself did not answer

    def job(self, job_id: str) -> JobView | None:
        return self.state.jobs.get(job_id) or self.others.get(job_id)

    def running_jobs(self) -> set[str]:
        return {c.job_id for cs in self.containers.values() for c in cs if c.running}


class Observer:
    """Reads one tick's :class:`Observation`; keeps the background probes between ticks."""

    def __init__(self, store: Store, executor: Executor, settings: Settings, *,
                 clock: Callable[[], float], pool: cf.ThreadPoolExecutor,
                 probe_backoff_s: float = PROBE_BACKOFF_S) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self.clock = clock
        self.pool = pool
        self.probe_backoff_s = probe_backoff_s
        self.polled: tuple[NodeRef, ...] = ()     # the nodes the last observe read
        self.probes: dict[str, cf.Future] = {}
        self.probe_after: dict[str, float] = {}   # node -> when it may be probed again
        self._engine_down: str | None = None      # why the engine did not answer (logged)

    def observe(self, unreachable: set[str]) -> Observation:
        """``unreachable``: the nodes this manager marked down (a node whose state
        someone else set since leaves it)."""
        now = self.clock()
        with self.store.session() as s:
            state = load_state(s)
        polled, probe, forced_down = self._sort_nodes(state, unreachable)
        self.polled = tuple(node_ref(n) for n in polled)
        futures = {self.pool.submit(self.executor.containers, node_ref(n)): n.name
                   for n in polled}
        for n in probe:
            if n.name not in self.probes and now >= self.probe_after.get(n.name, 0.0):
                self.probes[n.name] = self.pool.submit(self.executor.containers, node_ref(n))
        containers: dict[str, list[ContainerState]] = {}
        failed: dict[str, str] = {name: "marked down" for name in forced_down}
        unknown: list[str] = []
        for future in cf.as_completed(futures):
            name = futures[future]
            try:
                containers[name] = list(future.result())
            except EngineUnavailable as e:     # nothing known: the node is not thereby down
                unknown.append(name)
                self._note_engine(str(e))
            except Exception as e:  # noqa: BLE001 - any engine error: the node is unreachable
                failed[name] = str(e) or type(e).__name__
        if not unknown:
            self._note_engine(None)
        recovered = self._probed(now)
        known = set(state.jobs)
        wanted = {c.job_id for cs in containers.values() for c in cs} - known
        others = {}
        if wanted:
            with self.store.session() as s:
                others = load_jobs(s, ids=wanted)
        return Observation(now_s=now, state=state, containers=containers, failed=failed,
                           others=others, recovered=recovered, unknown=tuple(unknown))

    @staticmethod
    def _sort_nodes(state: StoreState, unreachable: set[str]
                    ) -> tuple[list[NodeView], list[NodeView], list[str]]:
        """The nodes to poll, those to probe, and those marked down with attempts open."""
        open_nodes = {a.node_id for j in state.jobs.values() for a in j.open_attempts}
        polled, probe, forced_down = [], [], []
        for n in state.nodes.values():
            if n.name in unreachable and n.state is not NodeState.DOWN:
                unreachable.discard(n.name)          # someone else set its state since
            if n.name in unreachable and n.id in open_nodes:
                forced_down.append(n.name)   # attempts left open there: close them now
            elif n.name in unreachable:
                probe.append(n)
            elif n.id in open_nodes or n.state in (NodeState.UP, NodeState.DRAINING):
                polled.append(n)         # profiling nodes too: the manager profiles there
        return polled, probe, forced_down

    def _probed(self, now: float) -> tuple[str, ...]:
        """The probed nodes that answered; the others wait ``probe_backoff_s``."""
        if self.probes:
            cf.wait(list(self.probes.values()), timeout=self.settings.manager.poll_s)
        recovered = []
        for name, future in list(self.probes.items()):
            if not future.done():
                continue
            del self.probes[name]
            if future.exception() is None:
                recovered.append(name)
            else:
                self.probe_after[name] = now + self.probe_backoff_s
        return tuple(recovered)

    def _note_engine(self, why: str | None) -> None:
        """One line when the engine stops answering, one when it answers again."""
        if why is not None and self._engine_down is None:
            log.warning("the engine does not answer (%s); nothing is started or stopped "
                        "on its nodes until it does", why)
        elif why is None and self._engine_down is not None:
            log.info("the engine answers again")
        self._engine_down = why
