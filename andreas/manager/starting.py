"""Starting an attempt: the checks before it, the GPUs it takes, and the start itself.

Apart from the reconciler because a start is the one action with an order that matters
across a crash: the attempt row and the job's move in one transaction, then the
container, then its id; and because it remembers, per manager process, which image
pulls fail and which fence holds it logged.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

from andreas.config import Settings
from andreas.executor.base import Capability, Executor, StartRequest
from andreas.executor.errors import (ContainerConflict, ExecutorError, ImageNotAllowed,
                                     ImageNotFound, ImagePullFailed, NodeUnreachable,
                                     StartUncertain)
from andreas.manager.closing import UNREACHABLE_REASON, Closer, clip
from andreas.manager.exits import retry
from andreas.manager.plandoc import Target
from andreas.manager.state import node_ref
from andreas.manager.triggers import Trigger
from andreas.model import GPU_MILLI, Config
from andreas.store.attempts import open_attempt, record_container
from andreas.store.engine import Store
from andreas.store.errors import TransitionConflict
from andreas.store.jobs import transition
from andreas.store.models import JobState
from andreas.store.read import AttemptView, GpuView, JobView, NodeView

log = logging.getLogger("andreas.manager")

UNREACHABLE_MARGIN_S = 5.0   # beyond grace + fence: the SIGKILL, the exit, clock steps


class ImageStatus(enum.StrEnum):
    """Whether a node has a job's image before an attempt is recorded."""

    READY = "ready"      # present (pulled if needed), or an error the start records
    WAIT = "wait"        # a pull failing in a way that may pass: the job waits
    FAILED = "failed"    # failing past ``image_pull_grace_s``: the job failed


def gpu_list(indexes: Iterable[int]) -> str:
    return ",".join(str(i) for i in indexes)


def choose_gpus(usable: tuple[GpuView, ...], used: Mapping[int, int], want: Config,
                share: int | None) -> list[GpuView] | None:
    """The GPUs a start takes (see :mod:`andreas.manager.reconcile`), or None while they
    are held. ``want.gpu_ids``: positions in ``usable`` the plan chose; ``share``:
    milli-GPU of one GPU, None for whole GPUs."""
    need = share if share is not None else GPU_MILLI
    room = [g for g in usable if used.get(g.index, 0) + need <= GPU_MILLI]
    planned = [usable[k] for k in want.gpu_ids if 0 <= k < len(usable)]
    if len(planned) == want.gpus and all(g in room for g in planned):
        return planned
    if share is not None:
        room.sort(key=lambda g: -used.get(g.index, 0))      # fullest first: best fit
    return room[:want.gpus] if len(room) >= want.gpus else None


