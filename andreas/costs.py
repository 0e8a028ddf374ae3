"""Energy and penalty arithmetic: c_ng, tardiness and the proxy objectives.

Pure functions. ``evaluate(snapshot, plan)`` is the reference definition of
``f_obj`` (ANDREAS eq. 1 / P1a) and ``f_bar`` (path-relinking paper eq. 1) that
every policy's own fast bookkeeping is tested against.

Definitions (docs/design/optimizer.md, "Definitions"; f_mix and move costs there too):

- ``t_jng`` = epochs_left * epoch_time_s[type(n)][g-1] where the job runs now (same node
  class and GPU count); anywhere else it restarts from its last checkpoint, so with
  ``params.progress == "epoch"`` the partial epoch is redone, plus
  ``params.restart_overhead_s`` (``Job.time_s``). ``M_j`` = the largest t_jng over every
  configuration the job can run on (its slowest).
- A job assigned to (n, g) has tardiness ``tau_j = max(0, now + t_jng - d_j)``.
- A postponed job costs ``postponement_cost``. andreas's default (``params.postponement
  = "delay"``) charges the lateness it cannot avoid once, as if it ran, and the lateness
  one more period of waiting adds rho times: with ``b_j`` its remaining time after a
  restart on its best configuration (the cheapest that meets its due date, else the
  fastest), ``w * (late_now + rho * (late_after_H - late_now))`` where ``late_now =
  max(0, now + b_j - d_j)`` and ``late_after_H = max(0, now + H + b_j - d_j)``. P1a as
  published (``"paper"``) charges ``rho * w * tau_hat_j`` with the
  worst-case ``tau_hat_j = max(0, now + H + M_j - d_j)``: rho times the slowest
  configuration's whole lateness, so postponing a job that is already late, or long,
  looks rho times dearer than running it (docs/design/objectives.md).
- Node term: each node that runs jobs is charged until its first job ends,
  ``min_j t_jng / 3600 * cost_per_hour(n)`` (c_ng at all its busy GPUs, or the VM price).
- ``f_obj = sum_assigned w tau + sum_postponed postponement cost + sum_nodes node term
  + mu * idle GPUs of nodes that run jobs`` (minimised; mu = 0 is ANDREAS eq. 1).
- Shared GPUs (jobs with a ``Demand``; ``andreas/resources.py``): a job's t_jng is
  stretched by its predicted slowdown 1 + theta_j (``andreas/interference.py``), and a
  node's busy GPUs are its GPUs with any allocation, so a GPU shared by two jobs is
  charged once: sharing pays exactly when the power it saves outweighs the lateness its
  slowdown adds.
- ``pi_j = t_jng / 3600 * c`` with c = c_ng of the job's own g on its node
  (on-premise) or, in the cloud, the job's share of its VM: the VM price times its GPUs
  over the VM's GPUs (the published implementation's share; P1j charges the whole VM,
  which would make every job on a packed VM pay for all of it); ``f_bar = sum_assigned
  M_j / (pi_j + w_j tau_j)`` (maximised; postponed jobs add nothing).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from andreas import levels
from andreas.limits import J_PER_KWH, SECONDS_PER_HOUR
from andreas.model import (CatalogEntry, Energy, Job, Node, Params, Plan, Postponement,
                           Progress, Snapshot)



def c_ng_per_hour(power_w: float, energy: Energy) -> float:
    """Energy cost per hour of a node drawing ``power_w``: P [kW] * PUE * price [per kWh]."""
    return power_w / 1000.0 * energy.pue * energy.price_per_kwh


def kwh_cost(kwh: float, energy: Energy, t0_s: float | None = None,
             t1_s: float | None = None) -> float:
    """THE rule that turns IT energy into money; every bill (simulator, reports, views,
    validation, plans) comes through here. ``kwh`` drawn evenly over [t0, t1): with a
    tariff, kWh x the mean of price x PUE over the interval (the integral / its length;
    at an instant, t0 == t1, the rate of that hour); without a tariff, or without an
    interval, kWh x PUE x price (with a tariff: its means, the reference rate)."""
    if energy.tariff is None or t0_s is None or t1_s is None:
        return kwh * energy.pue * energy.price_per_kwh
    if t1_s <= t0_s:
        return kwh * energy.tariff.price_at(t0_s) * energy.tariff.pue_at(t0_s)
    return kwh * energy.tariff.integral(t0_s, t1_s) / (t1_s - t0_s)


def energy_cost(energy_j: float, energy: Energy) -> float:
    """The bill for ``energy_j`` joules of IT energy: kWh * PUE * price."""
    return kwh_cost(energy_j / J_PER_KWH, energy)


def energy_time_s(energy: Energy, now_s: float, t_s):
    """The run time c_ng is charged for, so that ``c_ng * energy_time_s / 3600`` is the
    energy cost of running [now, now + t): ``t`` itself at a constant price; with a tariff
    the integral of price x PUE over the interval divided by the reference rate
    ``pue * price_per_kwh`` that c_ng is quoted at (exact: the reference cancels).
    Increasing in ``t``, so "until the node's first job ends" keeps its meaning.
    Scalars or numpy arrays."""
    if energy.tariff is None:
        return t_s
    return energy.tariff.integral(now_s, now_s + t_s) / (energy.pue * energy.price_per_kwh)


def interval_cost(joules: float, t0_s: float, t1_s: float, energy: Energy) -> float:
    """The bill for ``joules`` of IT energy drawn at constant power over [t0, t1): with a
    tariff, power x the integral of price x PUE; without, :func:`energy_cost`."""
    if energy.tariff is None or t1_s <= t0_s:
        return energy_cost(joules, energy)
    return kwh_cost(joules / J_PER_KWH, energy, t0_s, t1_s)


def run_energy_cost(snapshot: Snapshot, power_w: float, t_s: float) -> float:
    """The energy cost of drawing ``power_w`` for ``t_s`` from the snapshot's time, as
    pi_j charges it: c_ng x the charged time (:func:`charged_s`; the run time itself
    without a tariff, so ``t / 3600 * c_ng`` exactly)."""
    return charged_s(snapshot, t_s) / SECONDS_PER_HOUR * c_ng_per_hour(power_w, snapshot.energy)


def with_tariff(energy: Energy, tariff_file) -> Energy:
    """``energy`` priced by a tariff file (``formats.tariff.TariffFile``): hours without a
    PUE column take ``energy.pue``; the reference rate becomes the tariff's means."""
    tariff = tariff_file.tariff(energy.pue)
    return Energy(pue=tariff.mean_pue, price_per_kwh=tariff.mean_price, tariff=tariff)


