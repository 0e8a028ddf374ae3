"""The Job Manager: rescheduling points turn the store into a plan; ticks make it real.

``Manager.reschedule(trigger)`` builds a snapshot, asks the configured policy, checks the
plan, and writes it as a ``decisions`` row (the plan document of ``plandoc.py``); the
plan becomes the *target* that every :meth:`Manager.tick` reconciles the nodes towards.
Triggers (:class:`~andreas.manager.triggers.Trigger`) are collected during a tick, from
the reconciliation and from other threads (:meth:`Manager.request`, e.g. the period
timer), and answered by one rescheduling.
:meth:`Manager.request` and :meth:`Manager.wake` (the executor's container events) set
:attr:`Manager.wakeup`, so the loop ticks soon instead of at its next poll.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from andreas import policies
from andreas.config import Settings
from andreas.errors import AndreasError, InfeasiblePlan, InputError
from andreas.executor.base import Executor, NodeRef
from andreas.feasibility import check_plan
from andreas.infra.backoff import Backoff
from andreas.manager.decider import Decider, InProcess
from andreas.manager.engine_view import EngineView
from andreas.manager.estimates import Estimator
from andreas.manager.meter import ManagerMeter
from andreas.manager.observe import Observation
from andreas.manager.plandoc import DecisionDoc, Target, plan_document
from andreas.manager.power import Power
from andreas.manager.profiling import Profiling, Review
from andreas.manager.reconcile import Reconciler
from andreas.manager.levels import levels_for_build
from andreas.manager.snapshot import SnapshotBuild, build_snapshot
from andreas.manager.state import StoreState, load_state
from andreas.manager.triggers import Trigger
from andreas.model import Config, Plan
from andreas.store.decisions import add_decision, latest_decision
from andreas.store.engine import Store
from andreas.store.faults import FaultKind, error_kind
from andreas.store.lease import LeaseLost
from andreas.store.jobs import WAITING, fill_predicted_cost
from andreas.store.models import NodeState
from andreas.store.nodes import set_profiling_by_name, states

log = logging.getLogger("andreas.manager")

RESCHEDULE_BACKOFF = Backoff(initial_s=1.0, max_s=60.0)   # after a policy error
POWER_REFRESH_S = 300.0          # the 24-h mean power is re-read at most this often


@dataclass(frozen=True, kw_only=True)
class TickReport:
    """What one tick did: the triggers it saw and the decision it made (if any)."""

    triggers: frozenset[Trigger]
    decision_id: int | None


class Manager:
    """One manager acting on one store through one executor (see the module docstring)."""

    def __init__(self, store: Store, executor: Executor, settings: Settings, *,
                 clock: Callable[[], float] = time.time,
                 rng: np.random.Generator | None = None,
                 estimator: Estimator | None = None, workers: int = 16,
                 fence: Callable[[], None] | None = None,
                 decider: Decider | None = None) -> None:
        self.store = store
        # Renews the manager lease and raises LeaseLost once another manager holds it:
        # called after each observation, before anything is acted on (lock.py).
        self.fence = fence
        self.executor = executor
        self.settings = settings
        self.clock = clock
        self.rng = rng if rng is not None else np.random.default_rng(settings.manager.seed)
        self.policy_state: dict[str, Any] = {}   # what a stateful policy keeps between decisions
        self._unshared_logged: tuple[str, ...] = ()
        self.estimator = estimator or Estimator(settings.manager,
                                                power_refresh_s=POWER_REFRESH_S)
        self.policy = settings.manager.policy
        self.decider: Decider = decider or InProcess()     # where the policy runs
        self._pool = cf.ThreadPoolExecutor(max_workers=workers,
                                           thread_name_prefix="andreas-engine")
        self.reconciler = Reconciler(store, executor, settings, clock=clock, pool=self._pool)
        self.profiling = Profiling(settings.profiler, self.estimator)
        self.power = Power(store, executor, settings.power, clock=clock, pool=self._pool)
        self.engine_view = EngineView(executor)     # the engine's inventory (Slurm)
        self.review = Review()               # the automatic profiling's latest wants
        self.target = Target()
        self._pending: set[Trigger] = set()
        self._lock = threading.Lock()
        self._schedulable: frozenset[str] | None = None
        self._retry_after = 0.0
        self._failures = 0
        self._revisited: int | None = None   # the decision whose revisit_s was acted on
        self._target_loaded = False
        self.wakeup = threading.Event()      # set: the loop should tick soon
        self.prompt = threading.Event()      # set with it: without waiting for a burst
        self.meter = ManagerMeter(self.policy)   # read by the metrics exporter

    # ------------------------------------------------------------------ triggers

    def request(self, *triggers: str) -> None:
        """Ask for a rescheduling at the next tick, and wake the loop so that tick comes
        soon (thread-safe; several become one). Each is a :class:`Trigger`'s value."""
        self._defer(*(Trigger(t) for t in triggers))
        self.wakeup.set()

    def wake(self, why: str = "") -> None:
        """Tick soon (e.g. a container event on node ``why``); only a hint: the tick
        reads the store and the containers as always."""
        self.wakeup.set()

    def wake_now(self, why: str = "") -> None:
        """Tick as soon as ticks may start (a submission or cancellation ``why``: one
        hint per command, not a burst to wait out); a hint like :meth:`wake`."""
        self.prompt.set()
        self.wakeup.set()

    def watched_nodes(self) -> list[NodeRef]:
        """The nodes whose containers the last tick read (for the executor's watch), but
        those the power-down is switching off."""
        off = self.power.unwatched
        return [ref for ref in self.reconciler.polled if ref.name not in off]

    def _defer(self, *triggers: Trigger) -> None:
        """A rescheduling at the next tick, without waking the loop (from inside a tick:
        a back-off or a retry must not make the loop spin)."""
        with self._lock:
            self._pending.update(triggers)

    def _take_pending(self) -> set[Trigger]:
        with self._lock:
            out, self._pending = self._pending, set()
        return out

    def mark_profiling_nodes(self) -> None:
        """Set the profiling mark of every ``[profiler] nodes`` entry (InputError naming
        an unknown one: a typo must not leave a node in production)."""
        names = self.settings.profiler.nodes
        if not names:
            return
        with self.store.session() as s:
            known = states(s)
            for name in names:
                if name not in known:
                    raise InputError(f"[profiler] nodes: unknown node {name!r} (known: "
                                     f"{', '.join(sorted(known)) or 'none'})",
                                     field="profiler.nodes")
            for name in names:
                if set_profiling_by_name(s, name, True) is False:
                    log.info("node %s: marked profiling ([profiler] nodes)", name)

    # ------------------------------------------------------------------ target

    def load_target(self) -> Target:
        """The latest decision's plan (after a restart: what the previous manager wanted)."""
        with self.store.session() as s:
            latest = latest_decision(s)
            nodes = states(s)
        self.target = (Target.from_doc(latest.id, latest.plan) if latest is not None
                       else Target())
        self.meter.target(latest.plan if latest is not None else None)
        self.reconciler.unreachable = {n for n in self.target.unreachable
                                       if nodes.get(n) is NodeState.DOWN}
        self._target_loaded = True
        return self.target

    # ------------------------------------------------------------------ decide

    def review_profiling(self, state: StoreState) -> Review:
        """The automatic profiling's wants (``andreas.manager.profiling``); a failure is
        logged and leaves nothing held back (jobs are planned as without profiling)."""
        try:
            with self.store.session() as s:
                self.review = self.profiling.review(s, state, self.clock(),
                                                    unreachable=self.reconciler.unreachable)
        except Exception as e:       # profiling refines estimates, never blocks plans
            if isinstance(e, LeaseLost) or error_kind(e) is FaultKind.TRANSIENT:
                raise
            log.exception("automatic profiling: review failed; planning without it")
            self.profiling.forget()
            self.review = Review()
        return self.review

    def reschedule(self, trigger: str, *, state: StoreState | None = None) -> int | None:
        """Snapshot -> policy -> checked plan -> decision row (the new target); its id.

        Fills ``jobs.predicted_cost`` where it is still NULL at a job's first assignment.
        A policy error or an infeasible plan keeps the old target (logged) and returns None.
        """
        now = self.clock()
        if state is None:
            state = self._load_state()
            self.review_profiling(state)
        review = self.review
        waking = self.power.plannable(state, NodeState.WAKING)
        first = self._plan(trigger, state, review, now, wake=waking)
        if first is None:
            return None
        build, plan, snapshot_s, decide_s = first
        left = len(plan.postponed) + len(build.unrunnable)
        off = self.power.plannable(state, NodeState.OFF) if left else frozenset()
        if off:     # the nodes that are on cannot take every job: may switching on help?
            second = self._plan(trigger, state, review, now, wake=waking | off)
            if second is not None:
                snapshot_s, decide_s = snapshot_s + second[2], decide_s + second[3]
                if len(second[1].postponed) + len(second[0].unrunnable) < left:
                    build, plan = second[0], second[1]
        snap = build.snapshot
        doc = self._document(build, plan, review, state,
                             stats={"jobs": len(snap.jobs), "nodes": len(snap.nodes),
                                    "snapshot_s": snapshot_s, "decide_s": decide_s})
        costs = {a["job"]: a["predicted_cost"] for a in doc["assignments"]
                 if a["predicted_cost"] is not None
                 and state.jobs.get(a["job"]) is not None
                 and state.jobs[a["job"]].predicted_cost is None}
        with self.store.session() as s:
            decision_id = add_decision(
                s, t=now, trigger=trigger, policy=self.policy,
                objective=plan.objective if math.isfinite(plan.objective) else None,
                objective_name=plan.objective_name, seconds=decide_s, plan=doc)
            fill_predicted_cost(s, costs)
        self.target = Target.from_doc(decision_id, doc)
        self.meter.decision(seconds=decide_s, objective=plan.objective,
                            objective_name=plan.objective_name, t=now, doc=doc)
        self._log_decision(decision_id, trigger, doc, build, plan, decide_s)
        return decision_id

    def _document(self, build: SnapshotBuild, plan: Plan, review: Review, state: StoreState,
                  *, stats: dict[str, Any]) -> DecisionDoc:
        """The plan document, with what the snapshot left out and the profiling's runs."""
        held = tuple(j for j in review.held if j in state.jobs)
        return plan_document(build.snapshot, plan, build.curves,
                             extra_postponed=(*build.unrunnable, *held),
                             extra_reasons={**{j: f"wait: a GPU share, and policy "
                                               f"{self.policy} plans whole GPUs only"
                                               for j in build.unshared},
                                            **review.held},
                             profiling=tuple(
                                 {"job": st.job, "node": st.node, "gpus": st.gpus,
                                  "reason": st.reason, "start": st.job in review.starts,
                                  **({"power_limit_w": st.power_limit_w}
                                     if st.power_limit_w is not None else {})}
                                 for st in review.steps.values()),
                             sources={(app, t, g + 1): (e.source, e.confidence)
                                      for (app, t), est in build.epochs.items()
                                      for g, e in enumerate(est)},
                             pinned=build.pinned,
                             unreachable=tuple(self.reconciler.unreachable),
                             tariff_path=self.settings.manager.tariff, stats=stats)

    def _log_decision(self, decision_id: int, trigger: str, doc: DecisionDoc,
                      build: SnapshotBuild, plan: Plan, decide_s: float) -> None:
        counts: dict[str, int] = {}
        for a in doc["actions"]:
            counts[a["kind"]] = counts.get(a["kind"], 0) + 1
        snap = build.snapshot
        log.info("decision %d (%s, %s): %d jobs on %d nodes, %s; %s %s in %.3f s",
                 decision_id, trigger, self.policy, len(snap.jobs) + len(build.unrunnable),
                 len(snap.nodes), ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                 or "nothing to do", plan.objective_name,
                 f"{plan.objective:.6g}" if math.isfinite(plan.objective) else "-", decide_s)


    def _plan(self, trigger: str, state: StoreState, review: Review, now: float, *,
              wake: frozenset[str]) -> tuple[SnapshotBuild, Plan, float, float] | None:
        """Snapshot (with the ``off`` / ``waking`` nodes in ``wake`` offered) -> policy ->
        checked plan, and the seconds each took; None after a logged policy error."""
        t0 = time.perf_counter()
        with self.store.session() as s:
            build = build_snapshot(s, state, self.estimator, self.settings.manager, now,
                                   unreachable=self.reconciler.unreachable,
                                   shares=policies.get(self.policy).plans_demands,
                                   held=(*review.held, *review.starts), wake=wake)
            if self.settings.manager.power_levels:      # GPU power limits (issue 30)
                build = levels_for_build(s, build, state, self.estimator.profiles)
        if build.unshared and build.unshared != self._unshared_logged:
            self._unshared_logged = build.unshared
            log.warning("policy %s plans whole GPUs only: %d job(s) with a GPU share wait "
                        "(%s); use rg, greedy or an ojpp-* policy to run them", self.policy,
                        len(build.unshared), ", ".join(build.unshared[:5])
                        + (", ..." if len(build.unshared) > 5 else ""))
        snap = build.snapshot
        snapshot_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        if snap.nodes and snap.jobs:
            try:
                kept = self.policy_state if policies.get(self.policy).stateful else None
                plan, self.rng = self.decider.decide(snap, self.rng, self.policy, kept)
                check_plan(snap, plan)
            except (AndreasError, ValueError) as e:
                kind = "infeasible plan" if isinstance(e, InfeasiblePlan) else "policy error"
                log.error("rescheduling (%s): %s from policy %s: %s; keeping decision %s",
                          trigger, kind, self.policy, e, self.target.decision_id)
                self.meter.decision_failed()
                return None
        else:
            plan = Plan(policy=self.policy, assignments=(),
                        postponed=tuple(j.id for j in snap.jobs), objective=math.nan,
                        objective_name="none", stats={"jobs": len(snap.jobs)})
        return build, plan, snapshot_s, time.perf_counter() - t1

    # ------------------------------------------------------------------ ticks

    def start(self) -> TickReport:
        """At daemon start (after :meth:`mark_profiling_nodes`): read the previous
        target, reconcile, reschedule, apply."""
        self.load_target()
        self.power.warn_left_off()
        self._defer(Trigger.START)
        return self.tick()

    def tick(self) -> TickReport:
        """One reconciliation pass, with at most one rescheduling (debounced triggers)."""
        try:
            report = self._tick()
        except Exception:
            self.meter.tick(failed=True)
            raise
        self.meter.tick(failed=False)
        return report

    def _tick(self) -> TickReport:
        if not self._target_loaded:
            self.load_target()
        rec, written = self.reconciler, self.store.writes()
        obs = rec.observe()
        if self.fence is not None:
            self.fence()         # what was observed was written under this lease (or before)
        triggers = rec.settle(obs)
        state = self._settled_state(obs, written)
        triggers |= self.engine_view.refresh(state)
        state = self.engine_view.apply(state)
        review = self.review_profiling(state)
        if review.changed:
            triggers.add(Trigger.PROFILE)
            state = self._load_state()
            review = self.review_profiling(state)
        if any(self.target.profiling.get(j) != Config(node=st.node, gpus=st.gpus,
                                                      power_limit_w=st.power_limit_w)
               for j, st in review.starts.items()):
            triggers.add(Trigger.PROFILE)
        triggers |= self._take_pending()
        revisit = self.target.revisit_s
        if (revisit is not None and self.clock() >= revisit
                and self._revisited != self.target.decision_id):
            self._revisited = self.target.decision_id     # once per decision
            triggers.add(Trigger.REVISIT)
        if any(j.state in WAITING and not self.target.covers(j.id) for j in state.jobs.values()):
            triggers.add(Trigger.SUBMIT)
        now_schedulable = frozenset(
            n.name for n in state.nodes.values()
            if n.state is NodeState.UP and not n.profiling and n.name not in rec.unreachable)
        if self._schedulable is not None:
            if self._schedulable - now_schedulable:
                triggers.add(Trigger.NODE_DOWN)
            if now_schedulable - self._schedulable:
                triggers.add(Trigger.NODE_UP)
        self._schedulable = now_schedulable
        decision_id = None
        if Trigger.PERIOD in triggers:
            self.refresh_models()
        if triggers:
            decision_id = self._reschedule_debounced(triggers, state)
        more = rec.apply(self.target, obs, state, profiling=review)
        if self.power.enabled:
            with self.store.session() as s:
                after = load_state(s)       # with the attempts this tick opened
            more |= self.power.step(after, self.target, unreachable=rec.unreachable,
                                    answered={name: not any(c.running for c in cs)
                                              for name, cs in obs.containers.items()})
        if more:
            self._defer(*more)
        return TickReport(triggers=frozenset(triggers), decision_id=decision_id)

    def _settled_state(self, obs: Observation, written: int) -> StoreState:
        """The store after settling: the observed one when this process wrote nothing
        since ``written`` was counted (before observing), else read again."""
        if self.store.writes() == written:
            return obs.state
        with self.store.session() as s:
            return load_state(s)

    def _load_state(self) -> StoreState:
        """The store, with the GPUs the engine holds back marked (``engine_view``)."""
        with self.store.session() as s:
            state = load_state(s)
        return self.engine_view.apply(state)

    def refresh_models(self) -> int:
        """At every period H: the Job Profiler's runtime models refitted from production
        epochs, recent ones weighing more (``andreas.profiler.store.refresh_models``), so
        the GPU counts a job has not run on are predicted from what jobs really did. A
        failure is logged and the rescheduling goes on with the models as they were.
        Returns the number of (application, GPU type) models refitted."""
        from andreas.profiler.store import refresh_models

        prior = {name: app.serial_fraction for name, app in self.estimator.profiles.apps.items()}
        try:
            with self.store.session() as s:
                done = refresh_models(s, self.clock(), prior_serial=prior)
        except Exception as e:  # noqa: BLE001 - models are a refinement, never a blocker
            log.warning("refitting the runtime models from production epochs failed: %s", e)
            return 0
        if done:
            log.info("runtime models refitted from production epochs: %s",
                     ", ".join(f"{r.app}/{r.gpu_type}" for r in done))
        return len(done)

    def _reschedule_debounced(self, triggers: set[Trigger], state: StoreState) -> int | None:
        now = self.clock()
        if now < self._retry_after:
            self._defer(*triggers)
            return None
        label = "+".join(sorted(triggers))
        try:
            decision_id = self.reschedule(label[:32], state=state)
        except LeaseLost:
            raise
        except Exception as e:
            if error_kind(e) is FaultKind.TRANSIENT:
                self._defer(*triggers)
                raise                         # the database is away: the loop probes it
            decision_id = None
            self.meter.decision_failed()
            log.exception("rescheduling (%s) failed", label)
        if decision_id is None:
            self._failures += 1
            self._retry_after = now + RESCHEDULE_BACKOFF.delay_s(self._failures)
            self._defer(*triggers)
        else:
            self._failures = 0
            self._retry_after = 0.0
        return decision_id

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.decider.close()
        self.executor.close()

