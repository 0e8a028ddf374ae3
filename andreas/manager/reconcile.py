"""Desired-state reconciliation: make the containers on the nodes match the latest plan.

One pass (a *tick*) has three phases; each reads what is there and acts on the
difference, so running it twice in a row changes nothing the second time:

- :meth:`Reconciler.observe`: the store (nodes, jobs, attempts) and, in a thread pool, the
  labelled containers of every node that matters (up or draining, or with an open attempt).
  Nodes the manager marked down itself are probed in the background with back-off.
- :meth:`Reconciler.settle`: (a) a node that does not answer is marked down (once) and
  its open attempts end ("node unreachable"), their jobs preempted so they are planned
  elsewhere from their checkpoints (a job whose container had started waits its grace
  period first: a stopping engine stops its copy meanwhile); one that answers again is
  marked up. (b) Exits are recorded as :mod:`andreas.manager.exits` classifies them
  (completed, resumable, or a failure retried from the checkpoint until failures exceed
  ``max_retries``, with the exit code and the tail of the log as reason). Exited containers
  of earlier attempts are removed at once, those of finished attempts
  ``[executor] keep_exited_s`` after they ended; the end of the log is kept in the store
  first (``andreas logs`` reads it there once the container is gone). (c) A running
  container of a job's open latest attempt is adopted; any other running container
  (unknown job, stale attempt) is stopped, as is the container of a cancelled job; an
  open attempt whose container vanished from a reachable engine ends and its job is
  preempted (this also repairs a crash between the attempt's transaction and the start).
  (d) An engine that queues (Slurm) may keep an attempt *pending*: its reason is noted on
  the attempt, and past ``[executor] pending_timeout_s`` it is cancelled and its job
  planned again; once it runs, the GPUs the engine chose replace the planned ones
  (Capability.PICKS_GPUS). A node whose engine as a whole does not answer
  (EngineUnavailable: the Slurm controller) is left alone for the tick, not marked down.
- :meth:`Reconciler.apply`: a running job whose target differs (another node, another g,
  postponed) gets a stop request: recorded first (``stop_requested_s``, running ->
  preempting), then SIGTERM; SIGKILL once its grace period has passed since the recorded
  request (the deadline survives a manager restart). A waiting job with a target starts
  when the target node has enough free usable GPUs: the attempt row and running state in
  one transaction, then the container, then its id.

Free GPUs of a node = usable GPUs held neither by an open attempt nor by a running
labelled container, so a node is never over capacity, even while a stale container stops;
shared GPUs are counted in milli-GPU (docs/design/sharing.md, "In the real system"). The
whole tick, step by step: docs/design/manager.md, "Tick".
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from andreas.config import Settings
from andreas.limits import REASON_CHARS
from andreas.executor.base import Capability, ContainerState, Executor, NodeRef, StartRequest
from andreas.executor.errors import (ContainerConflict, EngineUnavailable, ExecutorError,
                                     ImageNotAllowed, ImageNotFound, ImagePullFailed,
                                     NodeUnreachable, StartUncertain)
from andreas.manager.exits import ExitKind, classify_exit, retry
from andreas.manager.plandoc import Target
from andreas.manager.queued import QueuedRuns
from andreas.manager.profiling import Review
from andreas.manager.snapshot import schedulable
from andreas.manager.state import StoreState, load_state, node_ref
from andreas.model import GPU_MILLI, Config
from andreas.manager.levels import AttemptLimits
from andreas.store.attempts import (end_attempt, note_ran_on, note_stop, open_attempt,
                                    record_container, request_stop, save_log_tail)
from andreas.store.engine import Store
from andreas.store.errors import TransitionConflict
from andreas.store.jobs import LIVE, TERMINAL, WAITING, record, transition
from andreas.store.models import JobState, NodeState
from andreas.store.nodes import move_if
from andreas.store.read import AttemptView, GpuView, JobView, NodeView, load_jobs

log = logging.getLogger("andreas.manager")

UNREACHABLE_REASON = "node unreachable"
UNREACHABLE_MARGIN_S = 5.0   # beyond grace + fence: the SIGKILL, the exit, clock steps
RAN_ON_MARGIN_S = 1.0        # an exit this long after its attempt ended "ran on"
KEPT_LOG_LINES = 200         # the end of a log kept in the store when its container goes
KEPT_LOG_BYTES = 64 * 1024

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


def _clip(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def _tail(text: str, limit: int = 180) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    joined = " | ".join(lines)
    return joined if len(joined) <= limit else "..." + joined[-limit:]


class Reconciler:
    """Compares the store, the containers and the target; acts on the difference."""

    def __init__(self, store: Store, executor: Executor, settings: Settings, *,
                 clock: Callable[[], float] = time.time,
                 pool: cf.ThreadPoolExecutor | None = None,
                 probe_backoff_s: float = PROBE_BACKOFF_S) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self.clock = clock
        self.pool = pool or cf.ThreadPoolExecutor(max_workers=16,
                                                  thread_name_prefix="andreas-engine")
        self.probe_backoff_s = probe_backoff_s
        self.unreachable: set[str] = set()        # nodes this manager marked down
        self._fence_logged: dict[str, int] = {}   # job -> attempt whose hold was logged
        self.polled: tuple[NodeRef, ...] = ()     # the nodes the last observe read
        self._signalled: set[tuple[str, int | str]] = set()
        self._killed: set[tuple[str, int | str]] = set()
        self._orphans: dict[tuple[str, str], float] = {}
        self._probes: dict[str, cf.Future] = {}
        self._probe_after: dict[str, float] = {}
        self._pull_failing: dict[str, float] = {}   # job -> first failed pull (this process)
        self._pull_logged: dict[str, float] = {}
        self.limits = AttemptLimits(store)          # GPU power limits of running attempts
        self._engine_down: str | None = None        # why the engine did not answer (logged)
        self.queued = QueuedRuns(store, executor, settings)

    @property
    def max_retries(self) -> int:
        return self.settings.manager.max_retries

    # ------------------------------------------------------------------ observe

    def observe(self) -> Observation:
        now = self.clock()
        with self.store.session() as s:
            state = load_state(s)
        open_nodes = {a.node_id for j in state.jobs.values() for a in j.open_attempts}
        polled, probe, forced_down = [], [], []
        for n in state.nodes.values():
            if n.name in self.unreachable and n.state is not NodeState.DOWN:
                self.unreachable.discard(n.name)     # someone else set its state since
            if n.name in self.unreachable and n.id in open_nodes:
                forced_down.append(n.name)   # attempts left open there: close them now
            elif n.name in self.unreachable:
                probe.append(n)
            elif n.id in open_nodes or n.state in (NodeState.UP, NodeState.DRAINING):
                polled.append(n)         # profiling nodes too: the manager profiles there
        self.polled = tuple(node_ref(n) for n in polled)
        futures = {self.pool.submit(self.executor.containers, node_ref(n)): n.name
                   for n in polled}
        for n in probe:
            if n.name not in self._probes and now >= self._probe_after.get(n.name, 0.0):
                self._probes[n.name] = self.pool.submit(self.executor.containers, node_ref(n))
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
        if self._probes:
            cf.wait(list(self._probes.values()), timeout=self.settings.manager.poll_s)
        recovered = []
        for name, future in list(self._probes.items()):
            if not future.done():
                continue
            del self._probes[name]
            if future.exception() is None:
                recovered.append(name)
            else:
                self._probe_after[name] = now + self.probe_backoff_s
        known = set(state.jobs)
        wanted = {c.job_id for cs in containers.values() for c in cs} - known
        others = {}
        if wanted:
            with self.store.session() as s:
                others = load_jobs(s, ids=wanted)
        return Observation(now_s=now, state=state, containers=containers, failed=failed,
                           others=others, recovered=tuple(recovered), unknown=tuple(unknown))

    def _note_engine(self, why: str | None) -> None:
        """One line when the engine stops answering, one when it answers again."""
        if why is not None and self._engine_down is None:
            log.warning("the engine does not answer (%s); nothing is started or stopped "
                        "on its nodes until it does", why)
        elif why is None and self._engine_down is not None:
            log.info("the engine answers again")
        self._engine_down = why

    # ------------------------------------------------------------------ settle

    def settle(self, obs: Observation) -> set[str]:
        """Nodes down/up, exits, adoption, orphans, vanished containers; returns triggers."""
        triggers: set[str] = set()
        state = obs.state
        for name in obs.recovered:
            node = state.nodes[name]
            with self.store.session() as s:
                move_if(s, node.id, NodeState.DOWN, NodeState.UP)
            self.unreachable.discard(name)
            self._probe_after.pop(name, None)
            log.info("node %s: engine answers again; marked up", name)
            triggers.add("node-up")
        for name, why in obs.failed.items():
            triggers |= self._node_unreachable(obs, state.nodes[name], why)
        for name, containers in obs.containers.items():
            triggers |= self._settle_node(obs, state.nodes[name], containers)
        for job in state.jobs.values():
            if job.state in (JobState.RUNNING, JobState.PREEMPTING) and not job.open_attempts:
                try:             # inconsistent (edited by hand?): no attempt runs it
                    with self.store.session() as s:
                        transition(s, job.id, JobState.PREEMPTED, expected=job.state,
                                   now_s=obs.now_s)
                    log.warning("job %s was %s without an open attempt; preempted", job.id,
                                job.state.value)
                except TransitionConflict:
                    pass
        return triggers

    def _node_unreachable(self, obs: Observation, node: NodeView, why: str) -> set[str]:
        triggers = set()
        if node.state is NodeState.UP:
            with self.store.session() as s:
                move_if(s, node.id, NodeState.UP, NodeState.DOWN)
            self.unreachable.add(node.name)
            self._probe_after[node.name] = obs.now_s + self.probe_backoff_s
            log.warning("node %s: engine unreachable (%s); marked down, its jobs will be "
                        "planned elsewhere", node.name, why)
            triggers.add("node-down")
        for job, a in self._open_on(obs.state, node):
            self._end(job, a, obs.now_s, reason=UNREACHABLE_REASON,
                      new=JobState.PREEMPTED if job.state in LIVE else None)
            log.info("preempted job=%s attempt=%d node=%s: node unreachable", job.id,
                     a.attempt, node.name)
            triggers.add("node-down")
        return triggers

    @staticmethod
    def _open_on(state: StoreState, node: NodeView) -> list[tuple[JobView, AttemptView]]:
        return [(j, a) for j in state.jobs.values() for a in j.open_attempts
                if a.node_id == node.id]

    def _settle_node(self, obs: Observation, node: NodeView,
                     containers: list[ContainerState]) -> set[str]:
        triggers: set[str] = set()
        now = obs.now_s
        by_key = {(c.job_id, c.attempt): c for c in containers}
        mine: set[tuple[str, int]] = set()
        for job, a in self._open_on(obs.state, node):
            mine.add((job.id, a.attempt))
            c = by_key.get((job.id, a.attempt))
            if c is None:
                never = a.container_id is None and a.start_s is None
                reason = "container never started" if never else "container vanished"
                self._end(job, a, now, reason=reason,
                          new=JobState.PREEMPTED if job.state in LIVE else None)
                log.warning("job=%s attempt=%d node=%s: %s; %s", job.id, a.attempt, node.name,
                            reason, "preempted" if job.state in LIVE else "attempt closed")
                triggers.add("failed")
            elif c.pending:
                triggers |= self.queued.pending(job, a, node, c, now, end=self._end)
            elif c.running:
                if a.container_id != c.container_id or a.start_s is None:
                    self._adopt(job, a, c, now)
                self.queued.engine_gpus(job, a, node, c)
                if job.state in TERMINAL:
                    self._stop_terminal(job, a, node, c, now)
            elif c.started_s is None and c.finished_s is None and not c.exit_code:
                self._safe_remove(node, c)
                self._end(job, a, now, reason="container never started",
                          new=JobState.PREEMPTED if job.state in LIVE else None)
                log.warning("job=%s attempt=%d node=%s: container created but never started; "
                            "removed", job.id, a.attempt, node.name)
            else:
                triggers |= self._record_exit(job, a, node, c, now)
        for c in containers:
            if (c.job_id, c.attempt) in mine:
                continue
            job = obs.job(c.job_id)  # type: ignore[assignment]  # reused name
            latest = job.latest.attempt if job is not None and job.latest else 0
            if c.running:
                if node.profiling:
                    continue          # the Job Profiler's containers are not ours to stop
                why = ("unknown job" if job is None
                       else f"job is {job.state.value}" if job.state in TERMINAL
                       else f"stale attempt {c.attempt} (latest {latest})")
                self._stop_orphan(node, c, job, why, now)
            elif job is None:
                continue
            elif not self._ran_on(job, c, node) and c.attempt < latest:
                if self._remove_keeping_log(node, c, job, now):
                    log.info("removed container %s (job=%s attempt=%d, superseded by attempt "
                             "%d)", c.name, c.job_id, c.attempt, latest)
            elif self._expired(job, c, now):
                if self._remove_keeping_log(node, c, job, now):
                    log.info("removed container %s (job=%s attempt=%d): exited more than "
                             "%.0f s ago; the end of its log is kept in the store", c.name,
                             c.job_id, c.attempt, self.settings.executor.keep_exited_s)
        live = {(n, c.container_id) for n, cs in obs.containers.items() for c in cs
                if c.running}
        for key in [k for k in self._orphans if k[0] == node.name and k not in live]:
            del self._orphans[key]
        return triggers

    def _ran_on(self, job: JobView, c: ContainerState, node: NodeView) -> bool:
        """Whether this exited container belongs to an attempt the manager ended blind
        (its engine did not answer): kept ``keep_exited_s``, not removed at once, so
        that the node's agent reads the epochs it logged while nobody could; if it ran on
        after that end, reported once, as a warning and in the attempt (exit code,
        reason)."""
        a = next((x for x in job.attempts if x.attempt == c.attempt), None)
        if a is None or a.end_s is None or a.reason is None \
                or not a.reason.startswith(UNREACHABLE_REASON):
            return False
        if c.finished_s is None or c.finished_s <= a.end_s + RAN_ON_MARGIN_S:
            return True
        if a.exit_code is None and c.exit_code is not None:
            ran_s = c.finished_s - a.end_s
            with self.store.session() as s:
                noted = note_ran_on(s, a.id, exit_code=c.exit_code, reason=_clip(
                    f"{a.reason or 'ended'}; ran on {ran_s:.0f} s after (exit {c.exit_code})"))
            if noted:
                log.warning("job=%s attempt=%d node=%s ran on for %.0f s after its attempt "
                            "ended (%s), exit %d; kept %.0f s for its epochs", job.id,
                            a.attempt, node.name, ran_s, a.reason or "ended", c.exit_code,
                            self.settings.executor.keep_exited_s)
        return True

    def _adopt(self, job: JobView, a: AttemptView, c: ContainerState, now: float) -> None:
        with self.store.session() as s:
            record_container(s, a.id, c.container_id,
                             a.start_s if a.start_s is not None
                             else (c.started_s if c.started_s is not None else now))
        log.info("adopted container %s (job=%s attempt=%d)", c.container_id[:12], job.id,
                 a.attempt)

    def _record_exit(self, job: JobView, a: AttemptView, node: NodeView, c: ContainerState,
                     now: float) -> set[str]:
        code = c.exit_code if c.exit_code is not None else -1
        end_s = c.finished_s if c.finished_s is not None else now
        where = f"job={job.id} attempt={a.attempt} node={node.name}"
        if a.start_s is None and c.started_s is not None:    # it ran between two looks
            with self.store.session() as s:
                record_container(s, a.id, c.container_id, c.started_s)
        if job.state not in LIVE:
            self._end(job, a, end_s, exit_code=code, reason=f"exit {code} ({job.state.value})")
            log.info("%s: exited %d (job %s)", where, code, job.state.value)
            return set()
        requested = a.stop_requested_s is not None
        out = classify_exit(code, oom_killed=c.oom_killed, stop_requested=requested,
                            failures=job.failures, max_retries=self.max_retries)
        if out.kind is ExitKind.COMPLETED:
            self._end(job, a, end_s, exit_code=0, reason=out.reason, new=out.state,
                      epochs_done=job.epochs)
            log.info("completed %s", where)
            return {"complete"}
        if out.kind is ExitKind.RESUMABLE:
            # a profiling run stopped for its next GPU count: the job stays profiling
            self._end(job, a, end_s, exit_code=code, reason=out.reason,
                      new=None if job.state is JobState.PROFILING and requested else out.state)
            log.info("preempted %s: %s", where, out.reason)
            return set() if requested else {"failed"}
        counted = out.retry
        assert counted is not None                       # a failure always counts
        tail = _tail(self.executor.log_tail(node_ref(node), c.container_id, 20))
        reason = _clip(f"{out.reason}: {tail}" if tail else out.reason)
        self._end(job, a, end_s, exit_code=code, reason=reason, new=out.state,
                  failures=counted.failures, job_reason=reason if counted.final else None)
        if counted.final:
            log.warning("failed %s after %d failures: %s", where, counted.failures, reason)
        else:
            log.warning("%s: %s; retry %d of %d from the checkpoint", where, reason,
                        counted.failures, self.max_retries)
        return {"failed"}

    def _end(self, job: JobView, a: AttemptView, end_s: float, *, reason: str,
             exit_code: int | None = None, new: JobState | None = None,
             failures: int | None = None, job_reason: str | None = None,
             epochs_done: int | None = None) -> bool:
        """Close an attempt and (optionally) move its job, in one transaction."""
        try:
            with self.store.session() as s:
                end_attempt(s, a.id, end_s, exit_code=exit_code, reason=_clip(reason))
                if new is not None:
                    transition(s, job.id, new, expected=job.state, now_s=self.clock())
                record(s, job.id, failures=failures,
                       reason=_clip(job_reason) if job_reason is not None else None,
                       epochs_done=epochs_done)
            return True
        except TransitionConflict as e:
            log.info("job %s changed meanwhile (%s); will look again", job.id, e)
            return False

    # ------------------------------------------------------------------ stopping

    def _signal(self, node: NodeView, cid: str, key: tuple[str, int | str], since_s: float,
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

    def _stop_terminal(self, job: JobView, a: AttemptView, node: NodeView, c: ContainerState,
                       now: float) -> None:
        since = a.stop_requested_s
        if since is None:
            with self.store.session() as s:
                note_stop(s, a.id, now)
            since = now
        self._signal(node, c.container_id, (job.id, a.attempt), since, job.grace_s, now,
                     f"job={job.id} attempt={a.attempt} ({job.state.value})")

    def _stop_orphan(self, node: NodeView, c: ContainerState, job: JobView | None, why: str,
                     now: float) -> None:
        since = self._orphans.setdefault((node.name, c.container_id), now)
        grace = job.grace_s if job is not None else self.settings.executor.stop_grace_s
        if (c.container_id, "orphan") not in self._signalled:
            log.warning("container %s on node %s (job=%s attempt=%d) is not wanted: %s; "
                        "stopping it", c.name, node.name, c.job_id, c.attempt, why)
        self._signal(node, c.container_id, (c.container_id, "orphan"), since, grace, now,
                     f"orphan {c.name}")

    def _expired(self, job: JobView, c: ContainerState, now: float) -> bool:
        """An exited container of a finished attempt, ``keep_exited_s`` after both ended."""
        a = next((x for x in job.attempts if x.attempt == c.attempt), None)
        if a is None or a.end_s is None:
            return False
        ended = max(a.end_s, c.finished_s if c.finished_s is not None else a.end_s)
        return now - ended >= self.settings.executor.keep_exited_s

    def _remove_keeping_log(self, node: NodeView, c: ContainerState, job: JobView,
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
        return self._safe_remove(node, c)

    def _safe_remove(self, node: NodeView, c: ContainerState) -> bool:
        try:
            self.executor.remove(node_ref(node), c.container_id)
            return True
        except ExecutorError as e:
            log.warning("could not remove container %s on node %s: %s", c.name, node.name, e)
            return False

    # ------------------------------------------------------------------ apply

    def apply(self, target: Target, obs: Observation, state: StoreState, *,
              profiling: Review | None = None) -> set[str]:
        """Stop what runs against the target, kill what outstayed its grace, start what
        the target places on free GPUs. ``state``: the store after :meth:`settle`;
        ``profiling``: the automatic profiling's runs to stop, and to start where the
        target has them too (the decision records every start)."""
        now = self.clock()
        triggers: set[str] = set()
        in_use: dict[str, dict[int, int]] = {n: {} for n in state.nodes}   # milli per GPU
        attempts = set()
        for job in state.jobs.values():
            for a in job.open_attempts:
                node = state.node_of(a)
                if node is not None:
                    attempts.add((job.id, a.attempt))
                    for i, m in a.held_milli().items():
                        in_use[node.name][i] = in_use[node.name].get(i, 0) + m
        for name, cs in obs.containers.items():
            node = state.nodes.get(name)
            for c in cs:
                if c.running and node is not None and (c.job_id, c.attempt) not in attempts:
                    for u in c.gpu_uuids:
                        if (i := node.index_of(u)) is not None:  # type: ignore[assignment]  # reused name
                            in_use[name][i] = GPU_MILLI
        found = {(c.job_id, c.attempt): c.container_id for cs in obs.containers.values()
                 for c in cs}
        polled = set(obs.containers)

        for job in list(state.jobs.values()):
            a = job.latest  # type: ignore[assignment]  # reused name
            if a is None or not a.open:
                continue
            node = state.node_of(a)
            if node is None or node.name not in polled:
                continue
            if job.state is JobState.RUNNING and schedulable(node, self.unreachable):
                why = self._stop_reason(target, job, a, node)
                if why is None:
                    self.limits.follow(job, a, target)    # a new limit, applied in place
                if why is not None and self._request_stop(job, a, target, now):
                    log.info("stop job=%s attempt=%d node=%s gpus=%s decision=%s: %s",
                             job.id, a.attempt, node.name, _gpus(a.gpu_ids),
                             target.decision_id, why)
                    self._signal_preempting(job, a, node, found, now, since_s=now)
            elif job.state is JobState.PREEMPTING:
                self._signal_preempting(job, a, node, found, now, since_s=a.stop_requested_s)
            elif job.state is JobState.PROFILING and a.profiling:
                why = profiling.stops.get(job.id) if profiling is not None else None
                if a.stop_requested_s is not None:
                    self._signal_preempting(job, a, node, found, now,
                                            since_s=a.stop_requested_s)
                elif why is not None:
                    with self.store.session() as s:
                        request_stop(s, a.id, now, target.decision_id)
                    log.info("stop job=%s attempt=%d node=%s (profiling): %s", job.id,
                             a.attempt, node.name, why)
                    self._signal_preempting(job, a, node, found, now, since_s=now)

        running = obs.running_jobs()
        for job_id in target.order:
            job = state.jobs.get(job_id)  # type: ignore[assignment]  # reused name
            if job is None or job.state not in WAITING or job_id in running:
                continue
            want = target.assignments[job_id]
            node = state.nodes.get(want.node)
            if node is None or node.name not in polled or not schedulable(node, self.unreachable):
                continue
            chosen = _choose_gpus(node.usable, in_use[node.name], want, job.gpu_milli)
            if chosen is None or not self._may_start(job, node, now, triggers):
                continue
            share = job.gpu_milli if job.gpu_milli is not None else GPU_MILLI
            for g in chosen:
                in_use[node.name][g.index] = in_use[node.name].get(g.index, 0) + share
            triggers |= self._start(job, node, chosen, target, now)
        for job_id, step in (profiling.starts.items() if profiling is not None else ()):
            job = state.jobs.get(job_id)  # type: ignore[assignment]  # reused name
            want = target.profiling.get(job_id)  # type: ignore[assignment]  # reused name
            if (job is None or want is None
                    or want != Config(node=step.node, gpus=step.gpus,
                                      power_limit_w=step.power_limit_w)
                    or job_id in running or job.open_attempts
                    or job.state not in (*WAITING, JobState.PROFILING)):
                continue
            node = state.nodes.get(want.node)
            if (node is None or node.name not in polled or node.state is not NodeState.UP
                    or not node.profiling or node.name in self.unreachable):
                continue
            chosen = _choose_gpus(node.usable, in_use[node.name], want, None)
            if chosen is None or not self._may_start(job, node, now, triggers):
                continue
            for g in chosen:
                in_use[node.name][g.index] = GPU_MILLI
            triggers |= self._start(job, node, chosen, target, now, profiling=True,
                                    reason=step.reason)
        return triggers

    def _may_start(self, job: JobView, node: NodeView, now: float, triggers: set[str]) -> bool:
        """Whether a start may go ahead now: not held by the fence, and the node has the
        job's image (a failed image adds the ``failed`` trigger)."""
        if self._fenced(job, now):
            return False
        if job.unreadable:                   # never run a job with a guessed command
            self._fail_unstarted(job, now, f"stored {' and '.join(job.unreadable)} "
                                 "unreadable (not valid JSON of the right shape); resubmit")
            triggers.add("failed")
            return False
        image = self._image_ready(job, node, now)
        if image == "failed":
            triggers.add("failed")
        return image == "ready"

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

    @staticmethod
    def _stop_reason(target: Target, job: JobView, a: AttemptView, node: NodeView) -> str | None:
        if job.id in target.postponed:
            return target.reasons.get(job.id) or "preempt: postponed by the policy"
        want = target.assignments.get(job.id)
        if want is not None and want.node == node.name and job.gpu_milli is not None \
                and want.gpu_ids and node.positions(a.gpu_ids) != want.gpu_ids:
            # a share moved to another GPU of its node (ojpap's online adjustment)
            gpu = node.usable[want.gpu_ids[0]].index if want.gpu_ids[0] < len(node.usable) \
                else want.gpu_ids[0]
            return target.reasons.get(job.id) or f"move to GPU {gpu}"
        if want is None or (want.node == node.name and want.gpus == len(a.gpu_ids)):
            return None
        return target.reasons.get(job.id) or (f"move to {want.node}" if want.node != node.name
                                              else f"resize to {want.gpus} GPUs")

    def _request_stop(self, job: JobView, a: AttemptView, target: Target, now: float) -> bool:
        """Record the stop request (deadline) and running -> preempting, before any signal."""
        try:
            with self.store.session() as s:
                request_stop(s, a.id, now, target.decision_id)
                transition(s, job.id, JobState.PREEMPTING, expected=JobState.RUNNING,
                           now_s=now)
            return True
        except TransitionConflict as e:
            log.info("job %s changed meanwhile (%s); not stopped", job.id, e)
            return False

    def _signal_preempting(self, job: JobView, a: AttemptView, node: NodeView,
                           found: Mapping[tuple[str, int], str], now: float,
                           since_s: float | None) -> None:
        cid = a.container_id or found.get((job.id, a.attempt))
        if cid is None:
            return                       # not started yet: adopted (or vanished) next tick
        self._signal(node, cid, (job.id, a.attempt), since_s if since_s is not None else now,
                     job.grace_s, now, f"job={job.id} attempt={a.attempt}")

    def _start(self, job: JobView, node: NodeView, gpus: list[GpuView], target: Target,
               now: float, *, profiling: bool = False, reason: str | None = None) -> set[str]:
        previous = job.latest.attempt if job.latest is not None else 0
        number = previous + 1
        new = JobState.PROFILING if profiling else JobState.RUNNING
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
            return set()
        log.info("start job=%s attempt=%d node=%s gpus=%s decision=%s: %s", job.id, number,
                 node.name, _gpus(g.index for g in gpus), target.decision_id,
                 reason or target.reasons.get(job.id, "planned"))
        request = StartRequest(job_id=job.id, attempt=number, image=job.image,
                               command=job.command, env=dict(job.env), epochs=job.epochs,
                               gpu_uuids=tuple(g.uuid for g in gpus), fake_gpus=node.fake,
                               grace_s=job.grace_s, restart_count=previous,
                               gpu_milli=job.gpu_milli)
        attempt = AttemptView(id=attempt_id, job_id=job.id, attempt=number, node_id=node.id,
                              gpu_ids=tuple(g.index for g in gpus), container_id=None,
                              start_s=None, end_s=None, exit_code=None,
                              decision_id=target.decision_id, stop_decision_id=None,
                              stop_requested_s=None, gpu_milli=job.gpu_milli,
                              profiling=profiling)
        running = _replace_state(job, new)
        try:
            cid = self.executor.start(node_ref(node), request)
        except (ContainerConflict, StartUncertain) as e:
            cid = self._find_existing(node, job.id, number)  # type: ignore[assignment]  # reused name
            if cid is None:
                if isinstance(e, StartUncertain):
                    log.warning("job=%s attempt=%d node=%s: %s; the next tick adopts its run "
                                "or finds none", job.id, number, node.name, e)
                return set()             # the next tick adopts it or sees it vanished
            log.info("job=%s attempt=%d: container exists already; adopted", job.id, number)
        except (ImageNotFound, ImageNotAllowed) as e:
            reason = _clip(str(e))
            self._end(running, attempt, now, reason=reason, new=JobState.FAILED,
                      job_reason=reason)
            log.warning("failed job=%s: %s", job.id, reason)
            return {"failed"}
        except ImagePullFailed as e:
            self._end(running, attempt, now, reason=_clip(f"image pull failed: {e}"),
                      new=JobState.PREEMPTED)
            log.warning("job=%s: %s; waits and is retried", job.id, e)
            return set()
        except NodeUnreachable as e:
            self._end(running, attempt, now, reason=UNREACHABLE_REASON, new=JobState.PREEMPTED)
            log.warning("job=%s: node %s unreachable at start (%s); the next tick looks "
                        "at the node", job.id, node.name, e)
            return set()
        except ExecutorError as e:
            counted = retry(job.failures, self.max_retries)
            reason = _clip(f"start failed: {e}")
            self._end(running, attempt, now, reason=reason, new=counted.state,
                      failures=counted.failures, job_reason=reason if counted.final else None)
            log.warning("job=%s: %s (%d of %d)", job.id, reason, counted.failures,
                        self.max_retries)
            return {"failed"}
        queued = Capability.PENDING in self.executor.capabilities
        with self.store.session() as s:           # an engine that queues: started when it runs
            record_container(s, attempt_id, cid, None if queued else now)
        return set()

    def _image_ready(self, job: JobView, node: NodeView, now: float) -> str:
        """The node has the job's image (pulled if needed) before an attempt is recorded.
        A pull failing in a way that may pass (registry down) keeps the job waiting, with
        no attempt and no failure counted, until ``image_pull_grace_s`` has passed since
        the first failure (in this manager's memory); then the job fails with the reason.
        Other errors are left to the start, which records them as today.
        Returns "ready", "wait" or "failed"."""
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
                return "wait"
            self._fail_unstarted(job, now, f"image not available for {grace:.0f} s: {e}")
            self._pull_failing.pop(job.id, None)
            return "failed"
        except ExecutorError:
            pass                               # the start records it (failed / preempted)
        self._pull_failing.pop(job.id, None)
        self._pull_logged.pop(job.id, None)
        return "ready"

    def _fail_unstarted(self, job: JobView, now: float, why: str) -> None:
        """A job that cannot start, ever: failed with ``why``, no attempt recorded."""
        reason = _clip(why)
        try:
            with self.store.session() as s:
                transition(s, job.id, JobState.FAILED, expected=job.state, now_s=now)
                record(s, job.id, reason=reason)
            log.warning("failed job=%s: %s", job.id, reason)
        except TransitionConflict as c:
            log.info("job %s changed meanwhile (%s)", job.id, c)

    def _find_existing(self, node: NodeView, job_id: str, attempt: int) -> str | None:
        try:
            for c in self.executor.containers(node_ref(node)):
                if c.job_id == job_id and c.attempt == attempt:
                    return c.container_id
        except ExecutorError:
            pass
        return None


