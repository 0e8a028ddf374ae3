"""Attempts of an engine that queues and picks GPUs itself (Slurm), as the reconciler
settles them.

- **Pending**: the engine has the attempt but has not started it. Its reason (Slurm's:
  ``Resources``, ``Priority``, ``ReqNodeNotAvail``, ...) is noted on the attempt
  (``pending: <reason>``, shown by ``andreas show``) and logged when it changes. Past
  ``[executor] pending_timeout_s`` since the engine took it, the attempt is cancelled and
  its job preempted, so the next plan places it again (no failure is counted: the job
  did not fail). A pending attempt of a finished or cancelled job is cancelled at once.
- **GPUs**: the manager asks for g GPUs of a node and records the ones it would choose;
  once the attempt runs, the ones the engine reports (Slurm's IDX, mapped to the agent's
  UUIDs) replace them, so capacity and energy are counted on the GPUs really held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from andreas.config import Settings
from andreas.executor.base import Capability, ContainerState, Executor
from andreas.executor.errors import ExecutorError
from andreas.limits import REASON_CHARS
from andreas.manager.state import node_ref
from andreas.manager.triggers import Trigger
from andreas.store.attempts import note_pending, record_container, set_gpus
from andreas.store.engine import Store
from andreas.store.jobs import LIVE, TERMINAL
from andreas.store.models import JobState
from andreas.store.read import AttemptView, JobView, NodeView

log = logging.getLogger("andreas.manager")

End = Callable[..., bool]        # Closer.end(job, attempt, end_s, reason=, new=)


class QueuedRuns:
    """The reconciler's handling of pending attempts and engine-chosen GPUs."""

    def __init__(self, store: Store, executor: Executor, settings: Settings) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings

    def pending(self, job: JobView, a: AttemptView, node: NodeView, c: ContainerState,
                now: float, *, end: End) -> set[Trigger]:
        """Note why it waits; cancel it past the bound (see the module docstring)."""
        if a.container_id != c.container_id:
            with self.store.session() as s:
                record_container(s, a.id, c.container_id, None)
        why = f"pending: {c.pending_reason or 'queued'}"[:REASON_CHARS]
        since = c.submitted_s if c.submitted_s is not None else now
        bound = self.settings.executor.pending_timeout_s
        if job.state in TERMINAL or now - since > bound:
            try:
                self.executor.kill(node_ref(node), c.container_id)
            except ExecutorError as e:
                log.warning("job=%s attempt=%d node=%s: could not cancel it: %s", job.id,
                            a.attempt, node.name, e)
                return set()
            if job.state in TERMINAL:
                return set()          # the attempt ends when the engine reports the end
            reason = f"{why} for {now - since:.0f} s (pending_timeout_s {bound:g}); cancelled"
            end(job, a, now, reason=reason[:REASON_CHARS],
                new=JobState.PREEMPTED if job.state in LIVE else None)
            log.warning("job=%s attempt=%d node=%s: %s; planned again", job.id, a.attempt,
                        node.name, reason)
            return {Trigger.FAILED}
        if a.reason != why:
            with self.store.session() as s:
                note_pending(s, a.id, why)
            log.info("job=%s attempt=%d node=%s: %s", job.id, a.attempt, node.name, why)
        return set()

    def engine_gpus(self, job: JobView, a: AttemptView, node: NodeView,
                    c: ContainerState) -> None:
        """The GPUs the engine gave a running attempt replace the planned ones."""
        if Capability.PICKS_GPUS not in self.executor.capabilities or not c.gpu_uuids:
            return
        indexes = [node.index_of(u) for u in c.gpu_uuids]
        if any(i is None for i in indexes):
            return
        got = tuple(sorted(i for i in indexes if i is not None))
        if got != tuple(sorted(a.gpu_ids)):
            with self.store.session() as s:
                set_gpus(s, a.id, got)
            log.info("job=%s attempt=%d node=%s: the engine gave it GPU(s) %s (planned %s)",
                     job.id, a.attempt, node.name, ",".join(map(str, got)),
                     ",".join(map(str, a.gpu_ids)))
