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
from dataclasses import dataclass, replace

import numpy as np

from andreas import levels
from andreas.costs import SECONDS_PER_HOUR, energy_cost, interval_cost, tariff_blind
from andreas.errors import AndreasError
from andreas.feasibility import check_plan
from andreas.model import (GPU_MILLI, ActionKind, CatalogEntry, Config, Demand, Job, Node,
                           Snapshot, Trace)
from andreas import policies
from andreas.optimizer import decide
from andreas.interference import thetas
from andreas.resources import Ledger, demand_of, held_milli
from andreas.simulator.results import (PROGRESS_MODES, Attempt, JobRecord, SimOptions,
                                       SimResult)

EPS = 1e-6
MAX_IDLE_TICKS = 10_000
Progress = Callable[[float, int, int], None]


class SimulationError(AndreasError):
    """The simulation cannot go on (e.g. a policy leaves every job waiting forever)."""


@dataclass(eq=False)
class _Run:
    """A submitted job's mutable state."""

    spec: Job
    done: float = 0.0            # epochs checkpointed before the current attempt
    node: int = -1
    gpus: int = 0
    gpu_ids: tuple[int, ...] = ()
    demand: Demand | None = None  # what the current attempt holds in the ledger
    epoch_s: float = 0.0         # now: its epoch time alone x its interference slowdown
    solo_epoch_s: float = 0.0    # its epoch time alone on these GPUs
    slow: float = 1.0            # 1 + theta while it shares GPUs (andreas.interference)
    start_s: float = 0.0         # attempt start; work begins after the overhead
    overhead_s: float = 0.0
    base: float = 0.0            # exact progress at base_s, when the current pace began
    base_s: float = 0.0
    starts: int = 0
    preemptions: int = 0
    first_start_s: float = math.nan
    energy_j: float = 0.0
    cost: float = 0.0
    gpu_s: float = 0.0
    run_s: float = 0.0           # wall time of its attempts
    solo_s: float = 0.0          # of which, the time it would have taken alone on its GPUs
    level: levels.LevelOption = levels.DEFAULT   # its GPUs' power limit (andreas/levels.py)
    default_epoch_s: float = 0.0  # its epoch time alone at the default limit

    def progress(self, now: float, exact: bool) -> float:
        """Epochs done; ``exact=False``: what its checkpoints hold (whole epochs)."""
        if self.node < 0:
            return self.done
        done = self.base + max(0.0, now - self.base_s) / self.epoch_s
        return done if exact else math.floor(done + 1e-9)

    def finish_s(self, exact: bool) -> float:
        return self.base_s + (self.spec.epochs - self.base) * self.epoch_s

    def repace(self, now: float, slow: float) -> None:
        """Co-residents changed: keep the progress made, go on at the new pace."""
        self.base = self.progress(now, exact=True)
        self.base_s = max(now, self.base_s)
        self.slow = slow
        self.epoch_s = self.solo_epoch_s * slow


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
        self.exact = options.progress == "exact"
        self.bill = trace.energy          # what the site pays (with the tariff, if any)
        self.plan_energy = (tariff_blind(trace.energy) if options.tariff_blind
                            else trace.energy)
        if trace.energy.tariff is not None and not trace.cloud and not self.period:
            raise SimulationError("period_s: 0 with a tariff: jobs held back for cheaper hours "
                                  "need the periodic rescheduling that starts them")
        self.on_progress = on_progress
        self.rng = np.random.default_rng(options.seed)
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
        self.names = [n.name for n in trace.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        n = len(trace.nodes)
        self.busy = np.zeros(n, dtype=np.int64)
        self.vm: list[str | None] = [n_.config for n_ in trace.nodes]
        self.catalog = {c.name: c for c in trace.catalog}
        from andreas.formats.snapshot import hardware
        self.hardware = hardware(trace.nodes, trace.catalog)
        self.ledger = Ledger(trace.nodes if not trace.cloud else ())
        self.alloc_milli = np.zeros(n, dtype=np.int64)   # milli-GPU held per node
        if not trace.cloud:
            width = max(node.gpus for node in trace.nodes) + 1
            self.power_w = np.zeros((n, width))
            for i, node in enumerate(trace.nodes):
                self.power_w[i, : node.gpus + 1] = node.power_w
        self.level_w = np.zeros(n)            # per node: its jobs' power levels' change of draw
        self.above_idle_j = 0.0               # energy busy nodes draw above power_w[0]
        self.idle_since = np.zeros(n)         # power-down: idle since (set at the first event)
        self.wake_end = np.full(n, -math.inf)  # a switched-on node is waking until then
        self.wakeups = 0
        self.energy_j = 0.0
        self.energy_cost = 0.0
        self.tardiness_cost = 0.0
        self.running: dict[str, _Run] = {}
        self.waiting: dict[str, _Run] = {}
        self.records: list[JobRecord] = []
        self.attempts: list[Attempt] = []
        self.curve: list[tuple[float, float, float]] = []
        self.calls: list[float] = []
        self.counts = {ActionKind.START: 0, ActionKind.PREEMPT: 0, ActionKind.MOVE: 0,
                       ActionKind.RESIZE: 0}
        self.busy_gpu_s = 0.0
        self.alloc_milli_s = 0.0
        # the scheduling window, from the first submission to the last start: (its end,
        # the milli-GPU-seconds allocated by then, the milli-GPU allocated right after)
        self.last_start: tuple[float, float, float] | None = None
        self.policy_state: dict = {}
        self.revisit = math.inf           # the last plan's revisit_s (options.revisit)
        self.lost_work_s = 0.0            # work thrown away at stops, overheads paid
        self.revisits = 0
        self.dirty: set[int] = set()      # nodes whose GPU sharing changed since the last pace
        # the truth the policies do not see: per-job interference sensitivity, measurement noise
        self.truth = np.random.default_rng([options.seed, 1])
        self.sensitivity: dict[str, float] = {}

    # -- the clock ---------------------------------------------------------------------
    def run(self) -> SimResult:
        wall = time.perf_counter()
        pending = sorted(self.trace.jobs, key=lambda j: (j.submit_s, j.id))
        total, k = len(pending), 0
        t = t0 = pending[0].submit_s if pending else 0.0
        self.idle_since[:] = t0
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
                self.waiting[pending[k].id] = _Run(spec=pending[k])
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
            self.curve.append((t, self.energy_cost, self.tardiness_cost))
            if self.on_progress:
                self.on_progress(t, len(self.records), total)
        return self._result(t0, t, time.perf_counter() - wall)

    def _advance(self, t0: float, t1: float) -> None:
        dt = t1 - t0
        if dt <= 0:
            return
        self.busy_gpu_s += float(self.busy.sum()) * dt
        self.alloc_milli_s += float(self.alloc_milli.sum()) * dt
        # with a tariff, money per joule drawn at constant power over [t0, t1)
        per_j = (interval_cost(1.0, t0, t1, self.bill)
                 if self.bill.tariff is not None and not self.trace.cloud else None)
        if self.trace.cloud:
            for i, vm in enumerate(self.vm):
                if self.busy[i] > 0 and vm is not None:
                    self.energy_cost += self.catalog[vm].cost_per_hour * dt / SECONDS_PER_HOUR
            node_cost = None
        else:
            power = self.power_w[np.arange(len(self.busy)), self.busy] + self.level_w
            if self.opt.power_off_idle:
                power = self._powered(power, t0, dt)
            self.above_idle_j += float(np.where(self.busy > 0, power - self.power_w[:, 0],
                                                0.0).sum()) * dt
            joules = float(power.sum()) * dt
            self.energy_j += joules
            self.energy_cost += interval_cost(joules, t0, t1, self.bill)
            node_cost = power
        for run in self.running.values():
            held = self._milli(run)
            share = held / self.alloc_milli[run.node]
            run.gpu_s += held / GPU_MILLI * dt
            run.run_s += dt
            run.solo_s += dt / run.slow
            if node_cost is None:
                run.cost += (self._vm_of(run.node).cost_per_hour * dt / SECONDS_PER_HOUR
                             * share)
            else:
                joules = node_cost[run.node] * dt * share
                run.energy_j += joules
                if per_j is not None:
                    run.cost += joules * per_j

    def _powered(self, power: np.ndarray, t0: float, dt: float) -> np.ndarray:
        """Mean power per node over [t0, t0 + dt) with the power-down: a busy node draws
        ``power_w[0]`` while it wakes, then its busy power; an idle one ``power_w[0]``
        until it goes off (``power_idle_s`` after its last job, not before its wake-up
        ends), then nothing."""
        idle = self.power_w[:, 0]
        waking = np.clip(self.wake_end - t0, 0.0, dt)
        off_at = np.maximum(self.idle_since + self.opt.power_idle_s, self.wake_end)
        on_idle = np.clip(off_at - t0, 0.0, dt)
        return np.where(self.busy > 0, (idle * waking + power * (dt - waking)) / dt,
                        idle * on_idle / dt)

    def _wake_delay(self, node: int, t: float) -> float:
        """Seconds before a job placed on ``node`` at ``t`` can work: the node's wake-up
        when it is off (it starts now), what is left of one in progress, else 0."""
        if not self.opt.power_off_idle or self.trace.cloud:
            return 0.0
        if self.wake_end[node] > t:
            return float(self.wake_end[node] - t)
        off_at = max(self.idle_since[node] + self.opt.power_idle_s, self.wake_end[node])
        if self.busy[node] == 0 and t > off_at + EPS:
            self.wakeups += 1
            self.wake_end[node] = t + self.opt.wake_s
            return self.opt.wake_s
        return 0.0

    # -- events ------------------------------------------------------------------------
    def _complete(self, run: _Run, t: float) -> None:
        self._stop(run, t, preempted=False)
        del self.running[run.spec.id]
        tardy = max(0.0, t - run.spec.due_s)
        cost = run.spec.weight * tardy
        self.tardiness_cost += cost
        job_cost = (run.cost if self.trace.cloud or self.bill.tariff is not None
                    else energy_cost(run.energy_j, self.bill))
        self.records.append(JobRecord(
            id=run.spec.id, app=run.spec.app, submit_s=run.spec.submit_s, due_s=run.spec.due_s,
            weight=run.spec.weight, epochs=run.spec.epochs, first_start_s=run.first_start_s,
            completion_s=t, tardiness_s=tardy, tardiness_cost=cost,
            energy_kwh=run.energy_j / 3.6e6, energy_cost=job_cost, gpu_seconds=run.gpu_s,
            starts=run.starts, preemptions=run.preemptions, run_s=run.run_s,
            ideal_s=self._ideal_s(run.spec),
            performance=run.solo_s / run.run_s if run.run_s > 0 else 1.0))

    def _stop(self, run: _Run, t: float, *, preempted: bool) -> None:
        self.attempts.append(Attempt(job=run.spec.id, node=self.names[run.node], gpus=run.gpus,
                                     start_s=run.start_s, end_s=t, gpu_ids=run.gpu_ids,
                                     gpu_milli=self._milli(run) // max(run.gpus, 1),
                                     power_limit_w=run.level.limit_w))
        run.done = run.spec.epochs if not preempted else run.progress(t, self.exact)
        if preempted:     # what the stop throws away, and the overhead its attempt paid
            self.lost_work_s += (run.progress(t, exact=True) - run.done) * run.epoch_s
        self.lost_work_s += min(run.overhead_s, max(0.0, t - run.start_s))
        self.alloc_milli[run.node] -= self._milli(run)
        self.level_w[run.node] -= run.gpus * run.level.delta_w
        if self.trace.cloud:
            self.busy[run.node] -= run.gpus
        else:
            assert run.demand is not None
            self.ledger.release(run.demand, run.node, run.gpu_ids, run.spec.id)
            if run.demand.shared:
                self.dirty.add(run.node)
            self.busy[run.node] = self.ledger.busy_gpus_of(run.node)
            if self.busy[run.node] == 0:
                self.idle_since[run.node] = t
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

    def _repace(self, t: float) -> None:
        """Charge interference: each job on a node whose sharing changed runs at the pace
        of its slowest worker, 1 + theta (``andreas.interference``)."""
        if not self.dirty:
            return
        for run in self.running.values():
            if run.node not in self.dirty:
                continue
            theta = 0.0
            for slot in run.gpu_ids:
                residents = self.ledger.on_gpu(run.node, slot)
                if len(residents) > 1:
                    k = next(k for k, (owner, _) in enumerate(residents)
                             if owner == run.spec.id)
                    theta = max(theta, thetas(residents, self.opt.sharing)[k]
                                * self._sensitivity(run.spec.id))
            if abs(1.0 + theta - run.slow) > 1e-12:
                run.repace(t, 1.0 + theta)
        self.dirty.clear()

    def _sensitivity(self, job_id: str) -> float:
        """How much more (or less) than predicted this job suffers from sharing."""
        error = self.opt.interference_error
        if error <= 0:
            return 1.0
        if job_id not in self.sensitivity:
            self.sensitivity[job_id] = float(np.exp(self.truth.normal(0.0, error)))
        return self.sensitivity[job_id]

    def _measured(self, run: _Run) -> float:
        """The slowdown the running attempt reports now (epoch times are noisy)."""
        theta = run.slow - 1.0
        if theta <= 0 or self.opt.interference_error <= 0:
            return max(theta, 0.0)
        return max(0.0, theta * (1.0 + self.truth.normal(0.0, self.opt.interference_error)))

    @staticmethod
    def _milli(run: _Run) -> int:
        """Milli-GPU the attempt holds: slices of GPUs, or whole GPUs."""
        return held_milli(run.demand) if run.demand is not None else 0

    def _ideal_s(self, job: Job) -> float:
        """Its run time alone on the fastest configuration the cluster offers (for slowdown)."""
        return min((job.epochs * t for gpu_type, times in job.epoch_time_s.items()
                    for g, t in enumerate(times[: self.hardware.get(gpu_type, 0)], start=1)
                    if job.runs_on(gpu_type, g)), default=math.inf)

    def _start(self, run: _Run, node: int, gpus: int, t: float,
               gpu_ids: tuple[int, ...] = (), limit_w: float | None = None) -> None:
        gpu_type = (self._vm_of(node).gpu_type if self.trace.cloud
                    else self.trace.nodes[node].gpu_type)
        assert gpu_type is not None                 # on premise every node has its type
        run.level = self._level(run, node, limit_w)
        run.default_epoch_s = run.spec.epoch_time_s[gpu_type][gpus - 1]
        run.solo_epoch_s = run.epoch_s = run.default_epoch_s * run.level.time_factor
        run.slow = 1.0
        run.overhead_s = ((self.opt.restart_s if run.starts else 0.0)
                          + self._wake_delay(node, t))
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
                self.dirty.add(node)
            self.busy[node] = self.ledger.busy_gpus_of(node)
        self.alloc_milli[node] += self._milli(run)
        self.level_w[node] += gpus * run.level.delta_w

    def _level(self, run: _Run, node: int, limit_w: float | None) -> levels.LevelOption:
        """The planned level of a job on a node (the default in the cloud)."""
        if self.trace.cloud:
            return levels.DEFAULT
        option = levels.option_at(run.spec, self.trace.nodes[node], limit_w)
        assert option is not None, f"job {run.spec.id}: no level {limit_w} on node {node}"
        return option

    def _relevel(self, run: _Run, limit_w: float | None, t: float) -> None:
        """A running job's limit changes in place: progress kept, new pace and draw."""
        option = self._level(run, run.node, limit_w)
        if option == run.level:
            return
        self.level_w[run.node] += run.gpus * (option.delta_w - run.level.delta_w)
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
                self.last_start = (t, self.alloc_milli_s, float(self.alloc_milli.sum()))

    def _snapshot(self, t: float) -> Snapshot:
        jobs = []
        for run in [*self.running.values(), *self.waiting.values()]:
            cfg = (Config(node=self.names[run.node], gpus=run.gpus, gpu_ids=run.gpu_ids,
                          slowdown=self._measured(run), power_limit_w=run.level.limit_w)
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
            total_cost=self.energy_cost + self.tardiness_cost, energy_cost=self.energy_cost,
            tardiness_cost=self.tardiness_cost, energy_kwh=self.energy_j / 3.6e6,
            energy_above_idle_kwh=self.above_idle_j / 3.6e6,
            power_levels="on" if levels.has_levels(self.trace) else "off",
            late_jobs=sum(r.tardiness_s > 0 for r in self.records), makespan_s=t_end - t0,
            optimizer_calls=len(self.calls), optimizer_mean_s=float(np.mean(calls)),
            optimizer_max_s=float(np.max(calls)), optimizer_total_s=float(np.sum(calls)),
            wall_s=wall_s, starts=self.counts[ActionKind.START] + self.counts[ActionKind.MOVE]
            + self.counts[ActionKind.RESIZE], preemptions=self.counts[ActionKind.PREEMPT],
            migrations=self.counts[ActionKind.MOVE], resizes=self.counts[ActionKind.RESIZE],
            busy_gpu_seconds=self.busy_gpu_s, device_hours=self.busy_gpu_s / 3600.0,
            gpu_utilization=(self.alloc_milli_s / (self.ledger.capacity_milli()
                                                   * (t_end - t0))
                             if not self.trace.cloud and t_end > t0 else math.nan),
            **self._scheduling_window(t0),
            **_job_means(self.records), wakeups=self.wakeups,
            revisits=self.revisits, lost_work_s=self.lost_work_s,
            wait_s=sum(r.completion_s - r.submit_s - r.run_s for r in self.records),
            slow_s=sum(r.run_s - r.ideal_s for r in self.records),
            jobs=tuple(sorted(self.records, key=lambda r: r.id)), attempts=tuple(self.attempts),
            cost_curve=tuple(self.curve))

    def _scheduling_window(self, t0: float) -> dict[str, float]:
        """GPU allocation over the scheduling window, from the first submission to the last
        start: after it no task waits or arrives, so no decision can change what is held
        (the drain, whose running tasks only end). A window of no length (every task
        started at the first submission) is read as its right limit: the allocation right
        after that start."""
        capacity = self.ledger.capacity_milli()
        if self.trace.cloud or self.last_start is None or capacity <= 0:
            return {"scheduling_window_s": 0.0, "gpu_utilization_scheduling": math.nan}
        t_last, held_s, held_now = self.last_start
        span = t_last - t0
        value = held_s / (capacity * span) if span > 0 else held_now / capacity
        return {"scheduling_window_s": span, "gpu_utilization_scheduling": value}


def simulate(trace: Trace, policy: str, options: SimOptions = SimOptions(),
             on_progress: Progress | None = None) -> SimResult:
    """Run ``policy`` over the whole trace; every job completes exactly once."""
    return Simulator(trace, policy, options, on_progress).run()


def _job_means(records: list[JobRecord]) -> dict[str, float]:
    """Per-job means of the packing papers: completion time (submit to end), slowdown
    (that time over the job's run time alone on its fastest configuration) and the
    performance retained while running (1.0 = no interference)."""
    if not records:
        return {"mean_jct_s": math.nan, "mean_slowdown": math.nan,
                "performance_retained": math.nan}
    jct = [r.completion_s - r.submit_s for r in records]
    return {"mean_jct_s": float(np.mean(jct)),
            "mean_slowdown": float(np.mean([j / r.ideal_s if r.ideal_s > 0 else 1.0
                                            for j, r in zip(jct, records)])),
            "performance_retained": float(np.mean([r.performance for r in records]))}