def tariff_blind(energy: Energy) -> Energy:
    """What a planner that ignores the tariff sees: its mean price and mean PUE, constant."""
    return Energy(pue=energy.pue, price_per_kwh=energy.price_per_kwh)


def charged_s(snapshot: Snapshot, t_s):
    """:func:`energy_time_s` of a run of ``t_s`` starting at the snapshot's time; a cloud
    VM's price does not follow the energy tariff, so there it is ``t_s``."""
    return t_s if snapshot.cloud else energy_time_s(snapshot.energy, snapshot.now_s, t_s)


def tardiness_s(finish_s: float, due_s: float) -> float:
    return max(0.0, finish_s - due_s)


def node_cost_per_hour(snapshot: Snapshot, node_name: str, busy_gpus: int,
                       node_configs: dict[str, str] | None = None) -> float:
    """c_ng of a node with ``busy_gpus`` busy: measured power curve, or (cloud) its VM price."""
    if snapshot.cloud:
        entry = _catalog(snapshot)[(node_configs or {})[node_name]]
        return entry.cost_per_hour if busy_gpus > 0 else 0.0
    node = _nodes(snapshot)[node_name]
    return c_ng_per_hour(node.power_w[busy_gpus], snapshot.energy)


def node_classes(snapshot: Snapshot) -> dict[str, tuple]:
    """Node name -> class. Nodes of one class are interchangeable: same GPU type, count and
    power curve, and power limits where they have any (cloud: the catalog entry the node
    runs now, its ``config``)."""
    if snapshot.cloud:
        return {n.name: ("vm", n.config) for n in snapshot.nodes}
    return {n.name: (n.gpu_type, n.gpus, tuple(n.power_w))
            + ((n.power_limits,) if n.power_limits is not None else ()) for n in snapshot.nodes}


