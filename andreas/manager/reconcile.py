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
whole tick: docs/design/manager.md, "Tick". Beside this module: ``observe.py``,
``starting.py`` (a start and its checks), ``stopping.py``, ``closing.py`` (ending attempts).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections.abc import Callable, Mapping

from andreas.config import Settings
from andreas.executor.base import ContainerState, Executor, NodeRef
from andreas.manager.closing import UNREACHABLE_REASON, Closer, clip
from andreas.manager.exits import ExitKind, classify_exit
from andreas.manager.levels import AttemptLimits
from andreas.manager.observe import PROBE_BACKOFF_S, Observation, Observer
from andreas.manager.plandoc import Target
from andreas.manager.profiling import Review
from andreas.manager.queued import QueuedRuns
from andreas.manager.snapshot import schedulable
from andreas.manager.starting import Starter, choose_gpus, gpu_list
from andreas.manager.state import StoreState, node_ref
from andreas.manager.stopping import Stopper
from andreas.manager.triggers import Trigger
from andreas.model import GPU_MILLI, Config
from andreas.store.attempts import note_ran_on, record_container, request_stop
from andreas.store.engine import Store
from andreas.store.errors import TransitionConflict
from andreas.store.jobs import LIVE, TERMINAL, WAITING, transition
from andreas.store.models import JobState, NodeState
from andreas.store.nodes import move_if
from andreas.store.read import AttemptView, JobView, NodeView

log = logging.getLogger("andreas.manager")

RAN_ON_MARGIN_S = 1.0        # an exit this long after its attempt ended "ran on"

