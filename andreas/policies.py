"""The one policy registry: every scheduling policy, its traits and the options it takes.

Each policy is one frozen :class:`PolicySpec`: its function (module and name, imported
on first use), a summary, the kind of work it plans (:class:`TaskKind`), its traits and
the options it accepts with its own defaults; each option's type, bounds and help are
one :class:`OptionSpec` in :data:`OPTIONS`, shared by every policy that takes it. The
CLI (``andreas policies``, ``optimize``, ``compare``, ``simulate``), the simulator, the
manager and its configuration all read policies from here, and
``andreas.optimizer.decide`` refuses an option a policy does not take. Stdlib only and
cheap to import: the agent's configuration and ``andreas submit`` read it.
``tests/test_policies.py`` holds every spec to its function's signature.

Adding a policy: write ``decide_x(snapshot, rng, *, option=default, ...) -> Plan`` with
keyword-only options (no ``**options``), add its options to :data:`OPTIONS` if they are
new, and one ``PolicySpec`` to :data:`POLICIES`.
"""

from __future__ import annotations

import enum
import importlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from andreas.errors import InputError
from andreas.limits import MAX_GA_SIZE, MAX_ITERATIONS, MAX_TIME_LIMIT_S

# Options a caller hands a policy that are no user's choice: ``state`` (a stateful
# policy's dict, kept from one decision to the next by the simulator or the manager) and
# ``sharing`` (the interference bounds, ``andreas.interference.Sharing``).
STATE = "state"
SHARING = "sharing"


class TaskKind(enum.Enum):
    """What a policy plans: elastic jobs (epochs on any number g of whole GPUs of one node,
    the ANDREAS model) or rigid tasks (a fixed demand of GPUs or GPU slices, CPU, memory)."""

    ELASTIC = "elastic"
    RIGID = "rigid"


@dataclass(frozen=True, kw_only=True)
class OptionSpec:
    """One option a policy may take: its type (int, float, bool or str), bounds or choices,
    and what it does. ``None`` is accepted where a policy's default is ``None`` (the
    policy then picks its own value)."""

    name: str
    type: type
    help: str
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False       # minimum itself excluded
    max_open: bool = False       # maximum itself excluded
    choices: tuple[str, ...] = ()

    def check(self, value: Any, *, none_ok: bool = False) -> None:
        """An InputError naming the option when ``value`` is not one it takes."""
        if value is None and none_ok:
            return
        if not self._typed(value):
            raise InputError(f"{self.name}: must be {self.describe()}, got {value!r}",
                             field=self.name)

    def _typed(self, value: Any) -> bool:
        if self.type is bool:
            return isinstance(value, bool)
        if self.type is str:
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if isinstance(value, bool) or not _is_number(value, integral=self.type is int):
            return False
        if not math.isfinite(value):
            return False
        low, high = self.minimum, self.maximum
        return not ((low is not None and (value < low or (self.min_open and value == low)))
                    or (high is not None and (value > high or (self.max_open and value == high))))

    def describe(self) -> str:
        """What the option takes, in words (``an integer in [1, 100000]``)."""
        if self.type is bool:
            return "true or false"
        if self.type is str:
            return "one of " + ", ".join(self.choices) if self.choices else "a text"
        what = "an integer" if self.type is int else "a number"
        low, high = self.minimum, self.maximum
        if low is None and high is None:
            return what
        if high is None:
            return f"{what} {'>' if self.min_open else '>='} {low:g}"
        if low is None:
            return f"{what} {'<' if self.max_open else '<='} {high:g}"
        return (f"{what} in {'(' if self.min_open else '['}{low:g}, "
                f"{high:g}{')' if self.max_open else ']'}")


def _is_number(value: Any, *, integral: bool) -> bool:
    import numbers

    return isinstance(value, numbers.Integral if integral else numbers.Real)


ORDERS = ("wspt-late", "pressure", "atc", "wspt-atc", "late-atc")


