"""What a simulation produces: totals in the FORMAT.md results shape, per-job records,
the attempts (for the occupancy Gantt) and the cumulative cost curve."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from andreas.errors import InputError
from andreas.formats.snapshot import MAX_DURATION_S
from andreas.limits import MAX_PERIOD_S, MIN_TRACE_PERIOD_S
from andreas.interference import Sharing
from andreas.model import DEFAULT_RESTART_OVERHEAD_S, PROGRESS_KINDS, Progress
from andreas.policies import OPTIONS

PROGRESS_MODES = PROGRESS_KINDS
GA_FITNESSES = OPTIONS["fitness"].choices
# SimOptions field -> the policy option it sets (andreas/policies.py)
POLICY_OPTIONS = {"iterations": "iterations", "order": "order", "floor": "floor",
                  "ga_population": "population", "ga_generations": "generations",
                  "ga_fitness": "fitness", "ga_backfill": "backfill",
                  "energy_price": "energy_price", "keep_node": "keep_node",
                  "move_margin": "move_margin"}


# Upper bounds: a wake-up of 1e308 s is a typo that hangs a simulation; the command line
# takes them from here.
MAX_WAKE_S = 86400.0                    # as the manager's [power] wake_lead_s
MAX_IDLE_S = 3650 * 86400.0             # as [power] idle_s


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    """How to simulate. ``period_s`` None takes the trace's H; 0 turns periodic rescheduling off.

    ``progress="epoch"``: a job stopped mid-epoch restarts that epoch from its checkpoint;
    ``"exact"`` carries fractional progress over, as the papers' own simulator does.
    ``mu`` None takes the trace's idle-GPU penalty (``params.mu``).
    """

    period_s: float | None = None
    mu: float | None = None
    progress: str = "epoch"
    # None: DEFAULT_RESTART_OVERHEAD_S in epoch mode, 0 in the papers' exact mode
    restart_overhead_s: float | None = None
    power_off_idle: bool = False
    # with power_off_idle: a node goes off after this long idle (0: at once), and one
    # switched on again draws power_w[0] for wake_s before its jobs begin (the manager's
    # [power] idle_s and wake_lead_s)
    power_idle_s: float = 0.0
    wake_s: float = 0.0
    iterations: int | None = None
    order: str | None = None       # queue order of greedy/rg/pr (None: their default)
    floor: bool = False            # rg/pr also consider the baselines' plans
    energy_price: str | None = None  # greedy/rg/pr on premise (None: their default)
    keep_node: bool | None = None    # greedy/rg/pr on premise (None: their default)
    # decide again at each plan's revisit_s (optimizer/solution.py): a running job's
    # cheaper configuration becomes on time; off: only at events and periods, as the
    # papers' simulators
    revisit: bool = True
    seed: int = 0
    sharing: Sharing = field(default_factory=Sharing)  # bounds and interference model
    # how far the true interference is from the model's prediction: each job's slowdowns
    # are the model's times a fixed factor exp(N(0, e)), and each measurement of it is off
    # by a further N(0, e) (0: the model is exact)
    interference_error: float = 0.0
    # the genetic policies (ga, ga-energy): population and generations (None: 100 and 50)
    ga_population: int | None = None
    ga_generations: int | None = None
    # ga's fitness (None: its default, "consolidated"; "allocation": Algorithm 3's own)
    ga_fitness: str | None = None
    # ga's EASY backfilling (None: its default; optimizer/packing.reservation)
    ga_backfill: bool | None = None
    # rg's and pr's hysteresis on moves (None: their default; optimizer/greedy.py)
    move_margin: float | None = None
    # the trace's energy has a tariff: plan with its mean price and PUE (the bill still
    # integrates the tariff over the actual run intervals: the what-if of ignoring it)
    tariff_blind: bool = False
    # the tariff file the trace's energy was priced with (recorded in the results: the
    # figures cannot be read without it); None: the trace's constant PUE and price
    tariff: str | None = None
    # the policies choose the GPUs' power limits where the trace's nodes and jobs have
    # levels (andreas/levels.py); off: every GPU at its default limit, as before levels
    power_levels: bool = True

    def policy_options(self) -> dict[str, Any]:
        """The policy options set here, by their registry names (unset ones left out)."""
        values = {option: getattr(self, name) for name, option in POLICY_OPTIONS.items()}
        values["floor"] = values["floor"] or None
        return {k: v for k, v in values.items() if v is not None}

    @property
    def restart_s(self) -> float:
        """The restart overhead in force (``restart_overhead_s`` with its default filled)."""
        return float(self.restart_overhead_s or 0.0)

    def __post_init__(self) -> None:
        for name, top in (("power_idle_s", MAX_IDLE_S), ("wake_s", MAX_WAKE_S)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)
                    and 0 <= value <= top):
                raise InputError(f"{name}: must be a number 0-{top:g}, got {value!r}",
                                 field=name)
        for name, option in POLICY_OPTIONS.items():     # the registry's bounds
            try:
                OPTIONS[option].check(getattr(self, name), none_ok=True)
            except InputError as e:
                raise e.named(name) from None
        # The documents' bounds (formats/snapshot.py): a period of 1e-300 s or a nan
        # overhead would make the event loop spin for ever.
        p = self.period_s
        if p is not None and p != 0 and not (isinstance(p, (int, float)) and math.isfinite(p)
                                             and MIN_TRACE_PERIOD_S <= p <= MAX_PERIOD_S):
            raise InputError(f"period_s: must be 0 (off) or {MIN_TRACE_PERIOD_S:g}-"
                             f"{MAX_PERIOD_S:g} seconds, got {p!r}", field="period_s")
        if self.restart_overhead_s is None:
            epoch = self.progress == Progress.EPOCH
            object.__setattr__(self, "restart_overhead_s",
                               DEFAULT_RESTART_OVERHEAD_S if epoch else 0.0)
        r = self.restart_overhead_s
        if not (isinstance(r, (int, float)) and math.isfinite(r) and 0 <= r <= MAX_DURATION_S):
            raise InputError(f"restart_overhead_s: must be 0-{MAX_DURATION_S:g} seconds, got "
                             f"{r!r}", field="restart_overhead_s")


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    id: str
    app: str
    submit_s: float
    due_s: float
    weight: float
    epochs: int
    first_start_s: float
    completion_s: float
    tardiness_s: float
    tardiness_cost: float
    energy_kwh: float      # the job's GPU-share of its nodes' power while it ran
    energy_cost: float     # that energy x PUE x price, integrated over time with a tariff
    #                        (cloud: its share of the VM price)
    gpu_seconds: float     # GPU-time held (a slice of a shared GPU counts its fraction)
    starts: int
    preemptions: int
    run_s: float = 0.0     # wall time of its attempts
    ideal_s: float = 0.0   # its run time alone on the fastest configuration (slowdown base)
    performance: float = 1.0  # time-weighted achieved / solo speed while running


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One uninterrupted run of a job on a node: a bar of the occupancy Gantt."""

    job: str
    node: str
    gpus: int
    start_s: float
    end_s: float
    gpu_ids: tuple[int, ...] = ()
    gpu_milli: int = 1000   # per GPU: < 1000 is a slice of a shared GPU
    power_limit_w: float | None = None   # the GPUs' limit when the attempt ended


