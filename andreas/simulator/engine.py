"""Discrete-event simulation of a whole trace under one policy.

It reuses the optimizer and the cost model unchanged and replaces only the agents,
Docker and the clock. Rescheduling points are submissions, completions and (unless
``period_s`` is 0) every period H: ``options.period_s`` if given, else the policy's own
default (``PolicySpec.period_s``: 900 s for the DP baselines, as the paper runs
them), else the trace's ``params.period_s``; and (unless ``options.revisit`` is off)
at the last plan's ``revisit_s``, when one of its jobs could switch to a configuration it
pays less on and still end on time. Between events, each node is charged its
power with its busy GPUs (idle nodes at ``power_w[0]`` unless powered off: with
``power_off_idle`` a node idle for ``power_idle_s`` is off and draws nothing, and a job
placed on an off node switches it on: the node draws ``power_w[0]`` for ``wake_s`` and
the job's work begins after it; the policies do not know about the wake-up) times PUE and
price; with a tariff (``trace.energy.tariff``) that power times the integral of price x
PUE over the interval (``costs.interval_cost``), and ``options.tariff_blind`` plans with
the tariff's mean price and PUE while the bill still follows it. In cloud mode a
configured node costs its VM price while it runs any job. Tardiness is charged at
completion.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from andreas import levels
from andreas.costs import tariff_blind
from andreas.errors import AndreasError
from andreas.feasibility import check_plan
from andreas.model import (ActionKind, CatalogEntry, Config, Demand, Node, Snapshot,
                           Trace)
from andreas.model import Progress as ProgressMode   # engine.Progress is the callback
from andreas import policies
from andreas.optimizer import decide
from andreas.resources import Ledger, demand_of
from andreas.simulator.accounts import Accounts
from andreas.simulator.jobrun import JobRun
from andreas.simulator.powerdown import PowerDown
from andreas.simulator.results import PROGRESS_MODES, Attempt, SimOptions, SimResult
from andreas.simulator.sharing import SharingTruth

EPS = 1e-6
MAX_IDLE_TICKS = 10_000
Progress = Callable[[float, int, int], None]


class SimulationError(AndreasError):
    """The simulation cannot go on (e.g. a policy leaves every job waiting forever)."""


class Simulator:
    def __init__(self, trace: Trace, policy: str, options: SimOptions = SimOptions(),
                 on_progress: Progress | None = None) -> None:
        if options.progress not in PROGRESS_MODES:
            raise SimulationError(f"progress: must be one of {PROGRESS_MODES}, "
                                  f"got {options.progress!r}")
        if not options.power_levels:
            trace = levels.without_levels(trace)
        self.trace, self.policy, self.opt = trace, policy, options
        spec = policies.get(policy)
        own = spec.period_s
        self.period = (options.period_s if options.period_s is not None
                       else own if own is not None else trace.params.period_s)
        # the optimizer learns what a restart costs here, so it prices moves and preemptions
        self.params = replace(trace.params, period_s=self.period or trace.params.period_s,
                              progress=options.progress,
                              restart_overhead_s=options.restart_s,
                              mu=trace.params.mu if options.mu is None else options.mu)
        self.exact = options.progress == ProgressMode.EXACT
        self.bill = trace.energy          # what the site pays (with the tariff, if any)
        self.plan_energy = (tariff_blind(trace.energy) if options.tariff_blind
                            else trace.energy)
        if trace.energy.tariff is not None and not trace.cloud and not self.period:
            raise SimulationError("period_s: 0 with a tariff: jobs held back for cheaper hours "
                                  "need the periodic rescheduling that starts them")
        self.on_progress = on_progress
        self.rng = np.random.default_rng(options.seed)
        _check_fits(trace, policy, spec)
        self.names = [n.name for n in trace.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        n = len(trace.nodes)
        self.busy = np.zeros(n, dtype=np.int64)
        self.vm: list[str | None] = [n_.config for n_ in trace.nodes]
        self.catalog = {c.name: c for c in trace.catalog}
        self.ledger = Ledger(trace.nodes if not trace.cloud else ())
        self.alloc_milli = np.zeros(n, dtype=np.int64)   # milli-GPU held per node
        self.account = Accounts(trace=trace, bill=self.bill)
        self.power_down = PowerDown(
            nodes=n, enabled=options.power_off_idle and not trace.cloud,
            idle_s=options.power_idle_s, wake_s=options.wake_s,
            idle_w=self.account.power_w[:, 0] if not trace.cloud else np.zeros(n))
        # the truth the policies do not see: per-job interference sensitivity, measurement noise
        self.truth = SharingTruth(sharing=options.sharing, error=options.interference_error,
                                  seed=options.seed)
        self.running: dict[str, JobRun] = {}
        self.waiting: dict[str, JobRun] = {}
        self.attempts: list[Attempt] = []
        self.calls: list[float] = []
        self.counts = {ActionKind.START: 0, ActionKind.PREEMPT: 0, ActionKind.MOVE: 0,
                       ActionKind.RESIZE: 0}
        self.policy_state: dict = {}
        self.revisit = math.inf           # the last plan's revisit_s (options.revisit)
        self.revisits = 0

    # -- the clock ---------------------------------------------------------------------
    def run(self) -> SimResult:
        wall = time.perf_counter()
        pending = sorted(self.trace.jobs, key=lambda j: (j.submit_s, j.id))
        total, k = len(pending), 0
        t = t0 = pending[0].submit_s if pending else 0.0
        self.power_down.begin(t0)
        idle_ticks = 0
        while k < total or self.running or self.waiting:
            t_sub = pending[k].submit_s if k < total else math.inf
            t_done = min((r.finish_s(self.exact) for r in self.running.values()),
                         default=math.inf)
            t_tick = math.inf
            if self.period > 0 and (self.waiting or self.running):
                t_tick = (math.floor(t / self.period + EPS) + 1) * self.period
            t_next = min(t_sub, t_done, t_tick, self.revisit)
            if math.isinf(t_next):
                raise SimulationError(f"policy {self.policy}: {len(self.waiting)} jobs wait with "
                                      "nothing running and no event left (set a period)")
            self._advance(t, t_next)
            t = t_next
            reasons = set()
            for run in [r for r in self.running.values() if r.finish_s(self.exact) <= t + EPS]:
                self._complete(run, t)
                reasons.add("completion")
            while k < total and pending[k].submit_s <= t + EPS:
                self.waiting[pending[k].id] = JobRun(spec=pending[k])
                k += 1
                reasons.add("submission")
            if t_tick <= t + EPS:
                reasons.add("period")
            if self.revisit <= t + EPS:
                reasons.add("revisit")
                self.revisits += 1
                self.revisit = math.inf
            if reasons and (self.waiting or self.running):
                self._repace(t)       # what jobs measure reflects who shares their GPUs now
                self._reschedule(t)
            self._repace(t)
            idle_ticks = idle_ticks + 1 if (self.waiting and not self.running) else 0
            if idle_ticks > MAX_IDLE_TICKS:
                raise SimulationError(f"policy {self.policy}: jobs wait on an empty cluster for "
                                      f"{MAX_IDLE_TICKS} rescheduling points")
            self.account.point(t)
            if self.on_progress:
                self.on_progress(t, len(self.account.records), total)
        return self._result(t0, t, time.perf_counter() - wall)

    def _advance(self, t0: float, t1: float) -> None:
        self.account.charge(t0, t1, busy=self.busy, alloc_milli=self.alloc_milli, vm=self.vm,
                            runs=self.running.values(),
                            power_down=self.power_down if self.power_down.enabled else None)

    def _repace(self, t: float) -> None:
        self.truth.repace(t, self.running.values(), self.ledger)

    # -- events ------------------------------------------------------------------------
    def _complete(self, run: JobRun, t: float) -> None:
        self._stop(run, t, preempted=False)
        del self.running[run.spec.id]
        self.account.complete(run, t)

    def _stop(self, run: JobRun, t: float, *, preempted: bool) -> None:
        self.attempts.append(Attempt(job=run.spec.id, node=self.names[run.node], gpus=run.gpus,
                                     start_s=run.start_s, end_s=t, gpu_ids=run.gpu_ids,
                                     gpu_milli=run.milli() // max(run.gpus, 1),
                                     power_limit_w=run.level.limit_w))
        run.done = run.spec.epochs if not preempted else run.progress(t, self.exact)
        if preempted:     # what the stop throws away, and the overhead its attempt paid
            self.account.lost_work_s += (run.progress(t, exact=True) - run.done) * run.epoch_s
        self.account.lost_work_s += min(run.overhead_s, max(0.0, t - run.start_s))
        self.alloc_milli[run.node] -= run.milli()
        self.account.level_w[run.node] -= run.gpus * run.level.delta_w
        if self.trace.cloud:
            self.busy[run.node] -= run.gpus
        else:
            assert run.demand is not None
            self.ledger.release(run.demand, run.node, run.gpu_ids, run.spec.id)
            if run.demand.shared:
                self.truth.changed(run.node)
            self.busy[run.node] = self.ledger.busy_gpus_of(run.node)
            if self.busy[run.node] == 0:
                self.power_down.went_idle(run.node, t)
        run.gpu_ids, run.demand = (), None
        if self.trace.cloud and self.busy[run.node] == 0:
            self.vm[run.node] = None
        run.node, run.gpus = -1, 0
        if preempted:
            run.preemptions += 1

    def _vm_of(self, node: int) -> CatalogEntry:
        """The VM a cloud node is configured as (a node runs jobs only once it has one)."""
        name = self.vm[node]
        assert name is not None, f"cloud node {node} runs a job without a VM"
        return self.catalog[name]

    def _start(self, run: JobRun, node: int, gpus: int, t: float,
               gpu_ids: tuple[int, ...] = (), limit_w: float | None = None) -> None:
        gpu_type = (self._vm_of(node).gpu_type if self.trace.cloud
                    else self.trace.nodes[node].gpu_type)
        assert gpu_type is not None                 # on premise every node has its type
        run.level = self._level(run, node, limit_w)
        run.default_epoch_s = run.spec.epoch_time_s[gpu_type][gpus - 1]
        run.solo_epoch_s = run.epoch_s = run.default_epoch_s * run.level.time_factor
        run.slow = 1.0
        run.overhead_s = ((self.opt.restart_s if run.starts else 0.0)
                          + self.power_down.wake_delay(node, t, idle=self.busy[node] == 0))
        run.base, run.base_s = run.done, t + run.overhead_s
        run.node, run.gpus, run.start_s = node, gpus, t
        run.starts += 1
        if math.isnan(run.first_start_s):
            run.first_start_s = t
        if self.trace.cloud:
            run.demand = Demand(gpus=gpus)
            self.busy[node] += gpus
        else:
            run.demand = demand_of(run.spec, gpus)
            slots = gpu_ids or self.ledger.fit(run.demand, node)
            assert slots is not None, f"job {run.spec.id} does not fit node {node}"
            self.ledger.place(run.demand, node, slots, run.spec.id)
            run.gpu_ids = tuple(slots)
            if run.demand.shared:
                self.truth.changed(node)
            self.busy[node] = self.ledger.busy_gpus_of(node)
        self.alloc_milli[node] += run.milli()
        self.account.level_w[node] += gpus * run.level.delta_w

    def _level(self, run: JobRun, node: int, limit_w: float | None) -> levels.LevelOption:
        """The planned level of a job on a node (the default in the cloud)."""
        if self.trace.cloud:
            return levels.DEFAULT
        option = levels.option_at(run.spec, self.trace.nodes[node], limit_w)
        assert option is not None, f"job {run.spec.id}: no level {limit_w} on node {node}"
        return option

    def _relevel(self, run: JobRun, limit_w: float | None, t: float) -> None:
        """A running job's limit changes in place: progress kept, new pace and draw."""
        option = self._level(run, run.node, limit_w)
        if option == run.level:
            return
        self.account.level_w[run.node] += run.gpus * (option.delta_w - run.level.delta_w)
        run.level = option
        run.solo_epoch_s = run.default_epoch_s * option.time_factor
        run.repace(t, run.slow)
    def _reschedule(self, t: float) -> None:
        snapshot = self._snapshot(t)
        start = time.perf_counter()
        opts = policies.get(self.policy).accepted(
            {**self.opt.policy_options(), policies.STATE: self.policy_state,
             policies.SHARING: self.opt.sharing})
        plan = decide(snapshot, self.rng, self.policy, **opts)
        self.calls.append(time.perf_counter() - start)
        check_plan(snapshot, plan)
        self.revisit = (plan.revisit_s if self.opt.revisit and plan.revisit_s is not None
                        and plan.revisit_s > t else math.inf)
        actions = plan.actions(snapshot)
        for act in actions:
            if act.kind in self.counts:
                self.counts[act.kind] += 1
        for act in actions:   # stop first: a move may free GPUs another start needs
            if act.kind in (ActionKind.PREEMPT, ActionKind.MOVE, ActionKind.RESIZE):
                run = self.running.pop(act.job)
                self._stop(run, t, preempted=True)
                self.waiting[act.job] = run
        if self.trace.cloud:
            for name, vm in plan.node_configs.items():
                self.vm[self.index[name]] = vm
        for act in actions:
            if act.kind is ActionKind.CONTINUE:
                self._relevel(self.running[act.job], act.power_limit_w, t)
            if act.kind in (ActionKind.START, ActionKind.MOVE, ActionKind.RESIZE):
                run = self.waiting.pop(act.job)
                assert act.node is not None
                self._start(run, self.index[act.node], act.gpus, t, act.gpu_ids,
                            act.power_limit_w)
                self.running[act.job] = run
                self.account.started(t, float(self.alloc_milli.sum()))

    def _snapshot(self, t: float) -> Snapshot:
        jobs = []
        for run in [*self.running.values(), *self.waiting.values()]:
            cfg = (Config(node=self.names[run.node], gpus=run.gpus, gpu_ids=run.gpu_ids,
                          slowdown=self.truth.measured(run), power_limit_w=run.level.limit_w)
                   if run.node >= 0 else None)
            # true progress: a running job keeps its partial epoch only if it continues
            done = min(run.progress(t, exact=True), run.spec.epochs - EPS)
            jobs.append(replace(run.spec, epochs_done=done, running=cfg))
        nodes = self.trace.nodes
        if self.trace.cloud:
            nodes = tuple(Node(name=n.name, config=vm) for n, vm in zip(nodes, self.vm))
        return Snapshot(now_s=t, nodes=nodes, jobs=tuple(jobs), energy=self.plan_energy,
                        params=self.params, catalog=self.trace.catalog, name=self.trace.name)

    def _result(self, t0: float, t_end: float, wall_s: float) -> SimResult:
        calls = self.calls or [0.0]
        return SimResult(
            policy=self.policy, trace=self.trace.name, options=self.opt,
            **self.account.totals(t0, t_end, self.ledger.capacity_milli()),
            power_levels="on" if levels.has_levels(self.trace) else "off",
            makespan_s=t_end - t0,
            optimizer_calls=len(self.calls), optimizer_mean_s=float(np.mean(calls)),
            optimizer_max_s=float(np.max(calls)), optimizer_total_s=float(np.sum(calls)),
            wall_s=wall_s, starts=self.counts[ActionKind.START] + self.counts[ActionKind.MOVE]
            + self.counts[ActionKind.RESIZE], preemptions=self.counts[ActionKind.PREEMPT],
            migrations=self.counts[ActionKind.MOVE], resizes=self.counts[ActionKind.RESIZE],
            wakeups=self.power_down.wakeups, revisits=self.revisits,
            attempts=tuple(self.attempts))


def _check_fits(trace: Trace, policy: str, spec: policies.PolicySpec) -> None:
    """SimulationError when the policy cannot plan this kind of trace."""
    if any(j.demand is not None for j in trace.jobs) and not spec.plans_demands:
        raise SimulationError(
            f"policy {policy}: plans whole dedicated GPUs only, but trace "
            f"{trace.name or '(unnamed)'} has multi-resource demands (GPU fractions, CPU, "
            "memory); use a packing policy (andreas simulate --help lists them)")
    if trace.cloud and not spec.cloud:
        raise SimulationError(
            f"policy {policy}: places jobs on on-premise GPUs, but trace "
            f"{trace.name or '(unnamed)'} is a cloud trace (VM catalog); use an energy "
            "policy (rg, pr, greedy, ...)")


def simulate(trace: Trace, policy: str, options: SimOptions = SimOptions(),
             on_progress: Progress | None = None) -> SimResult:
    """Run ``policy`` over the whole trace; every job completes exactly once."""
    return Simulator(trace, policy, options, on_progress).run()
