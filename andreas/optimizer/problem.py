"""A snapshot compiled once into numpy arrays that every policy's hot loop reads.

Identical nodes are interchangeable for cost and time, so nodes are grouped into
*classes* (on-premise: same GPU type, count and power curve; cloud: one class per
catalog entry). A *configuration* is (class, g): the unit the papers' D*_j, best
configuration and randomized choice work on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from andreas.costs import (SECONDS_PER_HOUR, best_restart_s, c_ng_per_hour, charged_s,
                           job_move_costs, job_time_s, mix_cost, node_classes, node_kinds,
                           postponement_costs)
from andreas.model import Job, Node, Snapshot
from andreas.optimizer import levels as config_levels
from andreas.policies import ORDERS, EnergyPrice

INF = np.inf


class KernelArrays(NamedTuple):
    """The arrays the compiled kernels read (``kernels.py``), as one structure; the names
    are ``Problem``'s. ``Problem.kernel`` builds it once; a caller that changes a part
    (``horizon.construct_one``) makes a copy with ``_replace``."""

    cloud: bool
    mu: float
    node_class: np.ndarray
    class_gpus: np.ndarray
    class_group: np.ndarray
    class_cost_h: np.ndarray
    cfg_class: np.ndarray
    cfg_g: np.ndarray
    cfg_group: np.ndarray
    cfg_index: np.ndarray
    pack_class: np.ndarray
    group_cheapest: np.ndarray
    group_best: np.ndarray
    group_nodes: np.ndarray
    group_count: np.ndarray
    t_energy: np.ndarray
    rank: np.ndarray
    job_cost: np.ndarray
    fbar_term: np.ndarray
    post_cost: np.ndarray
    runnable: np.ndarray
    pin_job: np.ndarray
    pin_node: np.ndarray
    pin_cfg: np.ndarray
    # move costs: empty where no move costs anything (the papers' mode)
    run_node: np.ndarray
    run_cfg: np.ndarray
    cfg_base: np.ndarray
    mv_same: np.ndarray
    mv_change: np.ndarray
    mv_stop: np.ndarray
    keep_node: bool = False     # a running job at its own (class, g) stays on its node


@dataclass(frozen=True, eq=False)
class Problem:
    snapshot: Snapshot
    jobs: tuple[Job, ...]
    node_names: tuple[str, ...]
    cloud: bool
    # classes (K)
    class_name: tuple[str, ...]
    class_type: tuple[str, ...]
    class_gpus: np.ndarray        # (K,) GPUs per node of the class
    class_cost_h: np.ndarray      # (K, L) cost per hour with g busy GPUs, L = max GPUs + 1
    class_nodes: np.ndarray       # (K, N) on-premise node indices of each class, padded with -1
    class_count: np.ndarray       # (K,) on-premise nodes per class (cloud: N for every class)
    node_class: np.ndarray        # (N,) on-premise class of each node (cloud: -1)
    # configurations (C): (class, g, power level), levels contiguous (optimizer/levels.py)
    cfg_class: np.ndarray         # (C,)
    cfg_g: np.ndarray             # (C,)
    cfg_level: np.ndarray         # (C,) power level index within the class (0: default)
    cfg_limit_w: np.ndarray       # (C,) the level's power limit, nan: no limits there
    # per job (J) and per job x configuration (J, C)
    t: np.ndarray                 # remaining seconds, inf where the job cannot run
    t_energy: np.ndarray          # seconds c_ng is charged for (costs.charged_s): t itself
    #                               at a constant price; with a tariff, integral / mean rate
    pi: np.ndarray                # deployment cost t * c / 3600 (c of the job's own g / VM price)
    rank: np.ndarray              # what the constructions rank on-time configurations by
    #                               and f_mix charges a job: cloud mix_cost, else pi
    tard_cost: np.ndarray         # w * max(0, now + t - d)
    level_cost: np.ndarray        # pi minus pi at the default level of (class, g): 0 if none
    job_cost: np.ndarray          # what f_obj charges a placed job: tard_cost + level_cost
    fbar_term: np.ndarray         # M / (pi + tard_cost), 0 where the job cannot run
    runnable: np.ndarray          # bool
    in_dstar: np.ndarray          # bool: now + t < d
    pref: np.ndarray              # (J, C) configurations, best first (D* by rank, then by t)
    max_t: np.ndarray             # (J,) M_j
    post_cost: np.ndarray         # (J,) f_obj of postponing the job (costs.postponement_costs)
    pressure: np.ndarray          # (J,) Delta_j
    weight: np.ndarray            # (J,)
    due: np.ndarray               # (J,) due dates d_j (snapshot clock)
    queue: np.ndarray             # (J,) job indices in queue order, first to be placed first
    # placement groups (G): where a configuration may be packed. On premise a group is a
    # node class; in the cloud it is a GPU type, whose nodes open as its largest VM and
    # are downsized afterwards (see construction.py).
    class_group: np.ndarray       # (K,) group of each class
    cfg_group: np.ndarray         # (C,) group of each configuration
    cfg_index: np.ndarray         # (K, L) configuration of (class, g), -1 if none
    pack_class: np.ndarray        # (G,) class a node of the group opens as (cloud: largest VM)
    group_cheapest: np.ndarray    # (G, L) cheapest class of the group with >= l GPUs, -1 if none
    group_best: np.ndarray        # (G, L) cloud: least price per hour of VMs holding l GPUs
    group_nodes: np.ndarray       # (G, N) on premise: nodes in opening order (running last)
    group_count: np.ndarray       # (G,) on premise: nodes per group (cloud: N)
    # running jobs that can continue where they are (the baselines keep them), grouped by
    # node: job, node, configuration (its node's class at its GPU count)
    pin_job: np.ndarray           # (R,)
    pin_node: np.ndarray          # (R,)
    pin_cfg: np.ndarray           # (R,)
    # move costs (costs.move_costs) of running jobs that do not continue in place; the
    # node (physical index) and configuration a running job continues on, -1 if none
    run_node: np.ndarray          # (J,)
    run_cfg: np.ndarray           # (J,) at the default power level of its (class, g)
    cfg_base: np.ndarray          # (C,) a configuration at the default level of its (class, g):
    #                               a level changes in place, so moves compare these
    mv_same: np.ndarray           # (J,) moved to another node of its class at its g
    mv_change: np.ndarray         # (J,) another class or GPU count
    mv_stop: np.ndarray           # (J,) postponed
    keep_node: bool = False       # the constructions keep running jobs' nodes (kernels.py)
    above_idle: bool = False      # runs priced above idle (EnergyPrice.ABOVE_IDLE, on premise)
    move_margin: float = 0.0      # the moves' hysteresis the plans were chosen with

    @property
    def moves_cost(self) -> bool:
        """Restarts cost something in this setting: a restart overhead (whether or not a
        job runs now: the simulator's default mode, the manager), or a running job's
        partial epoch; the papers' mode: False."""
        return self.snapshot.params.restart_overhead_s > 0 or self.has_moves

    @property
    def has_moves(self) -> bool:
        """Some running job loses work if moved (the papers' mode: none)."""
        return bool(self.mv_same.any() or self.mv_change.any() or self.mv_stop.any())

    @cached_property
    def kernel(self) -> KernelArrays:
        """The kernels' view of this problem, built on first use."""
        if self.has_moves:
            moves = (self.run_node, self.run_cfg, self.cfg_base, self.mv_same,
                     self.mv_change, self.mv_stop)
        else:   # the kernels then skip the move costs, so those rows are bit for bit the same
            none, empty = np.zeros(0, np.int64), np.zeros(0)
            moves = (none, none, none, empty, empty, empty)
        return KernelArrays(
            bool(self.cloud), float(self.snapshot.params.mu), self.node_class, self.class_gpus,
            self.class_group, self.class_cost_h, self.cfg_class, self.cfg_g, self.cfg_group,
            self.cfg_index, self.pack_class, self.group_cheapest, self.group_best,
            self.group_nodes, self.group_count, self.t_energy, self.rank, self.job_cost,
            self.fbar_term, self.post_cost, self.runnable, self.pin_job, self.pin_node,
            self.pin_cfg, *moves, bool(self.keep_node))

    @property
    def n_jobs(self) -> int:
        return len(self.jobs)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_levels(self) -> int:
        return self.class_cost_h.shape[1]


VM_TIE = 1e-9   # per VM: of two equally priced sets of VMs, the one with fewer VMs

SHORTAGE_ORDER = "wspt-atc"     # wspt-late, late-atc while GPUs are short (construction.py)
DEFAULT_ORDER = SHORTAGE_ORDER
ATC_K = 0.25    # look-ahead of the apparent tardiness cost, in mean processing times
# A run planned to end just before its due date is late after one restart, so where the
# cheapest configuration tends to be the slowest a run must end with this share of its
# time to spare: D* with ``EnergyPrice.ABOVE_IDLE`` (docs/measurements/2026-11-28-marginal)
# and every run of horizon's model.
ON_TIME_MARGIN = 0.15
# ``EnergyPrice.ABOVE_IDLE``: a run up to this share longer than the job's fastest pays
# no idle tail of its own (``_beyond_known_end``): other work usually comes meanwhile.
# Measured on the generated grid and the Zeus traces (docs/measurements/2026-11-28-loose:
# 0.3 against 0.15 and none).
TAIL_ALLOWANCE = 0.3


def queue_order(pressure: np.ndarray, weight: np.ndarray, t_min: np.ndarray,
                order: str = DEFAULT_ORDER) -> np.ndarray:
    """The sorted queue of Algorithm 1, first job first.

    ``pressure`` is the papers' order: decreasing Delta_j, so jobs that can no longer meet
    their due date (Delta_j >= 0) come first, the most late of them first. ``wspt-late``
    keeps that partition but orders the late jobs by weight / remaining time (Smith's
    rule, which minimises weighted tardiness); jobs that can still be on time keep the
    pressure order. Under overload it cut rg's long-term cost by 45-65 % in the
    simulator (N = 20, high arrivals) and changes nothing while nobody is late.
    ``atc`` orders every job by its apparent tardiness cost (``atc_order``);
    ``late-atc`` keeps wspt-late's late jobs first and orders the others by ATC instead
    of least slack; ``wspt-atc`` (the default) is wspt-late here,
    ``construction.compile_ordered`` switches it to late-atc on premise while the greedy
    plan leaves a job waiting.
    """
    if order not in ORDERS:
        raise ValueError(f"order: must be one of {ORDERS}, got {order!r}")
    by_pressure = np.argsort(-pressure, kind="stable")
    if order == "pressure":
        return by_pressure
    if order == "atc":
        return atc_order(pressure, weight, t_min)
    if order == "late-atc":     # late jobs first by Smith's rule, then the others by ATC
        atc = atc_order(pressure, weight, t_min)
        return atc[np.argsort(~(pressure[atc] >= 0), kind="stable")]
    late = pressure >= 0
    wspt = np.where(late, weight / np.maximum(t_min, 1e-9), -np.inf)
    late_idx = np.flatnonzero(late)
    late_sorted = late_idx[np.argsort(-wspt[late_idx], kind="stable")]
    return np.concatenate([late_sorted, by_pressure[~late[by_pressure]]])


def atc_order(pressure: np.ndarray, weight: np.ndarray, t_min: np.ndarray) -> np.ndarray:
    """Apparent tardiness cost (Vepsalainen and Morton): w / p * exp(-slack / (K p_mean)),
    the largest first, p the job's fastest remaining time; a job with no slack left by
    Smith's rule alone, one with slack behind it unless it is short and heavy."""
    finite = np.isfinite(t_min)
    p = np.maximum(np.where(finite, t_min, 0.0), 1e-9)
    p_mean = float(p[finite].mean()) if finite.any() else 1.0
    slack = np.maximum(0.0, np.where(np.isfinite(pressure), -pressure, 0.0))
    index = np.where(finite, weight / p * np.exp(-slack / (ATC_K * p_mean)), -np.inf)
    return np.argsort(-index, kind="stable")


def compile_problem(snapshot: Snapshot, *, order: str = DEFAULT_ORDER,
                    energy_price: str = EnergyPrice.NODE, keep_node: bool = False,
                    move_margin: float = 0.0) -> Problem:
    """Build every array the policies need; O(J * C) (cloud: O(J * C^2), ``mix_cost``) and
    done once per decision; ``energy_price``: how runs are priced on premise
    (``policies.EnergyPrice``); ``keep_node``: the constructions keep a running job on its
    node when they place it at its own (class, g) and the node still has the GPUs;
    ``move_margin``: the moves' hysteresis (``costs.move_costs``)."""
    classes = node_classes(snapshot)
    cl = _classes(snapshot, classes)
    above = EnergyPrice(energy_price) is EnergyPrice.ABOVE_IDLE and not snapshot.cloud
    idle_h = float((cl.n_nodes * cl.cost_h[:, 0]).sum())     # every node idle, per hour
    if above:
        has = np.arange(cl.cost_h.shape[1])[None, :] <= cl.gpus[:, None]
        cl = cl._replace(cost_h=np.where(has, cl.cost_h - cl.cost_h[:, :1], 0.0))
    jobs = snapshot.jobs
    lv = config_levels.configurations(jobs, cl.reps, cl.gpus)
    due = np.array([j.due_s for j in jobs], dtype=float)
    weight = np.array([j.weight for j in jobs], dtype=float)
    pr = _prices(snapshot, cl, lv, _times(snapshot, cl, lv, classes), due)
    groups = _groups(snapshot, cl.type, cl.gpus, cl.cost_h, cl.nodes, cl.n_nodes, lv.cfg_class,
                     lv.cfg_g, lv.cfg_level, cl.cost_h.shape[1])
    pins = _pins(snapshot, pr["t"], groups["cfg_index"], cl.name, cl.node_class, lv)
    tail = _beyond_known_end(pr["t"], pr["runnable"], pins, idle_h) if above else None
    if tail is not None:
        pr["pi"] = pr["pi"] + tail
    terms = _job_terms(snapshot, classes, pr, weight, due, lv.cfg_g, order,
                       ON_TIME_MARGIN if above else 0.0)
    class_nodes = cl.nodes
    if not snapshot.cloud:   # new jobs open free nodes first, running jobs' nodes last
        groups["group_nodes"] = _running_last(groups["group_nodes"], groups["group_count"],
                                              pins[1], cl.node_class)
        class_nodes = groups["group_nodes"]
    job_cost = terms["tard_cost"] + pr["level_cost"] if lv.active else terms["tard_cost"]
    job_cost = job_cost + tail if tail is not None else job_cost
    return Problem(
        snapshot=snapshot, jobs=tuple(jobs), node_names=tuple(x.name for x in snapshot.nodes),
        cloud=snapshot.cloud, class_name=cl.name, class_type=cl.type, class_gpus=cl.gpus,
        class_cost_h=cl.cost_h, class_nodes=class_nodes, class_count=cl.n_nodes,
        node_class=cl.node_class, cfg_class=lv.cfg_class, cfg_g=lv.cfg_g,
        cfg_level=lv.cfg_level, cfg_limit_w=lv.cfg_limit_w, **pr, **terms, job_cost=job_cost,
        weight=weight, due=due, **groups, pin_job=pins[0], pin_node=pins[1], pin_cfg=pins[2],
        **_moves(snapshot, pins, lv, move_margin), keep_node=keep_node, above_idle=above,
        move_margin=move_margin)


class _Classes(NamedTuple):
    """Node classes (K) of a snapshot and the nodes of each (``compile_problem``)."""

    name: tuple[str, ...]
    type: tuple[str, ...]
    gpus: np.ndarray
    cost_h: np.ndarray
    nodes: np.ndarray
    n_nodes: np.ndarray     # (K,) nodes per class (cloud: N)
    node_class: np.ndarray
    keys: list          # what ``costs.job_time_s`` knows a class by
    reps: list          # a node of each class (cloud: None, a VM's price has no levels)


def _classes(snapshot: Snapshot, node_keys: dict) -> _Classes:
    """Cloud: one class per catalog entry; on premise: nodes of the same GPU type, count
    and power curve (``costs.node_classes``), in first-seen order."""
    n = len(snapshot.nodes)
    if snapshot.cloud:
        entries = snapshot.catalog
        class_gpus = np.array([e.gpus for e in entries], dtype=np.int64)
        cost_h = np.zeros((len(entries), int(class_gpus.max()) + 1))
        for k, e in enumerate(entries):
            cost_h[k, 1:] = e.cost_per_hour
        names = tuple(e.name for e in entries)
        return _Classes(names, tuple(e.gpu_type for e in entries), class_gpus, cost_h,
                        np.full((len(entries), max(n, 1)), -1, dtype=np.int64),
                        np.full(len(entries), n, dtype=np.int64),
                        np.full(n, -1, dtype=np.int64), [("vm", x) for x in names],
                        [None] * len(entries))
    keys: dict[tuple, int] = {}
    node_class = np.empty(n, dtype=np.int64)
    reps: list[Node | None] = []
    for i, node in enumerate(snapshot.nodes):
        key = node_keys[node.name]
        if key not in keys:
            reps.append(node)
        node_class[i] = keys.setdefault(key, len(keys))
    ordered = sorted(keys, key=keys.__getitem__)
    class_gpus = np.array([key[1] for key in ordered], dtype=np.int64)
    cost_h = np.zeros((len(ordered), int(class_gpus.max()) + 1))
    for k, key in enumerate(ordered):
        cost_h[k, : key[1] + 1] = [c_ng_per_hour(p, snapshot.energy) for p in key[2]]
    class_nodes = np.full((len(ordered), max(n, 1)), -1, dtype=np.int64)
    for k in range(len(ordered)):
        members = np.flatnonzero(node_class == k)
        class_nodes[k, : len(members)] = members
    return _Classes(tuple(f"{key[0]}x{key[1]}" for key in ordered),
                    tuple(key[0] for key in ordered), class_gpus, cost_h, class_nodes,
                    np.bincount(node_class, minlength=len(ordered)), node_class, ordered, reps)


def _times(snapshot: Snapshot, cl: _Classes, lv: config_levels.ConfigLevels,
           classes: dict) -> np.ndarray:
    """(J, C) remaining seconds of each job in each configuration, inf where it cannot run."""
    jobs, cfg_class, cfg_g = snapshot.jobs, lv.cfg_class, lv.cfg_g
    t = np.full((len(jobs), len(cfg_class)), INF)
    for c in np.flatnonzero(lv.cfg_level == 0):
        gtype, g, key = cl.type[cfg_class[c]], int(cfg_g[c]), cl.keys[cfg_class[c]]
        for i, job in enumerate(jobs):
            r = job_time_s(snapshot, job, key, gtype, g, classes)
            if r is not None:
                t[i, c] = r
    if lv.active:
        t = config_levels.level_times(t, lv, lambda i, c: job_time_s(
            snapshot, jobs[i], cl.keys[cfg_class[c]], cl.type[cfg_class[c]],
            int(cfg_g[c]), classes, 0.0))
    return t


def _prices(snapshot: Snapshot, cl: _Classes, lv: config_levels.ConfigLevels,
            t: np.ndarray, due: np.ndarray) -> dict[str, np.ndarray]:
    """t, t_energy, pi, level_cost and runnable; with power levels one level per (job,
    class, g) is left, the one the job would choose there."""
    cfg_class, cfg_g = lv.cfg_class, lv.cfg_g
    runnable = np.isfinite(t)
    if snapshot.cloud:   # the job's share of its VM: the price per GPU times its GPUs
        cfg_cost_h = cl.cost_h[cfg_class, 1] * cfg_g / cl.gpus[cfg_class]
    else:
        cfg_cost_h = cl.cost_h[cfg_class, cfg_g]
    t_energy = _charged(snapshot, t, runnable)
    with np.errstate(invalid="ignore"):
        pi = np.where(runnable, t_energy * cfg_cost_h / SECONDS_PER_HOUR, INF)
    level_cost = _level_cost(t_energy, runnable, cl.cost_h, cfg_class, cfg_g, lv,
                             snapshot.energy)
    if lv.active:   # a level's pi: the default's, plus what the level changes
        base = np.arange(len(cfg_class)) - lv.cfg_level
        pi = np.where(lv.cfg_level > 0, pi[:, base] + level_cost, pi)
        t = config_levels.one_level(t, level_cost, snapshot.now_s, due, lv)
        runnable = np.isfinite(t)
        t_energy = np.where(runnable, t_energy, INF)
        pi = np.where(runnable, pi, INF)
        level_cost = np.where(runnable, level_cost, 0.0)
    return {"t": t, "t_energy": t_energy, "pi": pi, "level_cost": level_cost,
            "runnable": runnable}


def _job_terms(snapshot: Snapshot, classes: dict, pr: dict[str, np.ndarray],
               weight: np.ndarray, due: np.ndarray, cfg_g: np.ndarray,
               order: str, margin: float = 0.0) -> dict[str, np.ndarray]:
    """What the objectives charge each job (tardiness, f_bar's term, postponing), its
    ranking of configurations (D*, rank, preference) and the queue; D* holds the
    configurations that end before the due date with ``margin`` x their time to spare."""
    t, pi, runnable = pr["t"], pr["pi"], pr["runnable"]
    now, jobs, (nj, nc) = snapshot.now_s, snapshot.jobs, t.shape
    with np.errstate(invalid="ignore"):
        late = np.maximum(0.0, now + t - due[:, None])
        tard_cost = np.where(runnable, weight[:, None] * late, INF)
    max_t = np.where(runnable, t, -INF).max(axis=1, initial=0.0) if nj else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fbar_term = np.where(runnable, max_t[:, None] / (pi + tard_cost), 0.0)
    in_dstar = runnable & (now + (t * (1.0 + margin) if margin else t) < due[:, None])
    kinds = node_kinds(snapshot, classes)
    best = np.array([best_restart_s(snapshot, job, kinds) or 0.0 for job in jobs], dtype=float)
    post_cost = np.where(runnable.any(axis=1),
                         postponement_costs(snapshot.params, now, weight, due, best, max_t), 0.0)
    t_min = np.where(runnable, t, INF).min(axis=1, initial=INF)
    pressure = now + t_min - due
    # preference: D* by rank ascending, then the rest by t ascending, unrunnable last
    key1 = np.where(in_dstar, 0, np.where(runnable, 1, 2))
    rank = mix_cost(pi, t, due - now, in_dstar, runnable) if snapshot.cloud else pi
    key2 = np.where(in_dstar, rank, np.where(runnable, t, 0.0))
    pref = np.lexsort((np.broadcast_to(cfg_g, (nj, nc)), key2, key1), axis=1) if nj else \
        np.zeros((0, nc), dtype=np.int64)
    return {"tard_cost": tard_cost, "max_t": max_t, "fbar_term": fbar_term,
            "in_dstar": in_dstar, "post_cost": post_cost, "pressure": pressure,
            "rank": rank, "pref": pref.astype(np.int64),
            "queue": queue_order(pressure, weight, t_min, order)}


def _moves(snapshot: Snapshot, pins: tuple[np.ndarray, np.ndarray, np.ndarray],
           lv: config_levels.ConfigLevels, margin: float = 0.0) -> dict[str, np.ndarray]:
    """Where each running job continues (``Problem.run_node``, ``run_cfg``) and what moving
    it costs (``costs.job_move_costs``)."""
    jobs, nj = snapshot.jobs, len(snapshot.jobs)
    run_node = np.full(nj, -1, dtype=np.int64)
    run_cfg = np.full(nj, -1, dtype=np.int64)
    run_node[pins[0]] = pins[1]
    cfg_base = (np.arange(len(lv.cfg_class)) - lv.cfg_level).astype(np.int64)
    run_cfg[pins[0]] = cfg_base[pins[2]]
    moves = np.array([job_move_costs(snapshot, job, margin) if run_node[i] >= 0 else (0.0,) * 3
                      for i, job in enumerate(jobs)], dtype=float).reshape(nj, 3)
    return {"run_node": run_node, "run_cfg": run_cfg, "cfg_base": cfg_base,
            "mv_same": moves[:, 0].copy(), "mv_change": moves[:, 1].copy(),
            "mv_stop": moves[:, 2].copy()}


def _beyond_known_end(t: np.ndarray, runnable: np.ndarray,
                      pins: tuple[np.ndarray, np.ndarray, np.ndarray], idle_h: float
                      ) -> np.ndarray:
    """(J, C) the idle draw of every node (``idle_h`` per hour) for as long as a run
    would end after the last *other* running job continuing in place and after
    ``TAIL_ALLOWANCE`` more than the job's own fastest run: what its configuration adds
    to the cluster's time on if nothing else comes (``EnergyPrice.ABOVE_IDLE``). A
    running job's own run is not one of the others: the longest would otherwise set the
    end itself and never pay for staying slow; its fastest run keeps the cluster on
    whatever it chooses (docs/measurements/2026-11-28-loose)."""
    ends = t[pins[0], pins[2]]
    end = np.full(t.shape[0], float(ends.max()) if len(ends) else 0.0)
    if len(ends):
        top = int(np.argmax(ends))
        end[pins[0][top]] = float(np.delete(ends, top).max(initial=0.0))
    fastest = np.where(runnable, t, INF).min(axis=1, initial=INF)
    end = np.maximum(end, np.where(np.isfinite(fastest), fastest * (1.0 + TAIL_ALLOWANCE),
                                   0.0))
    over = np.maximum(0.0, np.where(runnable, t, 0.0) - end[:, None])
    return np.where(runnable, idle_h * over / SECONDS_PER_HOUR, 0.0)


def _charged(snapshot: Snapshot, t: np.ndarray, runnable: np.ndarray) -> np.ndarray:
    if snapshot.energy.tariff is None or snapshot.cloud:
        return t
    return np.where(runnable, charged_s(snapshot, np.where(runnable, t, 0.0)), INF)


def _level_cost(t_energy: np.ndarray, runnable: np.ndarray,
                class_cost_h: np.ndarray, cfg_class: np.ndarray, cfg_g: np.ndarray,
                lv: config_levels.ConfigLevels, energy) -> np.ndarray:
    """What a level changes in the job's energy cost against the default level of the same
    (class, g): its run at the level draws the node's rise above idle plus its GPUs' change
    (delta_w), the default's run the rise alone (optimizer/levels.py)."""
    if not lv.active:
        return np.zeros_like(t_energy)
    first = np.arange(len(cfg_class)) - lv.cfg_level   # levels follow their default
    rise_h = class_cost_h[cfg_class, cfg_g] - class_cost_h[cfg_class, 0]
    level_h = rise_h[None, :] + c_ng_per_hour(cfg_g * lv.delta_w, energy)
    with np.errstate(invalid="ignore"):
        change = (t_energy * level_h - t_energy[:, first] * rise_h[None, :]) / SECONDS_PER_HOUR
        return np.where(runnable & runnable[:, first] & (lv.cfg_level > 0)[None, :],
                        change, 0.0)


def _groups(snapshot: Snapshot, class_type, class_gpus, class_cost_h, class_nodes, class_count,
            cfg_class, cfg_g, cfg_level, levels: int) -> dict[str, np.ndarray]:
    """Placement groups: node classes on premise, GPU types in the cloud."""
    n_cls = len(class_type)
    cfg_index = np.full((n_cls, levels), -1, dtype=np.int64)
    default = np.flatnonzero(cfg_level == 0)     # a (class, g)'s default power level
    cfg_index[cfg_class[default], cfg_g[default]] = default
    if snapshot.cloud:
        types = list(dict.fromkeys(class_type))
        class_group = np.array([types.index(x) for x in class_type], dtype=np.int64)
    else:
        class_group = np.arange(n_cls, dtype=np.int64)
    n_groups = int(class_group.max()) + 1 if n_cls else 0
    price = class_cost_h[:, 1] if snapshot.cloud else class_cost_h[np.arange(n_cls), class_gpus]
    pack = np.empty(n_groups, dtype=np.int64)
    cheapest = np.full((n_groups, levels), -1, dtype=np.int64)
    for grp in range(n_groups):
        members = np.flatnonzero(class_group == grp)
        # the largest VM, the cheapest of those on a tie
        pack[grp] = min(members, key=lambda k: (-class_gpus[k], price[k], k))
        for lv in range(levels):
            fit = [k for k in members if class_gpus[k] >= lv]
            if fit:
                cheapest[grp, lv] = min(fit, key=lambda k: (price[k], class_gpus[k], k))
    # unbounded knapsack: the least price of any number of VMs of the group holding l
    # GPUs, then the fewest VMs at that price (stored as price + VMs * 1e-9 tie-breaker)
    best = np.full((n_groups, levels), np.inf)
    best[:, 0] = 0.0
    for grp in range(n_groups):
        members = np.flatnonzero(class_group == grp)
        for lv in range(1, levels):
            for k in members:
                best[grp, lv] = min(best[grp, lv], price[k] + VM_TIE
                                    + best[grp, max(0, lv - int(class_gpus[k]))])
    n = len(snapshot.nodes)
    if snapshot.cloud:
        group_nodes = np.tile(np.arange(max(n, 1), dtype=np.int64), (n_groups, 1))
        group_count = np.full(n_groups, n, dtype=np.int64)
    else:
        group_nodes, group_count = class_nodes.copy(), class_count.astype(np.int64)
    return {"class_group": class_group, "cfg_group": class_group[cfg_class],
            "cfg_index": cfg_index, "pack_class": pack, "group_cheapest": cheapest,
            "group_best": best,
            "group_nodes": group_nodes, "group_count": group_count}


def _pins(snapshot: Snapshot, t: np.ndarray, cfg_index: np.ndarray, class_name, node_class,
          lv: config_levels.ConfigLevels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Running jobs that can continue as they are, grouped by node (first-seen order).

    A job continues on its node's class at its GPU count and power limit; in the cloud the
    node's class is the VM it runs (``Node.config``), or, when the snapshot does not say,
    the cheapest catalog entry that holds all its running jobs (the baselines' rule).
    """
    index = {n.name: i for i, n in enumerate(snapshot.nodes)}
    by_node: dict[int, list[tuple[int, int]]] = {}      # node -> (job, its running g)
    for j, job in enumerate(snapshot.jobs):
        if job.running is not None and job.running.node in index:
            by_node.setdefault(index[job.running.node], []).append((j, job.running.gpus))
    jobs, nodes, cfgs = [], [], []
    for n, members in by_node.items():
        cls = _running_class(snapshot, n, members, class_name, node_class)
        if cls is None:
            continue
        picked: list[tuple[int, int]] = []
        for j, g in members:
            c = int(cfg_index[cls, g]) if 0 < g < cfg_index.shape[1] else -1
            run = snapshot.jobs[j].running
            if c >= 0 and run is not None and run.power_limit_w is not None:
                at = c + config_levels.running_level(lv, cls, run.power_limit_w)
                c = at if np.isfinite(t[j, at]) else c
            if c >= 0 and not np.isfinite(t[j, c]):
                c = _kept_level(t[j], lv.cfg_level, c - int(lv.cfg_level[c]))
            if c < 0 or not np.isfinite(t[j, c]):
                picked = []
                break
            picked.append((j, c))
        for j, c in picked:
            jobs.append(j)
            nodes.append(n)
            cfgs.append(c)
    as_array = lambda v: np.array(v, dtype=np.int64)   # noqa: E731
    return as_array(jobs), as_array(nodes), as_array(cfgs)


def _kept_level(t_job: np.ndarray, cfg_level: np.ndarray, base: int) -> int:
    """The one runnable level of the (class, g) whose default is ``base`` (``one_level``
    keeps one): a running job continues there, its limit changed in place; -1 if none."""
    k = base
    while k < len(cfg_level) and (k == base or cfg_level[k] > 0):
        if np.isfinite(t_job[k]):
            return k
        k += 1
    return -1


def _running_class(snapshot: Snapshot, n: int, members: list[tuple[int, int]], class_name,
                   node_class
                   ) -> int | None:
    if not snapshot.cloud:
        return int(node_class[n])
    node = snapshot.nodes[n]
    if node.config is not None:
        return class_name.index(node.config) if node.config in class_name else None
    need = sum(g for _, g in members)
    fits = [k for k, e in enumerate(snapshot.catalog) if e.gpus >= need and all(
        snapshot.jobs[j].remaining_s(e.gpu_type, g) is not None for j, g in members)]
    return min(fits, key=lambda k: snapshot.catalog[k].cost_per_hour) if fits else None


def _running_last(group_nodes: np.ndarray, group_count: np.ndarray, pin_node: np.ndarray,
                  node_class: np.ndarray) -> np.ndarray:
    """Reorder each class's nodes so that nodes running jobs open last: a new job takes a
    free node before one whose running job may want to stay."""
    out = group_nodes.copy()
    running = set(int(n) for n in pin_node)
    for k in range(len(group_count)):
        members = [int(x) for x in group_nodes[k, : group_count[k]]]
        out[k, : group_count[k]] = ([n for n in members if n not in running]
                                    + [n for n in members if n in running])
    return out