def job_time_s(snapshot: Snapshot, job: Job, cls: tuple, gpu_type: str, gpus: int,
               classes: Mapping[str, tuple], factor: float = 1.0) -> float | None:
    """t_jng on ``gpus`` GPUs of a node of class ``cls``: a running job continues (keeping its
    partial epoch) only on its own class and GPU count, at any power limit (a limit changes
    while the job runs); anywhere else it restarts. ``factor``: the limit's time factor."""
    continuing = (job.running is not None and job.running.gpus == gpus
                  and classes[job.running.node] == cls)
    return job.time_s(gpu_type, gpus, snapshot.params, continuing=continuing, factor=factor)


@dataclass(frozen=True, kw_only=True)
class NodeKind:
    """A kind of node a job can be placed on: its class, GPU type and count, and the cost
    per hour ``pi`` charges a job on g of its GPUs (``price_h[g]``; index 0 unused)."""

    cls: tuple
    gpu_type: str
    gpus: int
    price_h: tuple[float, ...]
    node: Node | None = None      # on premise: one node of the class (its power levels)

    def factors(self, job: Job) -> tuple[float, ...]:
        """The time factors of the power levels ``job`` may run at here (1.0: default)."""
        if self.node is None:
            return (1.0,)
        return tuple(o.time_factor for o in levels.options(job, self.node))


def node_kinds(snapshot: Snapshot, classes: dict[str, tuple] | None = None
               ) -> tuple[NodeKind, ...]:
    """Every kind of node once: on premise one per node class, in the cloud one per VM type."""
    classes = classes if classes is not None else node_classes(snapshot)
    if snapshot.cloud:
        return tuple(NodeKind(cls=("vm", c.name), gpu_type=c.gpu_type, gpus=c.gpus,
                              price_h=(0.0,) + tuple(c.cost_per_hour * g / c.gpus
                                                     for g in range(1, c.gpus + 1)))
                     for c in snapshot.catalog)
    seen: dict[tuple, NodeKind] = {}
    for n in snapshot.nodes:
        cls = classes[n.name]
        if cls not in seen:
            seen[cls] = NodeKind(cls=cls, gpu_type=n.gpu_type or "", gpus=n.gpus,
                                 price_h=tuple(c_ng_per_hour(w, snapshot.energy)
                                               for w in n.power_w), node=n)
    return tuple(seen.values())


def best_restart_s(snapshot: Snapshot, job: Job,
                   kinds: tuple[NodeKind, ...] | None = None) -> float | None:
    """The job's remaining time, if it (re)starts, on its best configuration: the cheapest
    that meets its due date (t * c, c as in pi below), else the fastest (the papers' rule)."""
    fastest = cheapest = None
    for kind in kinds if kinds is not None else node_kinds(snapshot):
        for g in range(1, kind.gpus + 1):
            t = job.time_s(kind.gpu_type, g, snapshot.params, continuing=False)
            if t is None:
                continue
            if fastest is None or t < fastest:
                fastest = t
            if snapshot.now_s + t < job.due_s:
                value = charged_s(snapshot, t) * kind.price_h[g]
                if cheapest is None or value < cheapest[0]:
                    cheapest = (value, t)
    return cheapest[1] if cheapest is not None else fastest