class EnergyPrice(enum.StrEnum):
    """What greedy, rg and pr charge a job's run on premise (``compile_problem``).

    ``node``: ANDREAS' c_ng(g), the node's whole draw with g busy GPUs. ``above-idle``:
    without power-down a node draws its idle power whether or not it runs a job, so that
    part of c_ng is sunk and biases every choice toward fast configurations. The run
    then pays what its GPUs add, c_ng(g) - c_ng(0), plus the idle draw of every node
    for as long as it would end after the last other running job and 1.3 x its own
    fastest run (the cluster stays on for it if nothing else comes: the simulator bills
    until the last completion); and a configuration counts as on time only with 15 % of
    its time to spare, since the cheapest one is now often the slowest. The cloud's VM
    prices are unchanged.
    """

    NODE = "node"
    ABOVE_IDLE = "above-idle"


# Every option of every policy, once: name -> type, bounds, help. A policy lists the
# names it takes with its own default (PolicySpec.options).
OPTIONS: Mapping[str, OptionSpec] = MappingProxyType({o.name: o for o in (
    OptionSpec(name="iterations", type=int, minimum=1, maximum=MAX_ITERATIONS,
               help="constructions of the randomized search (MaxIt; unset: 1000, rg on "
                    "rigid tasks 8)"),
    OptionSpec(name="alpha", type=float, minimum=0, maximum=1,
               help="width of the restricted candidate list (1: every candidate)"),
    OptionSpec(name="swap_scale", type=float, minimum=0, maximum=1e6,
               help="how far the randomized constructions swap jobs in the queue"),
    OptionSpec(name="order", type=str, choices=ORDERS,
               help="queue order: wspt-late (late jobs by weight over remaining time, then "
                    "the least slack), pressure (the papers' order), atc (apparent "
                    "tardiness cost), late-atc (late jobs as wspt-late, then atc) or "
                    "wspt-atc (the default: wspt-late, and on premise late-atc while the "
                    "greedy plan leaves a job waiting)"),
    OptionSpec(name="energy_price", type=str, choices=tuple(EnergyPrice),
               help="on premise, charge a job's run the node's whole draw (node) or only "
                    "what its GPUs add above the node's idle draw (above-idle; unset: "
                    "above-idle where restarts cost an overhead, else node)"),
    OptionSpec(name="keep_node", type=bool,
               help="on premise, a running job placed at its own node class and GPU count "
                    "stays on its node where that node still has the GPUs, and one that can "
                    "stay takes no GPUs held for others to change; in the cloud "
                    "(rg, pr, greedy), the plan's jobs are swapped among its VMs of their "
                    "type at their GPU count so that the most stay on the VM they run on "
                    "(unset: on premise where restarts cost an overhead, else off)"),
    OptionSpec(name="floor", type=bool,
               help="also consider the FIFO / EDF / priority plans, so f_obj is never above "
                    "a work-conserving baseline's"),
    OptionSpec(name="fallback", type=float, minimum=0,
               help="keep the greedy plan unless the search's objective is lower by more "
                    "than this share of it (unset: never on premise, 0 in the cloud)"),
    OptionSpec(name="move_margin", type=float, minimum=0, maximum=1e6,
               help="hysteresis: the work a move, resize or preemption throws away counts "
                    "1 + this many times when the plan is chosen, so a move must save this "
                    "many times its own cost (unset: the policy's default for the setting)"),
    OptionSpec(name="sigma", type=int, minimum=1, maximum=MAX_ITERATIONS,
               help="size of the elite pool path relinking walks between"),
    OptionSpec(name="max_steps", type=int, minimum=0, maximum=MAX_ITERATIONS,
               help="moves of one relinking path (unset: the number of nodes)"),
    OptionSpec(name="postprocess", type=bool,
               help="improve the relinked solution by local moves (keeping f_bar)"),
    OptionSpec(name="slack", type=float, minimum=0, maximum=1e6,
               help="share of the best objective within which pr prefers the plan that "
                    "restarts fewest jobs (unset: 0.2 on premise, 0 in the cloud)"),
    OptionSpec(name="window_when", type=str, choices=("always", "postponed"),
               help="when the slack window applies: always, or only when the best plan "
                    "leaves a job waiting (unset: postponed)"),
    OptionSpec(name="time_limit_s", type=float, minimum=0, min_open=True,
               maximum=MAX_TIME_LIMIT_S,
               help="solver time limit in seconds; past it the best plan found"),
    OptionSpec(name="max_columns", type=int, minimum=1, maximum=10**9,
               help="refuse time-indexed models with more columns than this (the warm "
                    "start stands)"),
    OptionSpec(name="slots", type=int, minimum=1, maximum=1000,
               help="time slots of the horizon, short first and growing"),
    OptionSpec(name="plan_shortage", type=bool,
               help="on premise, plan with the model also while the greedy plan leaves a "
                    "job waiting (off: the greedy plan stands then)"),
    OptionSpec(name="max_nodes", type=int, minimum=1, maximum=10**9,
               help="branch-and-bound nodes of the solver: a limit that, unlike the clock, "
                    "gives the same plan on every machine"),
    OptionSpec(name="mip_gap", type=float, minimum=0, maximum=1, max_open=True,
               help="relative MIP gap at which the solver stops"),
    OptionSpec(name="max_variables", type=int, minimum=1, maximum=10**9,
               help="refuse models with more variables than this"),
    OptionSpec(name="work_conserving", type=bool,
               help="postpone a job only when no node has room for it"),
    OptionSpec(name="group_size", type=int, minimum=1, maximum=10**6,
               help="nodes per local controller"),
    OptionSpec(name="max_states", type=int, minimum=1, maximum=10**9,
               help="states the DP keeps per stage"),
    OptionSpec(name="population", type=int, minimum=1, maximum=MAX_GA_SIZE,
               help="chromosomes per generation"),
    OptionSpec(name="generations", type=int, minimum=1, maximum=MAX_GA_SIZE,
               help="generations per decision"),
    OptionSpec(name="decoder", type=str, choices=("skip", "next-fit", "strict"),
               help="how a chromosome becomes a plan when its node is full"),
    OptionSpec(name="fitness", type=str, choices=("consolidated", "allocation"),
               help="the allocation gained with ties broken by whole free GPUs kept "
                    "together, or the allocation alone (the paper's Algorithm 3)"),
    OptionSpec(name="backfill", type=bool,
               help="keep the node where the oldest blocked task can start soonest for it "
                    "(EASY backfilling)"),
    OptionSpec(name="steady", type=bool,
               help="steady-state GA (replace a share of the population per generation)"),
)})