InUse = dict[str, dict[int, int]]     # node -> GPU index -> milli-GPU held


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
        self.unreachable: set[str] = set()        # nodes this manager marked down
        self.observer = Observer(store, executor, settings, clock=clock, pool=self.pool,
                                 probe_backoff_s=probe_backoff_s)
        self.closer = Closer(store, clock)
        self.starter = Starter(store, executor, settings, self.closer)
        self.stopper = Stopper(store, executor, settings)
        self.limits = AttemptLimits(store)          # GPU power limits of running attempts
        self.queued = QueuedRuns(store, executor, settings)

    @property
    def max_retries(self) -> int:
        return self.settings.manager.max_retries

    @property
    def polled(self) -> tuple[NodeRef, ...]:
        """The nodes the last observe read."""
        return self.observer.polled

    def observe(self) -> Observation:
        return self.observer.observe(self.unreachable)

    # ------------------------------------------------------------------ settle

    def settle(self, obs: Observation) -> set[Trigger]:
        """Nodes down/up, exits, adoption, orphans, vanished containers; returns triggers."""
        triggers: set[Trigger] = set()
        state = obs.state
        for name in obs.recovered:
            node = state.nodes[name]
            with self.store.session() as s:
                move_if(s, node.id, NodeState.DOWN, NodeState.UP)
            self.unreachable.discard(name)
            self.observer.probe_after.pop(name, None)
            log.info("node %s: engine answers again; marked up", name)
            triggers.add(Trigger.NODE_UP)
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

    def _node_unreachable(self, obs: Observation, node: NodeView, why: str) -> set[Trigger]:
        triggers = set()
        if node.state is NodeState.UP:
            with self.store.session() as s:
                move_if(s, node.id, NodeState.UP, NodeState.DOWN)
            self.unreachable.add(node.name)
            self.observer.probe_after[node.name] = obs.now_s + self.observer.probe_backoff_s
            log.warning("node %s: engine unreachable (%s); marked down, its jobs will be "
                        "planned elsewhere", node.name, why)
            triggers.add(Trigger.NODE_DOWN)
        for job, a in self._open_on(obs.state, node):
            self.closer.end(job, a, obs.now_s, reason=UNREACHABLE_REASON,
                      new=JobState.PREEMPTED if job.state in LIVE else None)
            log.info("preempted job=%s attempt=%d node=%s: node unreachable", job.id,
                     a.attempt, node.name)
            triggers.add(Trigger.NODE_DOWN)
        return triggers

    @staticmethod
    def _open_on(state: StoreState, node: NodeView) -> list[tuple[JobView, AttemptView]]:
        return [(j, a) for j in state.jobs.values() for a in j.open_attempts
                if a.node_id == node.id]

    def _settle_node(self, obs: Observation, node: NodeView,
                     containers: list[ContainerState]) -> set[Trigger]:
        """The node's open attempts against its containers, then the containers no open
        attempt owns."""
        triggers: set[Trigger] = set()
        by_key = {(c.job_id, c.attempt): c for c in containers}
        mine: set[tuple[str, int]] = set()
        for job, a in self._open_on(obs.state, node):
            mine.add((job.id, a.attempt))
            triggers |= self._settle_attempt(job, a, node, by_key.get((job.id, a.attempt)),
                                             obs.now_s)
        for c in containers:
            if (c.job_id, c.attempt) not in mine:
                self._settle_other(obs, node, c)
        live = {(n, c.container_id) for n, cs in obs.containers.items() for c in cs
                if c.running}
        self.stopper.forget_orphans(node.name, live)
        return triggers

    def _settle_attempt(self, job: JobView, a: AttemptView, node: NodeView,
                        c: ContainerState | None, now: float) -> set[Trigger]:
        """One open attempt: vanished, pending, running (adopted) or exited."""
        if c is None:
            never = a.container_id is None and a.start_s is None
            reason = "container never started" if never else "container vanished"
            self.closer.end(job, a, now, reason=reason,
                      new=JobState.PREEMPTED if job.state in LIVE else None)
            log.warning("job=%s attempt=%d node=%s: %s; %s", job.id, a.attempt, node.name,
                        reason, "preempted" if job.state in LIVE else "attempt closed")
            return {Trigger.FAILED}
        if c.pending:
            return self.queued.pending(job, a, node, c, now, end=self.closer.end)
        if c.running:
            if a.container_id != c.container_id or a.start_s is None:
                self._adopt(job, a, c, now)
            self.queued.engine_gpus(job, a, node, c)
            if job.state in TERMINAL:
                self.stopper.stop_terminal(job, a, node, c, now)
            return set()
        if c.started_s is None and c.finished_s is None and not c.exit_code:
            self.stopper.safe_remove(node, c)
            self.closer.end(job, a, now, reason="container never started",
                      new=JobState.PREEMPTED if job.state in LIVE else None)
            log.warning("job=%s attempt=%d node=%s: container created but never started; "
                        "removed", job.id, a.attempt, node.name)
            return set()
        return self._record_exit(job, a, node, c, now)

    def _settle_other(self, obs: Observation, node: NodeView, c: ContainerState) -> None:
        """A container no open attempt owns: stopped when it runs, removed when it is
        superseded or expired."""
        now = obs.now_s
        job = obs.job(c.job_id)
        latest = job.latest.attempt if job is not None and job.latest else 0
        if c.running:
            if node.profiling:
                return              # the Job Profiler's containers are not ours to stop
            why = ("unknown job" if job is None
                   else f"job is {job.state.value}" if job.state in TERMINAL
                   else f"stale attempt {c.attempt} (latest {latest})")
            self.stopper.stop_orphan(node, c, job, why, now)
        elif job is None:
            return
        elif not self._ran_on(job, c, node) and c.attempt < latest:
            if self.stopper.remove_keeping_log(node, c, job, now):
                log.info("removed container %s (job=%s attempt=%d, superseded by attempt "
                         "%d)", c.name, c.job_id, c.attempt, latest)
        elif self.stopper.expired(job, c, now):
            if self.stopper.remove_keeping_log(node, c, job, now):
                log.info("removed container %s (job=%s attempt=%d): exited more than "
                         "%.0f s ago; the end of its log is kept in the store", c.name,
                         c.job_id, c.attempt, self.settings.executor.keep_exited_s)
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
                noted = note_ran_on(s, a.id, exit_code=c.exit_code, reason=clip(
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
                     now: float) -> set[Trigger]:
        code = c.exit_code if c.exit_code is not None else -1
        end_s = c.finished_s if c.finished_s is not None else now
        where = f"job={job.id} attempt={a.attempt} node={node.name}"
        if a.start_s is None and c.started_s is not None:    # it ran between two looks
            with self.store.session() as s:
                record_container(s, a.id, c.container_id, c.started_s)
        if job.state not in LIVE:
            self.closer.end(job, a, end_s, exit_code=code,
                            reason=f"exit {code} ({job.state.value})")
            log.info("%s: exited %d (job %s)", where, code, job.state.value)
            return set()
        requested = a.stop_requested_s is not None
        out = classify_exit(code, oom_killed=c.oom_killed, stop_requested=requested,
                            failures=job.failures, max_retries=self.max_retries)
        if out.kind is ExitKind.COMPLETED:
            self.closer.end(job, a, end_s, exit_code=0, reason=out.reason, new=out.state,
                      epochs_done=job.epochs)
            log.info("completed %s", where)
            return {Trigger.COMPLETE}
        if out.kind is ExitKind.RESUMABLE:
            # a profiling run stopped for its next GPU count: the job stays profiling
            self.closer.end(job, a, end_s, exit_code=code, reason=out.reason,
                      new=None if job.state is JobState.PROFILING and requested else out.state)
            log.info("preempted %s: %s", where, out.reason)
            return set() if requested else {Trigger.FAILED}
        counted = out.retry
        assert counted is not None                       # a failure always counts
        tail = _tail(self.executor.log_tail(node_ref(node), c.container_id, 20))
        reason = clip(f"{out.reason}: {tail}" if tail else out.reason)
        self.closer.end(job, a, end_s, exit_code=code, reason=reason, new=out.state,
                  failures=counted.failures, job_reason=reason if counted.final else None)
        if counted.final:
            log.warning("failed %s after %d failures: %s", where, counted.failures, reason)
        else:
            log.warning("%s: %s; retry %d of %d from the checkpoint", where, reason,
                        counted.failures, self.max_retries)
        return {Trigger.FAILED}

    # ------------------------------------------------------------------ apply

    def apply(self, target: Target, obs: Observation, state: StoreState, *,
              profiling: Review | None = None) -> set[Trigger]:
        """Stop what runs against the target, kill what outstayed its grace, start what
        the target places on free GPUs. ``state``: the store after :meth:`settle`;
        ``profiling``: the automatic profiling's runs to stop, and to start where the
        target has them too (the decision records every start)."""
        now = self.clock()
        triggers: set[Trigger] = set()
        in_use = self._in_use(obs, state)
        found = {(c.job_id, c.attempt): c.container_id for cs in obs.containers.values()
                 for c in cs}
        polled = set(obs.containers)
        for job in list(state.jobs.values()):
            a = job.latest
            if a is None or not a.open:
                continue
            node = state.node_of(a)
            if node is not None and node.name in polled:
                self._stop_against(target, job, a, node, found, now, profiling)
        running = obs.running_jobs()
        for job_id in target.order:
            triggers |= self._start_planned(target, state, job_id, running, polled, in_use,
                                            now)
        for job_id, step in (profiling.starts.items() if profiling is not None else ()):
            want = target.profiling.get(job_id)
            if (want is not None and job_id not in running
                    and want == Config(node=step.node, gpus=step.gpus,
                                       power_limit_w=step.power_limit_w)):
                triggers |= self._start_profiling(target, state, job_id, want, step.reason,
                                                  polled, in_use, now)
        return triggers

    @staticmethod
    def _in_use(obs: Observation, state: StoreState) -> InUse:
        """Milli-GPU held per GPU: by open attempts, and by running containers no open
        attempt owns (a stale container still holds its GPUs until it stops)."""
        in_use: InUse = {n: {} for n in state.nodes}
        attempts = set()
        for job in state.jobs.values():
            for a in job.open_attempts:
                node = state.node_of(a)
                if node is not None:
                    attempts.add((job.id, a.attempt))
                    for i, m in a.held_milli().items():
                        in_use[node.name][i] = in_use[node.name].get(i, 0) + m
        for name, cs in obs.containers.items():
            found = state.nodes.get(name)
            for c in cs:
                if c.running and found is not None and (c.job_id, c.attempt) not in attempts:
                    for u in c.gpu_uuids:
                        if (k := found.index_of(u)) is not None:
                            in_use[name][k] = GPU_MILLI
        return in_use

    def _stop_against(self, target: Target, job: JobView, a: AttemptView, node: NodeView,
                      found: Mapping[tuple[str, int], str], now: float,
                      profiling: Review | None) -> None:
        """An open latest attempt on a polled node: stopped when the target (or the
        profiling) wants it elsewhere, signalled again while it stops."""
        signal = self.stopper.signal_preempting
        if job.state is JobState.RUNNING and schedulable(node, self.unreachable):
            why = self._stop_reason(target, job, a, node)
            if why is None:
                self.limits.follow(job, a, target)    # a new limit, applied in place
            if why is not None and self._request_stop(job, a, target, now):
                log.info("stop job=%s attempt=%d node=%s gpus=%s decision=%s: %s",
                         job.id, a.attempt, node.name, gpu_list(a.gpu_ids),
                         target.decision_id, why)
                signal(job, a, node, found, now, since_s=now)
        elif job.state is JobState.PREEMPTING:
            signal(job, a, node, found, now, since_s=a.stop_requested_s)
        elif job.state is JobState.PROFILING and a.profiling:
            why = profiling.stops.get(job.id) if profiling is not None else None
            if a.stop_requested_s is not None:
                signal(job, a, node, found, now, since_s=a.stop_requested_s)
            elif why is not None:
                with self.store.session() as s:
                    request_stop(s, a.id, now, target.decision_id)
                log.info("stop job=%s attempt=%d node=%s (profiling): %s", job.id,
                         a.attempt, node.name, why)
                signal(job, a, node, found, now, since_s=now)

    def _start_planned(self, target: Target, state: StoreState, job_id: str,
                       running: set[str], polled: set[str], in_use: InUse,
                       now: float) -> set[Trigger]:
        """A waiting job the target places, on free GPUs of a schedulable node."""
        triggers: set[Trigger] = set()
        job = state.jobs.get(job_id)
        if job is None or job.state not in WAITING or job_id in running:
            return triggers
        want = target.assignments[job_id]
        node = state.nodes.get(want.node)
        if node is None or node.name not in polled or not schedulable(node, self.unreachable):
            return triggers
        chosen = choose_gpus(node.usable, in_use[node.name], want, job.gpu_milli)
        if chosen is None or not self.starter.may_start(job, node, now, triggers):
            return triggers
        share = job.gpu_milli if job.gpu_milli is not None else GPU_MILLI
        for g in chosen:
            in_use[node.name][g.index] = in_use[node.name].get(g.index, 0) + share
        return triggers | self.starter.start(job, node, chosen, target, now)

    def _start_profiling(self, target: Target, state: StoreState, job_id: str, want: Config,
                         reason: str, polled: set[str], in_use: InUse,
                         now: float) -> set[Trigger]:
        """A profiling run the review starts and the target records, on a profiling node."""
        triggers: set[Trigger] = set()
        job = state.jobs.get(job_id)
        if (job is None or job.open_attempts
                or job.state not in (*WAITING, JobState.PROFILING)):
            return triggers
        node = state.nodes.get(want.node)
        if (node is None or node.name not in polled or node.state is not NodeState.UP
                or not node.profiling or node.name in self.unreachable):
            return triggers
        chosen = choose_gpus(node.usable, in_use[node.name], want, None)
        if chosen is None or not self.starter.may_start(job, node, now, triggers):
            return triggers
        for g in chosen:
            in_use[node.name][g.index] = GPU_MILLI
        return triggers | self.starter.start(job, node, chosen, target, now, profiling=True,
                                             reason=reason)

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