@dataclass(frozen=True, kw_only=True)
class SimResult:
    policy: str
    trace: str
    options: SimOptions
    total_cost: float
    energy_cost: float
    tardiness_cost: float
    energy_kwh: float
    late_jobs: int
    # what busy nodes draw above their idle power_w[0] (the jobs' own energy), and whether
    # power levels were planned ("on": the trace has levels and options.power_levels)
    energy_above_idle_kwh: float = 0.0
    power_levels: str = "off"
    makespan_s: float
    optimizer_calls: int
    optimizer_mean_s: float
    optimizer_max_s: float
    optimizer_total_s: float
    wall_s: float
    starts: int
    preemptions: int
    migrations: int
    resizes: int
    busy_gpu_seconds: float
    device_hours: float = 0.0          # GPUs with any allocation x time (sharing saves these)
    gpu_utilization: float = 0.0       # allocated milli-GPU / capacity, over the makespan
    # the same over the scheduling window: first submission to last start (engine.py)
    gpu_utilization_scheduling: float = 0.0
    scheduling_window_s: float = 0.0
    mean_jct_s: float = 0.0            # completion - submit
    mean_slowdown: float = 0.0         # completion time / run time alone
    performance_retained: float = 1.0  # achieved / solo speed (1.0 = no interference)
    wakeups: int = 0                   # power-down: nodes switched on for a job
    revisits: int = 0                  # decisions taken at a plan's revisit_s
    # where the time went (job-seconds, summed over jobs): waiting (submission to end, not
    # running), running beyond the fastest configuration alone (slower configurations,
    # redone work, restart overheads, interference), and the work thrown away at stops
    # (partial epochs, epoch mode) plus the restart overheads paid
    wait_s: float = 0.0
    slow_s: float = 0.0
    lost_work_s: float = 0.0
    jobs: tuple[JobRecord, ...] = field(default=())
    attempts: tuple[Attempt, ...] = field(default=())
    cost_curve: tuple[tuple[float, float, float], ...] = field(default=())  # t, energy, tardiness

    def summary(self) -> dict[str, Any]:
        """The FORMAT.md results object (plus counters), without the long lists."""
        out = asdict(self)
        for key in ("jobs", "attempts", "cost_curve", "options"):
            out.pop(key)
        out["options"] = asdict(self.options)
        return out


def reduction_pct(c_algo: float, c_ref: float) -> float:
    """path-relinking-2022 eq. 3: how much cheaper ``c_ref`` is than ``c_algo``, in % of c_algo."""
    if c_algo == 0:
        return 0.0
    return (c_algo - c_ref) / c_algo * 100.0