def lost_s(job: Job, epoch_s: float, params: Params) -> float:
    """The work a running job throws away if it stops now: the time since its last
    checkpoint (its partial epoch, ``params.progress == "epoch"``; nothing in the papers'
    ``"exact"`` mode) plus the restart overhead its next start pays."""
    if job.running is None:
        return 0.0
    partial = 0.0
    if params.progress == Progress.EPOCH:
        partial = (job.epochs_done - math.floor(job.epochs_done + 1e-9)) * epoch_s
    return max(0.0, partial) + params.restart_overhead_s


def move_costs(weight, due_s, now_s: float, t_keep, lost, rate_h, cloud: bool,
               margin: float = 0.0):
    """What f_obj (cloud: f_mix) charges a running job that does not continue in place,
    as (same, change, stop): the job's money for the work it redoes, ``lost`` seconds
    at ``rate_h`` per hour (its configuration's share of the VM price; on premise its
    GPUs' power above the node's idle draw x PUE x price), and
    - ``same``: it keeps its node class and GPU count but moves to another node, where
      ``t_jng`` does not see the restart: the redone work's money plus the lateness it
      adds, ``w ((now + t + lost - d)+ - (now + t - d)+)``;
    - ``change``: another class or GPU count, whose ``t_jng`` already counts the redone
      work (lateness; in the cloud its ``rank``, money too): on premise the money only;
    - ``stop``: postponed, whose postponement term prices lateness only: the money.
    Zero in the papers' mode (exact progress, no overhead): their plans are unchanged.
    ``margin`` (the policies' ``move_margin``, a hysteresis): the redone work's money
    counts ``1 + margin`` times, so a move must save ``margin`` times its own cost
    (in the cloud's ``change`` the extra ``margin`` times: ``t_jng`` holds the first).
    Numpy arrays (one entry per job) or floats."""
    money = lost * rate_h / SECONDS_PER_HOUR
    late = (np.maximum(0.0, now_s + t_keep + lost - due_s)
            - np.maximum(0.0, now_s + t_keep - due_s))
    charged = money * (1.0 + margin)
    same = charged + weight * late
    change = money * margin if cloud else charged
    return same, change, charged


def job_move_costs(snapshot: Snapshot, job: Job, margin: float = 0.0
                   ) -> tuple[float, float, float]:
    """:func:`move_costs` of one running job on its current configuration (with its
    ``margin``); (0, 0, 0) for a waiting job or one whose node or VM the snapshot does
    not know."""
    run = job.running
    if run is None:
        return 0.0, 0.0, 0.0
    node = _nodes(snapshot).get(run.node)
    if node is None:
        return 0.0, 0.0, 0.0
    if snapshot.cloud:
        entry = _catalog(snapshot).get(node.config or "")
        if entry is None or not job.runs_on(entry.gpu_type, run.gpus):
            return 0.0, 0.0, 0.0
        gpu_type, rate = entry.gpu_type, entry.cost_per_hour * run.gpus / entry.gpus
    else:
        if node.gpu_type is None or not job.runs_on(node.gpu_type, run.gpus):
            return 0.0, 0.0, 0.0
        gpu_type = node.gpu_type
        rate = (c_ng_per_hour(node.power_w[run.gpus], snapshot.energy)
                - c_ng_per_hour(node.power_w[0], snapshot.energy))
    epoch_s = job.epoch_time_s[gpu_type][run.gpus - 1]
    same, change, stop = move_costs(job.weight, job.due_s, snapshot.now_s,
                                    job.epochs_left * epoch_s,
                                    lost_s(job, epoch_s, snapshot.params), rate,
                                    snapshot.cloud, margin)
    return float(same), float(change), float(stop)


def postponement_costs(params: Params, now_s: float, weight, due_s, best_s, slowest_s):
    """What f_obj charges for postponed jobs (see above); numpy arrays or floats."""
    if params.postponement == Postponement.PAPER:
        return params.rho * weight * np.maximum(0.0, now_s + params.period_s + slowest_s - due_s)
    late_now = np.maximum(0.0, now_s + best_s - due_s)
    late_after = np.maximum(0.0, now_s + params.period_s + best_s - due_s)
    return weight * (late_now + params.rho * (late_after - late_now))