# The options of the ANDREAS search (greedy's randomized constructions).
_SEARCH = {"alpha": 0.05, "swap_scale": 0.5, "order": "wspt-atc", "floor": False}


@dataclass(frozen=True, kw_only=True)
class PolicySpec:
    """One scheduling policy: ``module.function(snapshot, rng, **options) -> Plan``.

    Traits: ``shares_gpus`` (it places tasks on a GPU others use under the interference
    bounds, and takes ``sharing=``), ``cloud`` (it plans cloud snapshots, a VM catalog),
    ``stateful`` (it takes ``state=``, a dict kept from one decision to the next),
    ``manager`` (``andreas manager run`` offers it), ``power_levels`` (it chooses GPUs'
    power limits), ``period_s`` (its own rescheduling period in the simulator; None: the
    trace's). ``options``: the options it takes, each with its default.
    """

    name: str
    module: str
    function: str
    summary: str
    kind: TaskKind = TaskKind.ELASTIC
    shares_gpus: bool = False
    cloud: bool = True
    stateful: bool = False
    manager: bool = False
    power_levels: bool = False
    period_s: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [name for name in self.options if name not in OPTIONS]
        if unknown:
            raise ValueError(f"policy {self.name}: options {unknown} are not in OPTIONS")
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    @property
    def plans_demands(self) -> bool:
        """Whether it honours ``Job.demand`` (GPU slices, CPU, memory)."""
        return self.kind is TaskKind.RIGID or self.shares_gpus

    @property
    def context(self) -> tuple[str, ...]:
        """The options its caller supplies (``state``, ``sharing``)."""
        return (STATE,) * self.stateful + (SHARING,) * self.shares_gpus

    def takes(self, option: str) -> bool:
        return option in self.options or option in self.context

    def load(self) -> Callable[..., Any]:
        """The policy's function (its module is imported now, the first time)."""
        return getattr(importlib.import_module(self.module), self.function)

    def check(self, options: Mapping[str, Any]) -> None:
        """An InputError naming the first option it does not take, or a bad value."""
        for name, value in options.items():
            if name in self.context:
                continue
            if name not in self.options:
                takes = ", ".join(self.options) or "none"
                raise InputError(f"{name}: not an option of policy {self.name} (its options: "
                                 f"{takes})", field=name)
            OPTIONS[name].check(value, none_ok=self.options[name] is None)

    def accepted(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The ones of ``options`` it takes, leaving out those that are None (unset)."""
        return {k: v for k, v in options.items() if v is not None and self.takes(k)}


def _spec(name: str, module: str, function: str, summary: str, **traits: Any) -> PolicySpec:
    return PolicySpec(name=name, module=f"andreas.optimizer.{module}", function=function,
                      summary=summary, **traits)


_RIGID = {"kind": TaskKind.RIGID, "cloud": False}
_DP = {"period_s": 900.0, "options": {"max_states": 50_000}}   # the paper's Delta t = 15 min
_SHARING = {**_RIGID, "shares_gpus": True}

# name -> spec, in the order `andreas policies` lists them.
POLICIES: dict[str, PolicySpec] = {s.name: s for s in (
    _spec("greedy", "greedy", "decide_greedy",
          "pressure-sorted greedy, best configuration, best fit (minimises f_obj)",
          shares_gpus=True, manager=True, power_levels=True,
          options={"order": "wspt-atc", "energy_price": None, "keep_node": None}),
    _spec("rg", "greedy", "decide_rg",
          "ANDREAS randomized greedy, best f_obj of MaxIt constructions",
          shares_gpus=True, manager=True, power_levels=True,
          options={"iterations": None, **_SEARCH, "fallback": None,
                   "energy_price": None, "keep_node": None, "move_margin": None}),
    _spec("pr", "relinking", "decide_pr",
          "randomized construction + path relinking + post-processing (maximises f_bar)",
          manager=True, power_levels=True,
          options={"iterations": 1000, **_SEARCH, "sigma": 10, "max_steps": None,
                   "postprocess": True, "slack": None, "window_when": None,
                   "fallback": None, "energy_price": None, "keep_node": None,
                   "move_margin": None}),
    _spec("horizon", "horizon", "decide_horizon",
          "rolling horizon: the next hours as a time-indexed MILP (HiGHS) warm-started from "
          "greedy and rg, starts what its plan starts now (never above greedy's plan on its "
          "objective); tasks with GPU shares go to rg",
          shares_gpus=True, manager=True,
          options={"time_limit_s": 4.0, "max_columns": 120_000, "slots": 12,
                   "iterations": None, "plan_shortage": False, "max_nodes": 2_000}),
    _spec("fifo", "baselines", "decide_fifo",
          "first in first out, one job per node, jobs keep their resources", manager=True),
    _spec("edf", "baselines", "decide_edf",
          "earliest deadline first, one job per node, jobs keep their resources",
          manager=True),
    _spec("priority", "baselines", "decide_priority",
          "highest tardiness weight first, one job per node, jobs keep their resources",
          manager=True),
    _spec("milp", "milp", "decide_milp",
          "exact MILP of f_obj solved by HiGHS (time limit, MIP gap; small snapshots)",
          power_levels=True,
          options={"time_limit_s": 60.0, "mip_gap": 0.0, "max_variables": 1_000_000,
                   "work_conserving": True}),
    _spec("hierarchical", "hierarchical", "decide_hierarchical",
          "the papers' Hierarchical Method: 5-node controllers, MILP at 5 % gap each",
          options={"time_limit_s": 1.0, "mip_gap": 0.05, "group_size": 5,
                   "order": "wspt-atc", "work_conserving": True}),
    _spec("dp-wct", "dp", "decide_dp_wct",
          "Saxena et al.'s DP as path relinking adapts it: F1 = F2 = F_WCT, one job per node",
          **_DP),
    _spec("dp-fastwct", "dp", "decide_dp_fastwct",
          "DP baseline: fastest configuration, F2 = F_WCT, one job per node", **_DP),
    _spec("dp-fastb", "dp", "decide_dp_fastb",
          "DP baseline: fastest configuration, F2 = F_B (constant B), one job per node",
          **_DP),
    _spec("dp-adjwct", "dp", "decide_dp_adjwct",
          "DP baseline: F1 = adjusted tardiness (eq. 5), F2 = F_WCT, one job per node",
          **_DP),
    _spec("first-fit", "packing", "decide_first_fit",
          "packing baseline: each waiting task on the first node where it fits",
          manager=True, **_RIGID),
    _spec("round-robin", "packing", "decide_round_robin",
          "packing baseline: nodes in turn regardless of load", stateful=True, **_RIGID),
    _spec("tetris", "packing", "decide_tetris",
          "packing baseline: best alignment (dot product) of demand and free resources",
          **_RIGID),
    _spec("best-fit", "packing", "decide_best_fit",
          "packing baseline: exclusive GPUs, node with the fewest free GPUs that fits",
          manager=True, **_RIGID),
    _spec("ojpp-greedy", "sharing", "decide_ojpp_greedy",
          "GPU sharing: best-fit decreasing under collision, interference and balance "
          "bounds (interference-aware placement, Alg. 1-2)", manager=True, **_SHARING),
    _spec("ojpp-heuristic", "sharing", "decide_ojpp_heuristic",
          "GPU sharing: ojpp-greedy ordered by gregariousness (Alg. 3)",
          manager=True, **_SHARING),
    _spec("i-greedy", "sharing", "decide_i_greedy",
          "GPU sharing baseline: greedy with the interference bound only", **_SHARING),
    _spec("b-greedy", "sharing", "decide_b_greedy",
          "GPU sharing baseline: greedy with the balance bound only", **_SHARING),
    _spec("c-greedy", "sharing", "decide_c_greedy",
          "GPU sharing baseline: greedy with the collision bound only", **_SHARING),
    _spec("ojpap", "sharing", "decide_ojpap",
          "GPU sharing: ojpp-heuristic plus the online adjustment (Alg. 4): moves jobs off "
          "GPUs whose measured interference (EWMA) breaks the bound, within a migration "
          "budget", manager=True, stateful=True, **_SHARING),
    _spec("ga", "genetic", "decide_ga",
          "genetic scheduling paper: a GA (PyGAD) over task-to-node genes maximising GPU "
          "allocation, seeded with First-Fit / Tetris / Best-Fit", **_RIGID,
          options={"population": 100, "generations": 50, "decoder": "next-fit",
                   "fitness": "consolidated", "backfill": True}),
    _spec("ga-energy", "genetic_energy", "decide_ga_energy",
          "the same GA over node and GPU count of elastic jobs minimising f_obj, seeded "
          "with rg's constructions (never worse than rg)", cloud=False,
          options={"population": 100, "generations": 50, "iterations": None, **_SEARCH,
                   "work_conserving": True, "steady": True}),
)}


def get(name: str) -> PolicySpec:
    """The named policy's spec; an InputError listing the known ones otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        raise InputError(f"policy: unknown policy {name!r} "
                         f"(known: {', '.join(POLICIES)})", field="policy") from None


def manager_policies() -> tuple[str, ...]:
    """The policies `andreas manager run` offers (the others are for studies)."""
    return tuple(name for name, spec in POLICIES.items() if spec.manager)


def takers(option: str, names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The policies (of ``names``, default all) that take ``option``."""
    return tuple(n for n in (POLICIES if names is None else names) if get(n).takes(option))


def check_applicable(names: Iterable[str], options: Mapping[str, Any]) -> None:
    """For a command that runs several policies: an InputError for the first option that
    is set (not None) and that none of them takes; its value is checked too."""
    names = tuple(names)
    for option, value in options.items():
        if value is None:
            continue
        if not takers(option, names):
            which = f"policy {names[0]}" if len(names) == 1 else "policies " + ", ".join(names)
            users = ", ".join(takers(option)) or "none"
            raise InputError(f"{option}: not an option of {which} (taken by: {users})",
                             field=option)
        OPTIONS[option].check(value)
