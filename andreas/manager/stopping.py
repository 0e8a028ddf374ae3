"""Stopping and removing containers: signals with their grace period, orphans, and
removals that keep the end of the log.

Apart from the reconciler because it is the one place that remembers which signals this
manager process sent (SIGTERM once, SIGKILL once the grace period has passed since the
recorded request) and which unwanted containers it is stopping.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from andreas.config import Settings
from andreas.executor.base import ContainerState, Executor
from andreas.executor.errors import ExecutorError, NodeUnreachable
from andreas.manager.state import node_ref
from andreas.store.attempts import note_stop, save_log_tail
from andreas.store.engine import Store
from andreas.store.read import AttemptView, JobView, NodeView

log = logging.getLogger("andreas.manager")

KEPT_LOG_LINES = 200         # the end of a log kept in the store when its container goes
KEPT_LOG_BYTES = 64 * 1024


def kept_log(raw: bytes, limit: int = KEPT_LOG_BYTES) -> str:
    """The end of a log as text: at most ``limit`` bytes of UTF-8, cut at a line start
    when one is near (a kept log never begins with half a line or half a character)."""
    if len(raw) > limit:
        raw = raw[-limit:]
        cut = raw.find(b"\n")
        if 0 <= cut < 4096:
            raw = raw[cut + 1:]
    return raw.decode("utf-8", "replace")


class Stopper:
    """Signals, stops and removes containers on the reconciler's behalf."""

    def __init__(self, store: Store, executor: Executor, settings: Settings) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self._signalled: set[tuple[str, int | str]] = set()
        self._killed: set[tuple[str, int | str]] = set()
        self._orphans: dict[tuple[str, str], float] = {}

    def signal(self, node: NodeView, cid: str, key: tuple[str, int | str], since_s: float,
               grace_s: float, now: float, what: str) -> None:
        """SIGTERM once (per manager process), SIGKILL once the grace period has passed."""
        try:
            if key not in self._signalled:
                self.executor.signal(node_ref(node), cid, "SIGTERM")
                self._signalled.add(key)
                log.info("SIGTERM %s node=%s container=%s (kill after %.0f s)", what,
                         node.name, cid[:12], grace_s)
            if now >= since_s + grace_s and key not in self._killed:
                self.executor.kill(node_ref(node), cid)
                self._killed.add(key)
                log.warning("SIGKILL %s node=%s container=%s: grace period of %.0f s over",
                            what, node.name, cid[:12], grace_s)
        except NodeUnreachable as e:
            log.warning("could not signal %s on node %s: %s", what, node.name, e)

    def signal_preempting(self, job: JobView, a: AttemptView, node: NodeView,
                          found: Mapping[tuple[str, int], str], now: float,
                          since_s: float | None) -> None:
        """Signal a stopping attempt's container (the deadline runs from ``since_s``)."""
        cid = a.container_id or found.get((job.id, a.attempt))
        if cid is None:
            return                       # not started yet: adopted (or vanished) next tick
        self.signal(node, cid, (job.id, a.attempt), since_s if since_s is not None else now,
                    job.grace_s, now, f"job={job.id} attempt={a.attempt}")

    def stop_terminal(self, job: JobView, a: AttemptView, node: NodeView, c: ContainerState,
                      now: float) -> None:
        """Stop the container of a finished (cancelled) job, its deadline stored."""
        since = a.stop_requested_s
        if since is None:
            with self.store.session() as s:
                note_stop(s, a.id, now)
            since = now
        self.signal(node, c.container_id, (job.id, a.attempt), since, job.grace_s, now,
                    f"job={job.id} attempt={a.attempt} ({job.state.value})")

    def stop_orphan(self, node: NodeView, c: ContainerState, job: JobView | None, why: str,
                    now: float) -> None:
        """Stop a running container that no open attempt owns."""
        since = self._orphans.setdefault((node.name, c.container_id), now)
        grace = job.grace_s if job is not None else self.settings.executor.stop_grace_s
        if (c.container_id, "orphan") not in self._signalled:
            log.warning("container %s on node %s (job=%s attempt=%d) is not wanted: %s; "
                        "stopping it", c.name, node.name, c.job_id, c.attempt, why)
        self.signal(node, c.container_id, (c.container_id, "orphan"), since, grace, now,
                    f"orphan {c.name}")

    def forget_orphans(self, node: str, live: set[tuple[str, str]]) -> None:
        """Orphans of ``node`` that no longer run (``live``: (node, container) pairs)."""
        for key in [k for k in self._orphans if k[0] == node and k not in live]:
            del self._orphans[key]

    def expired(self, job: JobView, c: ContainerState, now: float) -> bool:
        """An exited container of a finished attempt, ``keep_exited_s`` after both ended."""
        a = next((x for x in job.attempts if x.attempt == c.attempt), None)
        if a is None or a.end_s is None:
            return False
        ended = max(a.end_s, c.finished_s if c.finished_s is not None else a.end_s)
        return now - ended >= self.settings.executor.keep_exited_s

    def remove_keeping_log(self, node: NodeView, c: ContainerState, job: JobView,
                           now: float) -> bool:
        """Store the end of the container's log with its attempt, then remove it; a log
        that cannot be read keeps the container (tried again next tick)."""
        a = next((x for x in job.attempts if x.attempt == c.attempt), None)
        if a is not None:
            try:
                raw = b"".join(self.executor.logs(node_ref(node), c.container_id,
                                                  tail=KEPT_LOG_LINES))
            except ExecutorError as e:
                log.warning("container %s on node %s: log not readable (%s); kept", c.name,
                            node.name, e)
                return False
            with self.store.session() as s:
                save_log_tail(s, a.id, kept_log(raw), now)
        return self.safe_remove(node, c)

    def safe_remove(self, node: NodeView, c: ContainerState) -> bool:
        try:
            self.executor.remove(node_ref(node), c.container_id)
            return True
        except ExecutorError as e:
            log.warning("could not remove container %s on node %s: %s", c.name, node.name, e)
            return False
