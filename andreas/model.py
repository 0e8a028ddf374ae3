"""Pure domain types of the optimizer's world: nodes, jobs, snapshots and plans.

Everything is a frozen keyword-only dataclass with no I/O. Times are UTC seconds,
power is in watts, money is in the currency of ``Energy.price_per_kwh``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from andreas import limits
from andreas.limits import MAX_PUE, MIN_PUE

DEFAULT_PUE = 1.33
DEFAULT_PRICE_PER_KWH = 0.172
DEFAULT_RHO = 100.0
DEFAULT_PERIOD_S = 3600.0
DEFAULT_RESTART_OVERHEAD_S = limits.DEFAULT_RESTART_OVERHEAD_S   # one owner: limits.py


HOURS_PER_DAY = 24
_HOUR_S = 3600.0
_DAY_S = HOURS_PER_DAY * _HOUR_S


@dataclass(frozen=True, kw_only=True)
class Tariff:
    """Time-of-use energy price and PUE by UTC hour of day, repeated every day.

    The one primitive is :meth:`integral`: the price x PUE rate integrated over an
    interval, exact across hour boundaries, so a bill is ``IT kW x integral / 3600``.
    Hours are taken from UTC seconds (``andreas/formats/tariff.py`` reads the file).
    """

    price_per_kwh: tuple[float, ...]
    pue: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("price_per_kwh", "pue"):
            values = getattr(self, name)
            if len(values) != HOURS_PER_DAY:
                raise ValueError(f"tariff {name}: needs {HOURS_PER_DAY} hours, got {len(values)}")
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"tariff {name}: values must be finite")
        if min(self.price_per_kwh) < 0 or max(self.price_per_kwh) <= 0:
            raise ValueError("tariff price_per_kwh: must be >= 0, and > 0 in some hour")
        if min(self.pue) < MIN_PUE or max(self.pue) > MAX_PUE:
            raise ValueError(f"tariff pue: must be in [{MIN_PUE:g}, {MAX_PUE:g}]")

    @property
    def rate(self) -> tuple[float, ...]:
        """Price x PUE per hour of day: money per kWh of IT energy."""
        return tuple(p * q for p, q in zip(self.price_per_kwh, self.pue))

    @property
    def mean_price(self) -> float:
        return math.fsum(self.price_per_kwh) / HOURS_PER_DAY

    @property
    def mean_pue(self) -> float:
        return math.fsum(self.pue) / HOURS_PER_DAY

    @property
    def flat(self) -> bool:
        """One rate all day: then the tariff bills exactly as constant PUE and price."""
        return len(set(self.rate)) == 1

    def hour_of(self, t_s: float) -> int:
        return int(math.floor(t_s / _HOUR_S)) % HOURS_PER_DAY

    def price_at(self, t_s: float) -> float:
        return self.price_per_kwh[self.hour_of(t_s)]

    def pue_at(self, t_s: float) -> float:
        return self.pue[self.hour_of(t_s)]

    def integral(self, t0_s, t1_s):
        """Integral of price(t) x PUE(t) dt over [t0, t1) in (money / kWh) x s; scalars or
        numpy arrays (broadcast). Negative where t1 < t0. Computed from the start of t0's
        day, so large UTC times keep their precision."""
        import numpy as np   # the agent imports this module and never numpy

        rate = np.asarray(self.rate, dtype=float)
        cum = np.concatenate(([0.0], np.cumsum(rate) * _HOUR_S))
        a = np.asarray(t0_s, dtype=float)
        b = np.asarray(t1_s, dtype=float)
        base = np.floor(a / _DAY_S) * _DAY_S
        out = _rate_cumulative(b - base, rate, cum) - _rate_cumulative(a - base, rate, cum)
        return float(out) if out.ndim == 0 else out


def _rate_cumulative(t_s, rate, cum):
    """Integral of the daily rate over [0, t_s) for t_s >= 0 (times from a day's start)."""
    import numpy as np

    days = np.floor(t_s / _DAY_S)
    within = t_s - days * _DAY_S
    hour = np.minimum(np.floor(within / _HOUR_S), HOURS_PER_DAY - 1).astype(np.int64)
    return (days * cum[HOURS_PER_DAY] + cum[hour]
            + rate[hour] * (within - hour * _HOUR_S))


@dataclass(frozen=True, kw_only=True)
class Energy:
    """Site energy parameters: PUE inflates IT power into facility power.

    With a ``tariff`` the price and PUE change by the hour and ``pue`` / ``price_per_kwh``
    are only the reference rate c_ng is quoted at (the tariff's means); every cost over
    time integrates the tariff instead (``costs.energy_time_s``, ``costs.interval_cost``).
    """

    pue: float = DEFAULT_PUE
    price_per_kwh: float = DEFAULT_PRICE_PER_KWH
    tariff: Tariff | None = None


class Progress(enum.StrEnum):
    """What a stopped job keeps (``Params.progress``)."""

    EPOCH = "epoch"     # its last epoch checkpoint: the partial epoch is redone
    EXACT = "exact"     # every fraction of work (the papers' simulator)


class Postponement(enum.StrEnum):
    """The f_obj term of a postponed job (``Params.postponement``)."""

    DELAY = "delay"     # andreas: the lateness it cannot avoid, charged once
    PAPER = "paper"     # P1a as published


PROGRESS_KINDS = tuple(p.value for p in Progress)
POSTPONEMENT_KINDS = tuple(p.value for p in Postponement)


@dataclass(frozen=True, kw_only=True)
class Params:
    """Optimizer parameters: postponement penalty rho, period H and idle-GPU penalty mu,
    and what a restart costs: with ``progress="epoch"`` a job that is stopped resumes
    from its last epoch checkpoint (the job contract), with ``"exact"`` it loses nothing
    (the papers' simulator); every restart also takes ``restart_overhead_s``.
    ``postponement`` picks the f_obj term of a postponed job (``costs.postponement_cost``):
    ``"delay"`` (andreas) or ``"paper"`` (P1a as published).
    """

    rho: float = DEFAULT_RHO
    period_s: float = DEFAULT_PERIOD_S
    mu: float = 0.0
    progress: str = "epoch"
    restart_overhead_s: float = 0.0
    postponement: str = "delay"


@dataclass(frozen=True, kw_only=True)
class PowerLimits:
    """What a node's GPUs accept as a power limit and which limits the optimizer tries.

    ``min_w`` / ``max_w`` are the GPU's constraints as NVML reports them
    (``nvmlDeviceGetPowerManagementLimitConstraints``), ``default_w`` its default limit;
    ``levels_w`` the limits a plan may choose, the default first, then decreasing
    (``andreas/levels.py``).
    """

    min_w: float
    max_w: float
    default_w: float
    levels_w: tuple[float, ...]


@dataclass(frozen=True, kw_only=True)
class PowerLevel:
    """One power limit of a job on one GPU type: its epoch time there over its epoch time
    at the GPU's default limit (``time_factor``, >= 1 below it) and the GPU's mean draw
    while it trains (``gpu_power_w``), measured (Zeus, the profiler) or fitted."""

    limit_w: float
    time_factor: float
    gpu_power_w: float


@dataclass(frozen=True, kw_only=True)
class Node:
    """An on-premise node: fixed GPU type and count; ``power_w[g]`` is its power with g GPUs busy.

    ``cpu_milli``, ``memory_mib`` and ``gpu_memory_mib`` (per GPU) are capacities for jobs
    with a ``Demand``; 0 means not modelled (unlimited), as in traces without them.
    In cloud mode a node has no hardware of its own (``gpu_type`` is None) and is
    configured with a catalog entry by the plan; ``config`` names the entry it runs now.
    """

    name: str
    gpu_type: str | None = None
    gpus: int = 0
    power_w: tuple[float, ...] = ()
    config: str | None = None
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_memory_mib: int = 0
    power_limits: PowerLimits | None = None   # None: limits not settable, default only


@dataclass(frozen=True, kw_only=True)
class CatalogEntry:
    """A cloud VM type: a node configured with it costs ``cost_per_hour`` while it runs any job."""

    name: str
    gpu_type: str
    gpus: int
    cost_per_hour: float


GPU_MILLI = 1000   # one whole GPU in the milli-GPU unit of demands (Alibaba's gpu_milli)


@dataclass(frozen=True, kw_only=True)
class Demand:
    """What a rigid multi-resource task asks of one node: ``gpus`` workers, each on its own
    GPU and using ``gpu_milli`` / 1000 of it (< 1000: a slice that may share the GPU, the
    compute share alpha of the interference-aware placement paper), plus CPU milli-cores
    and memory on the node (0 = not asked).

    GPU memory per worker is that paper's opportunistic model <gamma, delta, p>: a basic
    ``gpu_memory_mib`` always held, plus ``gpu_memory_peak_mib`` more with probability
    ``peak_probability`` (its iteration peaks). Jobs without a demand are the ANDREAS
    kind: elastic over whole, dedicated GPUs.
    """

    gpus: int = 1
    gpu_milli: int = GPU_MILLI
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_memory_mib: int = 0
    gpu_memory_peak_mib: int = 0
    peak_probability: float = 0.0

    @property
    def shared(self) -> bool:
        """A fraction of one GPU: it may share that GPU with other tasks."""
        return self.gpu_milli < GPU_MILLI


@dataclass(frozen=True, kw_only=True)
class Config:
    """Where a job runs: a node, a number of GPUs on it and (when known) which ones.

    ``gpu_ids`` are indexes of the node's GPUs; they matter when GPUs are shared, and are
    empty when a policy only counts whole GPUs (the engine then picks free ones).
    ``slowdown`` is what the running attempt measures: its epoch time over its epoch time
    alone, minus one (theta of the interference-aware placement paper; 0 = alone or not
    measured). The online adjustment (``ojpap``) reads it.
    """

    node: str
    gpus: int
    gpu_ids: tuple[int, ...] = ()
    slowdown: float = 0.0
    power_limit_w: float | None = None   # the limit in force; None: the GPU's default


@dataclass(frozen=True, kw_only=True)
class Job:
    """A training job: ``epoch_time_s[type][g-1]`` is one epoch on g GPUs of that type."""

    id: str
    submit_s: float
    due_s: float
    weight: float
    epochs: int
    epoch_time_s: Mapping[str, tuple[float, ...]]
    app: str = ""
    epochs_done: float = 0   # whole epochs in files; fractional in the simulator's exact mode
    running: Config | None = None
    demand: Demand | None = None   # rigid multi-resource task; None: elastic whole GPUs
    # per GPU type the power limits it has figures for (andreas/levels.py); empty: none
    power_levels: Mapping[str, tuple[PowerLevel, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        frozen = {k: tuple(v) for k, v in self.epoch_time_s.items()}
        object.__setattr__(self, "epoch_time_s", MappingProxyType(frozen))
        levels = {k: tuple(v) for k, v in self.power_levels.items()}
        object.__setattr__(self, "power_levels", MappingProxyType(levels))

    def __reduce__(self):
        """Picklable (for simulator worker processes) although the mappings are read-only."""
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["epoch_time_s"] = dict(self.epoch_time_s)
        state["power_levels"] = dict(self.power_levels)
        return (_job_from_state, (state,))

    @property
    def epochs_left(self) -> float:
        return self.epochs - self.epochs_done

    def remaining_s(self, gpu_type: str, gpus: int) -> float | None:
        """Expected remaining time on ``gpus`` GPUs of ``gpu_type``; None if it cannot run there."""
        if not self.runs_on(gpu_type, gpus):
            return None
        return self.epochs_left * self.epoch_time_s[gpu_type][gpus - 1]

    def runs_on(self, gpu_type: str, gpus: int) -> bool:
        """It has an epoch time there, and a rigid task gets exactly the GPUs it asks for."""
        times = self.epoch_time_s.get(gpu_type)
        if times is None or gpus < 1 or gpus > len(times):
            return False
        return self.demand is None or gpus == self.demand.gpus

    def time_s(self, gpu_type: str, gpus: int, params: Params, *,
               continuing: bool, factor: float = 1.0) -> float | None:
        """Remaining time if placed on ``gpus`` x ``gpu_type``, counting what a restart costs.

        A job that does not continue on the configuration it runs on restarts from its
        last checkpoint: it redoes the partial epoch (``progress="epoch"``) and pays
        ``restart_overhead_s``, as does a waiting job that has made progress before.
        ``factor`` stretches its epochs (a power limit's ``PowerLevel.time_factor``).
        """
        if not self.runs_on(gpu_type, gpus):
            return None
        times = self.epoch_time_s[gpu_type]
        if continuing:
            return self.epochs_left * (times[gpus - 1] * factor)
        done = self.epochs_done
        if params.progress == Progress.EPOCH:
            done = math.floor(done + 1e-9)
        restart = params.restart_overhead_s if (self.running or self.epochs_done > 0) else 0.0
        return (self.epochs - done) * (times[gpus - 1] * factor) + restart


def _job_from_state(state: dict) -> Job:
    return Job(**state)


@dataclass(frozen=True, kw_only=True)
class Trace:
    """A whole workload for the simulator: the cluster and every job with its submit time."""

    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    energy: Energy = field(default_factory=Energy)
    params: Params = field(default_factory=Params)
    catalog: tuple[CatalogEntry, ...] = ()
    name: str = ""

    @property
    def cloud(self) -> bool:
        return bool(self.catalog)


@dataclass(frozen=True, kw_only=True)
class Snapshot(Trace):
    """One rescheduling point: a trace's keys plus the time, holding only the jobs that are
    submitted and not finished (with their progress and where they run)."""

    now_s: float


@dataclass(frozen=True, kw_only=True)
class Assignment:
    """Job on ``gpus`` GPUs of a node; ``gpu_ids`` pins which ones (needed to share a GPU)."""

    job: str
    node: str
    gpus: int
    gpu_ids: tuple[int, ...] = ()
    power_limit_w: float | None = None   # the GPUs' power limit; None: their default


class ActionKind(enum.Enum):
    """What the executor must do with a job to go from the running state to a plan."""

    START = "start"
    CONTINUE = "continue"
    RESIZE = "resize"
    MOVE = "move"
    PREEMPT = "preempt"
    WAIT = "wait"


@dataclass(frozen=True, kw_only=True)
class Action:
    job: str
    kind: ActionKind
    node: str | None = None
    gpus: int = 0
    gpu_ids: tuple[int, ...] = ()
    power_limit_w: float | None = None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A policy's decision: where each job runs now, and which jobs wait.

    ``node_configs`` maps node names to catalog entry names in cloud mode.
    ``stats`` carries the policy's counters (iterations, relinking moves, ...).
    ``revisit_s``: when (snapshot clock) the plan goes stale though nothing happens: a job
    it runs could then switch to a configuration it pays less on and still end on time
    (``optimizer.solution.revisit_s``); None: no such moment. The simulator and the
    manager decide again then.
    """

    policy: str
    assignments: tuple[Assignment, ...]
    postponed: tuple[str, ...]
    objective: float
    objective_name: str
    node_configs: Mapping[str, str] = field(default_factory=dict)
    stats: Mapping[str, float] = field(default_factory=dict)
    revisit_s: float | None = None

    def config_of(self, job_id: str) -> Config | None:
        for a in self.assignments:
            if a.job == job_id:
                return Config(node=a.node, gpus=a.gpus, gpu_ids=a.gpu_ids,
                              power_limit_w=a.power_limit_w)
        return None

    def actions(self, snapshot: Snapshot) -> tuple[Action, ...]:
        """The explicit difference between what runs now and this plan, one action per job."""
        placed = {a.job: a for a in self.assignments}
        out = []
        for job in snapshot.jobs:
            a = placed.get(job.id)
            run = job.running
            if a is None:
                kind = ActionKind.PREEMPT if run else ActionKind.WAIT
                out.append(Action(job=job.id, kind=kind))
                continue
            if run is None:
                kind = ActionKind.START
            elif (run.node != a.node or self._reconfigures(snapshot, a.node)
                  or (a.gpu_ids and run.gpu_ids and a.gpu_ids != run.gpu_ids)):
                kind = ActionKind.MOVE
            elif run.gpus != a.gpus:
                kind = ActionKind.RESIZE
            else:
                kind = ActionKind.CONTINUE
            out.append(Action(job=job.id, kind=kind, node=a.node, gpus=a.gpus,
                              gpu_ids=a.gpu_ids, power_limit_w=a.power_limit_w))
        return tuple(out)

    def _reconfigures(self, snapshot: Snapshot, node_name: str) -> bool:
        """Cloud: a node given another VM type is replaced, so its jobs restart elsewhere."""
        if not snapshot.cloud:
            return False
        current = next((n.config for n in snapshot.nodes if n.name == node_name), None)
        return current is not None and current != self.node_configs.get(node_name)