def postponement_cost(snapshot: Snapshot, job: Job, classes: dict[str, tuple] | None = None,
                      kinds: tuple[NodeKind, ...] | None = None) -> float:
    """What f_obj charges for leaving ``job`` waiting until the next period."""
    classes = classes if classes is not None else node_classes(snapshot)
    kinds = kinds if kinds is not None else node_kinds(snapshot, classes)
    best = best_restart_s(snapshot, job, kinds)
    if best is None:
        return 0.0
    return float(postponement_costs(snapshot.params, snapshot.now_s, job.weight, job.due_s,
                                    best, max_time_s(snapshot, job, classes, kinds)))


def max_time_s(snapshot: Snapshot, job: Job, classes: dict[str, tuple] | None = None,
               kinds: tuple[NodeKind, ...] | None = None) -> float:
    """M_j: the job's remaining time on its slowest feasible configuration."""
    classes = classes if classes is not None else node_classes(snapshot)
    worst = 0.0
    for kind in kinds if kinds is not None else node_kinds(snapshot, classes):
        cls, gpu_type, gpus = kind.cls, kind.gpu_type, kind.gpus
        for g in range(1, gpus + 1):
            for factor in kind.factors(job):
                t = job_time_s(snapshot, job, cls, gpu_type, g, classes, factor)
                if t is not None:
                    worst = max(worst, t)
    return worst


def switch_targets(t_cur: np.ndarray, pi_cur: np.ndarray, t: np.ndarray, pi: np.ndarray,
                   left: np.ndarray, runnable: np.ndarray) -> np.ndarray:
    """Where a job on time on its current configuration (``t_cur`` seconds for its
    remaining work, paying ``pi_cur``) could later switch to another (``t``, ``pi``) and
    still end on time, paying less: the other is slower, late if started now (``left``
    seconds to the due date), and cheaper. Broadcasts; the one rule of the switch model
    (``mix_cost`` prices the mix, ``solution.revisit_s`` times the switch)."""
    return runnable & (t > t_cur) & (t >= left) & (pi < pi_cur)


def switch_share(t_cur: np.ndarray, t_slow: np.ndarray, left: np.ndarray) -> np.ndarray:
    """The share of its remaining work a job does on its current configuration before it
    switches to the slower one of ``switch_targets`` and ends exactly on its due date,
    (t_slow - left) / (t_slow - t_cur): while it runs, the slower one's remaining time
    shrinks in proportion, so the switch comes ``share * t_cur`` seconds from now."""
    return (t_slow - left) / (t_slow - t_cur)