def kept_log(raw: bytes, limit: int = KEPT_LOG_BYTES) -> str:
    """The end of a log as text: at most ``limit`` bytes of UTF-8, cut at a line start
    when one is near (a kept log never begins with half a line or half a character)."""
    if len(raw) > limit:
        raw = raw[-limit:]
        cut = raw.find(b"\n")
        if 0 <= cut < 4096:
            raw = raw[cut + 1:]
    return raw.decode("utf-8", "replace")


def _gpus(indexes) -> str:
    return ",".join(str(i) for i in indexes)


def _replace_state(job: JobView, state: JobState) -> JobView:
    return replace(job, state=state)


def _choose_gpus(usable: tuple[GpuView, ...], used: Mapping[int, int], want: Config,
                 share: int | None) -> list[GpuView] | None:
    """The GPUs a start takes (see the module docstring), or None while they are held.
    ``want.gpu_ids``: positions in ``usable`` the plan chose; ``share``: milli-GPU of one
    GPU, None for whole GPUs."""
    need = share if share is not None else GPU_MILLI
    room = [g for g in usable if used.get(g.index, 0) + need <= GPU_MILLI]
    planned = [usable[k] for k in want.gpu_ids if 0 <= k < len(usable)]
    if len(planned) == want.gpus and all(g in room for g in planned):
        return planned
    if share is not None:
        room.sort(key=lambda g: -used.get(g.index, 0))      # fullest first: best fit
    return room[:want.gpus] if len(room) >= want.gpus else None