class Starter:
    """Starts the attempts the reconciler's apply phase asks for."""

    def __init__(self, store: Store, executor: Executor, settings: Settings,
                 closer: Closer) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self.closer = closer
        self._fence_logged: dict[str, int] = {}   # job -> attempt whose hold was logged
        self._pull_failing: dict[str, float] = {}   # job -> first failed pull (this process)
        self._pull_logged: dict[str, float] = {}

    def may_start(self, job: JobView, node: NodeView, now: float,
                  triggers: set[Trigger]) -> bool:
        """Whether a start may go ahead now: not held by the fence, and the node has the
        job's image (a failed image adds the ``failed`` trigger)."""
        if self._fenced(job, now):
            return False
        if job.unreadable:                   # never run a job with a guessed command
            self.closer.fail_unstarted(job, now, f"stored {' and '.join(job.unreadable)} "
                                       "unreadable (not valid JSON of the right shape); "
                                       "resubmit")
            triggers.add(Trigger.FAILED)
            return False
        image = self._image_ready(job, node, now)
        if image is ImageStatus.FAILED:
            triggers.add(Trigger.FAILED)
        return image is ImageStatus.READY

    def _fenced(self, job: JobView, now: float) -> bool:
        """A job whose node stopped answering while it ran may still be running there: an
        engine that shuts down stops its containers within their grace period (SIGTERM,
        then SIGKILL, the container's StopTimeout); a node cut off from the manager has
        its agent's fence (agents/fence.py), which stops them within ``fence_after_s`` +
        ``grace_s`` of its last answer from the store, and that answer came before the
        attempt ended here. So the job starts elsewhere only once ``grace_s`` +
        ``[manager] fence_after_s`` + a margin have passed since the attempt ended."""
        a = job.latest
        if (a is None or a.end_s is None or a.start_s is None
                or a.reason != UNREACHABLE_REASON):
            return False
        until = (a.end_s + job.grace_s + self.settings.manager.fence_after_s
                 + UNREACHABLE_MARGIN_S)
        if now >= until:
            return False
        if self._fence_logged.get(job.id) != a.attempt:
            self._fence_logged[job.id] = a.attempt
            log.info("job=%s: its node stopped answering while it ran; it starts elsewhere "
                     "after %.0f s (its grace period), when any copy there has stopped",
                     job.id, until - now)
        return True

    def start(self, job: JobView, node: NodeView, gpus: list[GpuView], target: Target,
              now: float, *, profiling: bool = False,
              reason: str | None = None) -> set[Trigger]:
        """The attempt row and the job's move, then the container, then its id."""
        previous = job.latest.attempt if job.latest is not None else 0
        new = JobState.PROFILING if profiling else JobState.RUNNING
        attempt = self._open(job, node, gpus, target, now, previous + 1, new, profiling)
        if attempt is None:
            return set()
        number = attempt.attempt
        log.info("start job=%s attempt=%d node=%s gpus=%s decision=%s: %s", job.id, number,
                 node.name, gpu_list(g.index for g in gpus), target.decision_id,
                 reason or target.reasons.get(job.id, "planned"))
        request = StartRequest(job_id=job.id, attempt=number, image=job.image,
                               command=job.command, env=dict(job.env), epochs=job.epochs,
                               gpu_uuids=tuple(g.uuid for g in gpus), fake_gpus=node.fake,
                               grace_s=job.grace_s, restart_count=previous,
                               gpu_milli=job.gpu_milli)
        try:
            cid = self.executor.start(node_ref(node), request)
        except (ContainerConflict, StartUncertain) as e:
            found = self._find_existing(node, job.id, number)
            if found is None:
                if isinstance(e, StartUncertain):
                    log.warning("job=%s attempt=%d node=%s: %s; the next tick adopts its run "
                                "or finds none", job.id, number, node.name, e)
                return set()             # the next tick adopts it or sees it vanished
            cid = found
            log.info("job=%s attempt=%d: container exists already; adopted", job.id, number)
        except ExecutorError as e:
            return self._start_failed(replace(job, state=new), attempt, node, now, e)
        queued = Capability.PENDING in self.executor.capabilities
        with self.store.session() as s:           # an engine that queues: started when it runs
            record_container(s, attempt.id, cid, None if queued else now)
        return set()

    def _open(self, job: JobView, node: NodeView, gpus: list[GpuView], target: Target,
              now: float, number: int, new: JobState, profiling: bool) -> AttemptView | None:
        """Attempt ``number`` and the job's move in one transaction; None on a conflict."""
        try:
            with self.store.session() as s:
                want = (target.profiling if profiling else target.assignments).get(job.id)
                attempt_id = open_attempt(s, job_id=job.id, attempt=number, node_id=node.id,
                                          gpu_ids=[g.index for g in gpus],
                                          decision_id=target.decision_id,
                                          gpu_milli=job.gpu_milli, profiling=profiling,
                                          power_limit_w=(want.power_limit_w if want is not None
                                                         else None))
                if job.state is not new:         # a profiling job's next run: stays profiling
                    transition(s, job.id, new, expected=job.state, now_s=now)
        except TransitionConflict as e:
            log.info("job %s: not started, it changed meanwhile (%s)", job.id,
                     str(e).splitlines()[0])
            return None
        return AttemptView(id=attempt_id, job_id=job.id, attempt=number, node_id=node.id,
                           gpu_ids=tuple(g.index for g in gpus), container_id=None,
                           start_s=None, end_s=None, exit_code=None,
                           decision_id=target.decision_id, stop_decision_id=None,
                           stop_requested_s=None, gpu_milli=job.gpu_milli,
                           profiling=profiling)

    def _start_failed(self, running: JobView, attempt: AttemptView, node: NodeView,
                      now: float, e: ExecutorError) -> set[Trigger]:
        """Record a start the engine refused: failed, preempted, or a counted failure."""
        end = self.closer.end
        if isinstance(e, ImageNotFound | ImageNotAllowed):
            reason = clip(str(e))
            end(running, attempt, now, reason=reason, new=JobState.FAILED, job_reason=reason)
            log.warning("failed job=%s: %s", running.id, reason)
            return {Trigger.FAILED}
        if isinstance(e, ImagePullFailed):
            end(running, attempt, now, reason=clip(f"image pull failed: {e}"),
                new=JobState.PREEMPTED)
            log.warning("job=%s: %s; waits and is retried", running.id, e)
            return set()
        if isinstance(e, NodeUnreachable):
            end(running, attempt, now, reason=UNREACHABLE_REASON, new=JobState.PREEMPTED)
            log.warning("job=%s: node %s unreachable at start (%s); the next tick looks "
                        "at the node", running.id, node.name, e)
            return set()
        max_retries = self.settings.manager.max_retries
        counted = retry(running.failures, max_retries)
        reason = clip(f"start failed: {e}")
        end(running, attempt, now, reason=reason, new=counted.state,
            failures=counted.failures, job_reason=reason if counted.final else None)
        log.warning("job=%s: %s (%d of %d)", running.id, reason, counted.failures,
                    max_retries)
        return {Trigger.FAILED}

    def _image_ready(self, job: JobView, node: NodeView, now: float) -> ImageStatus:
        """The node has the job's image (pulled if needed) before an attempt is recorded.
        A pull failing in a way that may pass (registry down) keeps the job waiting, with
        no attempt and no failure counted, until ``image_pull_grace_s`` has passed since
        the first failure (in this manager's memory); then the job fails with the reason.
        Other errors are left to the start, which records them as today."""
        try:
            self.executor.ensure_image(node_ref(node), job.image)
        except ImagePullFailed as e:
            first = self._pull_failing.setdefault(job.id, now)
            grace = self.settings.manager.image_pull_grace_s
            if now - first < grace:
                if self._pull_logged.get(job.id, -math.inf) + 60.0 <= now:
                    self._pull_logged[job.id] = now
                    log.warning("job=%s waits for its image on node %s (failing for %.0f s "
                                "of %.0f): %s", job.id, node.name, now - first, grace, e)
                return ImageStatus.WAIT
            self.closer.fail_unstarted(job, now,
                                       f"image not available for {grace:.0f} s: {e}")
            self._pull_failing.pop(job.id, None)
            return ImageStatus.FAILED
        except ExecutorError:
            pass                               # the start records it (failed / preempted)
        self._pull_failing.pop(job.id, None)
        self._pull_logged.pop(job.id, None)
        return ImageStatus.READY

    def _find_existing(self, node: NodeView, job_id: str, attempt: int) -> str | None:
        try:
            for c in self.executor.containers(node_ref(node)):
                if c.job_id == job_id and c.attempt == attempt:
                    return c.container_id
        except ExecutorError:
            pass
        return None