def mix_cost(pi: np.ndarray, t: np.ndarray, left: np.ndarray, in_dstar: np.ndarray,
             runnable: np.ndarray) -> np.ndarray:
    """(J, C): for each on-time configuration c of a job, the least it pays for its
    remaining work if it runs on c now and switches, once on time there, to one slower
    configuration s it pays less on: the mix ending on its due date (``left`` seconds
    away), f pi_c + (1 - f) pi_s with f = (t_s - left) / (t_s - t_c) the share of the work
    done on c; pi_c itself where no such s exists; pi where c is not on time.

    Why: in the cloud a job mixes configurations over its life (revisits,
    ``solution.revisit_s``), so the one to start on is not the cheapest on-time one but
    the one whose mix is cheapest. With two GPU types, the cheapest on-time configuration
    can lie above the lower hull of (time, cost): a job then ran through it on its way
    from a fast configuration to a slow one and paid more than the hull's two-point mix
    (the lower bound's, ``simulator/bounds.py``). O(J C^2) in C steps of (J, C) arrays."""
    late = runnable & ~in_dstar & (t >= left[:, None])
    best = np.where(in_dstar, pi, np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        for s in np.flatnonzero(late.any(axis=0)):
            t_slow, pi_slow = t[:, s, None], pi[:, s, None]
            ok = in_dstar & switch_targets(t, pi, t_slow, pi_slow, left[:, None],
                                           late[:, s, None])
            share = switch_share(t, t_slow, left[:, None])
            best = np.where(ok, np.minimum(best, share * pi + (1.0 - share) * pi_slow), best)
    return np.where(in_dstar, best, pi)


def objective_name(cloud: bool) -> str:
    """The objective greedy, rg, pr, milp and hierarchical minimise and report: f_mix in
    the cloud, f_obj on premise (where the two are equal; ``evaluate``)."""
    return "f_mix" if cloud else "f_obj"


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    f_obj: float
    f_bar: float
    f_mix: float      # what greedy, rg and pr minimise: f_obj on premise (see evaluate)
    tardiness_cost: float
    postponement_cost: float
    node_cost: float
    idle_gpus: int
    level_cost: float = 0.0   # what power levels change in the jobs' pi (optimizer/levels.py)
    move_cost: float = 0.0    # what running jobs that do not continue in place throw away


def evaluate(snapshot: Snapshot, plan: Plan, sharing=None,
             move_margin: float = 0.0) -> Evaluation:
    """The proxy objectives of a (feasible) plan, computed directly from their definitions.

    f_obj (the path-relinking paper's P1a): tardiness + postponement + each running node's
    price until its first job ends + mu x idle GPUs; f_bar (P2): sum of M_j / (pi + tard).
    f_mix (andreas, cloud): f_obj with each job paying ``mix_cost`` (its remaining work at
    the cheapest mix its configuration starts) instead of its node's price until the
    node's first job ends, which is left only for the node's idle GPUs. Why: a VM's price
    per hour says nothing of how fast its jobs progress, so f_obj preferred the cheaper
    but slower GPU type and jobs alternated between types (docs/design/objectives.md,
    "Choosing the plan by the mix: f_mix"). On premise f_mix = f_obj.

    ``sharing`` (an ``andreas.interference.Sharing``; default its defaults) predicts the
    slowdown of jobs that share GPUs; it matters only for jobs with a ``Demand``.
    ``move_margin``: the moves' hysteresis (:func:`move_costs`), as rg and pr choose."""
    nodes = _nodes(snapshot)
    catalog = _catalog(snapshot)
    jobs = {j.id: j for j in snapshot.jobs}
    now, params = snapshot.now_s, snapshot.params
    classes = node_classes(snapshot)
    kinds = node_kinds(snapshot, classes)
    tard = post = fbar = mix = lvl = 0.0
    busy: dict[str, int] = defaultdict(int)
    first_end: dict[str, float] = {}
    slow, devices = _shared(snapshot, plan, sharing)
    for a in plan.assignments:
        job = jobs[a.job]
        gpu_type = (catalog[plan.node_configs[a.node]].gpu_type if snapshot.cloud
                    else nodes[a.node].gpu_type)
        cls = ("vm", plan.node_configs[a.node]) if snapshot.cloud else classes[a.node]
        level = _level(snapshot, job, nodes, a)
        t = job_time_s(snapshot, job, cls, gpu_type, a.gpus, classes, level.time_factor)
        if t is None:
            raise ValueError(f"job {a.job}: cannot run on {a.gpus} {gpu_type} GPUs")
        t *= slow.get(a.job, 1.0)
        tau_cost = job.weight * tardiness_s(now + t, job.due_s)
        tard += tau_cost
        if snapshot.cloud:
            entry = catalog[plan.node_configs[a.node]]
            c_job = entry.cost_per_hour * a.gpus / entry.gpus
        else:
            c_job = c_ng_per_hour(nodes[a.node].power_w[a.gpus], snapshot.energy)
        charged = charged_s(snapshot, t)
        pi = charged / SECONDS_PER_HOUR * c_job
        if level.time_factor != 1.0 or level.delta_w:
            # pi at the default, plus what the level changes (optimizer/levels.py)
            t0 = job_time_s(snapshot, job, cls, gpu_type, a.gpus, classes)
            assert t0 is not None
            charged0 = charged_s(snapshot, t0)
            rise = c_job - c_ng_per_hour(nodes[a.node].power_w[0], snapshot.energy)
            change = (charged * (rise + c_ng_per_hour(a.gpus * level.delta_w, snapshot.energy))
                      - charged0 * rise) / SECONDS_PER_HOUR
            pi = charged0 / SECONDS_PER_HOUR * c_job + change
            lvl += change
        fbar += max_time_s(snapshot, job, classes, kinds) / (pi + tau_cost)
        busy[a.node] += a.gpus
        first_end[a.node] = min(first_end.get(a.node, charged), charged)
        if snapshot.cloud:
            mix += _job_mix_cost(snapshot, job, entry, a.gpus, classes)
    for job_id in plan.postponed:
        post += postponement_cost(snapshot, jobs[job_id], classes, kinds)
    node_cost = 0.0
    idle = 0
    busy.update(devices)
    for name, g in busy.items():
        hourly = node_cost_per_hour(snapshot, name, g, dict(plan.node_configs))
        node_cost += first_end[name] / SECONDS_PER_HOUR * hourly
        capacity = (catalog[plan.node_configs[name]].gpus if snapshot.cloud
                    else nodes[name].gpus)
        idle += capacity - g
        if snapshot.cloud:
            mix += first_end[name] / SECONDS_PER_HOUR * hourly * (capacity - g) / capacity
    moves = plan_move_cost(snapshot, plan, classes, move_margin)
    f_obj = tard + lvl + post + node_cost + params.mu * idle + moves
    f_mix = tard + post + mix + params.mu * idle + moves if snapshot.cloud else f_obj
    return Evaluation(f_obj=f_obj, f_bar=fbar, f_mix=f_mix, tardiness_cost=tard,
                      postponement_cost=post, node_cost=node_cost, idle_gpus=idle,
                      level_cost=lvl, move_cost=moves)


def _level(snapshot: Snapshot, job: Job, nodes: dict[str, Node], a) -> levels.LevelOption:
    """The power level of an assignment (``andreas/levels.py``); the default in the cloud."""
    if snapshot.cloud:
        return levels.DEFAULT
    option = levels.option_at(job, nodes[a.node], a.power_limit_w)
    if option is None:
        raise ValueError(f"job {a.job}: cannot run at {a.power_limit_w:g} W on {a.node}")
    return option


def plan_move_cost(snapshot: Snapshot, plan: Plan, classes: dict[str, tuple],
                   margin: float = 0.0) -> float:
    """The move costs (:func:`move_costs`) of the running jobs a plan stops, moves or
    resizes: a job continues in place only on its node, at its GPU count (cloud: and the
    node keeps its VM)."""
    where = {a.job: a for a in plan.assignments}
    postponed = set(plan.postponed)
    nodes = _nodes(snapshot)
    total = 0.0
    can = _continuable(snapshot)
    for job in snapshot.jobs:
        run = job.running
        if run is None or job.id not in can or (job.id not in where
                                                 and job.id not in postponed):
            continue
        same, change, stop = job_move_costs(snapshot, job, margin)
        a = where.get(job.id)
        if a is None:
            total += stop
            continue
        vm_kept = (not snapshot.cloud or run.node not in nodes
                   or plan.node_configs.get(a.node) == nodes[run.node].config)
        if a.node == run.node and a.gpus == run.gpus and vm_kept:
            continue
        new_cls = ("vm", plan.node_configs.get(a.node)) if snapshot.cloud else classes[a.node]
        old_cls = classes.get(run.node)
        total += same if (a.gpus == run.gpus and new_cls == old_cls) else change
    return total


def _job_mix_cost(snapshot: Snapshot, job: Job, entry: CatalogEntry, gpus: int,
                  classes: dict[str, tuple]) -> float:
    """``mix_cost`` of a cloud job on ``gpus`` GPUs of VM ``entry``, over every (VM, g)
    of the catalog the job could switch to."""
    options = [(e, g) for e in snapshot.catalog for g in range(1, e.gpus + 1)]
    t = np.full(len(options), np.inf)
    pi = np.full(len(options), np.inf)
    for i, (e, g) in enumerate(options):
        s = job_time_s(snapshot, job, ("vm", e.name), e.gpu_type, g, classes)
        if s is not None:
            t[i] = s
            pi[i] = charged_s(snapshot, s) / SECONDS_PER_HOUR * e.cost_per_hour * g / e.gpus
    runnable = np.isfinite(t)
    left = job.due_s - snapshot.now_s
    in_dstar = runnable & (t < left)
    row = mix_cost(pi[None], t[None], np.array([left]), in_dstar[None], runnable[None])[0]
    return float(row[options.index((entry, gpus))])


def _continuable(snapshot: Snapshot) -> set[str]:
    """Running jobs that could continue where they run: every running job of their node
    can run there at its GPU count (the optimizer's pins, ``problem._pins``)."""
    nodes, catalog = _nodes(snapshot), _catalog(snapshot)
    by_node: dict[str, list[Job]] = defaultdict(list)
    for job in snapshot.jobs:
        if job.running is not None:
            by_node[job.running.node].append(job)
    out: set[str] = set()
    for name, jobs in by_node.items():
        node = nodes.get(name)
        if node is None:
            continue
        entry = catalog.get(node.config or "") if snapshot.cloud else None
        gpu_type = entry.gpu_type if entry is not None else node.gpu_type
        if snapshot.cloud and entry is None:
            continue
        capacity = entry.gpus if entry is not None else node.gpus
        if gpu_type and all(j.running and j.running.gpus <= capacity
                            and j.runs_on(gpu_type, j.running.gpus) for j in jobs):
            out.update(j.id for j in jobs)
    return out


def _shared(snapshot: Snapshot, plan: Plan, sharing) -> tuple[dict[str, float],
                                                                dict[str, int]]:
    """Per job 1 + theta (its slowest worker) and per node the GPUs in use, for plans with
    rigid tasks; empty for plans of elastic jobs only."""
    if snapshot.cloud or not any(j.demand is not None for j in snapshot.jobs):
        return {}, {}
    from andreas.interference import Sharing, thetas
    from andreas.resources import Ledger, demand_of

    model = sharing or Sharing()
    jobs = {j.id: j for j in snapshot.jobs}
    led = Ledger(snapshot.nodes)
    placed = []
    for a in plan.assignments:
        demand = demand_of(jobs[a.job], a.gpus)
        i = led.index[a.node]
        run = jobs[a.job].running
        slots = a.gpu_ids or (run.gpu_ids if run is not None and run.node == a.node else ()) \
            or led.fit(demand, i)
        if not slots:
            raise ValueError(f"job {a.job}: does not fit node {a.node}")
        led.place(demand, i, slots, a.job)
        placed.append((a.job, i, slots))
    slow = {}
    for job_id, i, slots in placed:
        theta = 0.0
        for s in slots:
            residents = led.on_gpu(i, s)
            if len(residents) > 1:
                k = next(k for k, (o, _) in enumerate(residents) if o == job_id)
                theta = max(theta, thetas(residents, model)[k])
        slow[job_id] = 1.0 + theta
    devices = {snapshot.nodes[i].name: led.busy_gpus_of(i) for _, i, _ in placed}
    return slow, devices


def _nodes(snapshot: Snapshot):
    return {n.name: n for n in snapshot.nodes}


def _catalog(snapshot: Snapshot):
    return {c.name: c for c in snapshot.catalog}
