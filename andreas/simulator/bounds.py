"""A lower bound on the bill of any schedule of a cloud trace: how far from the optimum.

The long-run optimum of a trace is out of reach (an online problem over hundreds of
decisions), but a relaxation of it is not. For one job, drop everything other jobs do
to it (capacity, waiting, packing) and keep only what it must pay itself:

- every hour a VM runs costs its catalog price, shared by its GPUs, so a job on g GPUs
  of type k pays at least ``g * p_k`` per hour, ``p_k`` the lowest price per GPU of any
  VM of type k (a VM with idle GPUs only costs more);
- its work may be split over configurations (type, g) in any fractions ``x_c`` (the
  simulator's ``progress="exact"`` carries fractional progress over; restarts, lost
  partial epochs and overheads only add), so it runs ``T = sum x_c s_c`` seconds at
  the earliest from its submission, for ``sum x_c e_c`` dollars, ``s_c`` and ``e_c``
  the whole job's time and GPU-priced cost on c;
- it pays ``weight * max(0, submit + T - due)`` for lateness.

For a fixed T the cheapest split is the lower convex hull h(T) of the points (s_c, e_c),
made of one configuration or two; h is convex and piecewise linear, so h(T) + w(T - D)+
is smallest at a vertex of h (one configuration) or at T = D (two configurations mixed
to end exactly on the due date). ``job_bound`` takes the minimum over those candidates.
The trace's bound is the sum over its jobs: no schedule (no policy, the published C++
code included) can bill less. It ignores that switching configuration happens only at
decisions, that VMs have idle GPUs, and that N nodes limit what runs at once, so the
optimum lies above it by an unknown margin.

On premise (``onprem_lower_bound``) a node's power with g busy GPUs is not the sum of
its jobs' powers (the static draw is shared), so per-job prices would not add up, and
capacity binds under load; there the bound is the optimum of a linear relaxation of a
time-indexed schedule, solved with HiGHS (see its docstring).

``device_hours_bound`` is the same idea for GPU sharing: a GPU carries at most 1000
milli-GPU of slices at once and interference only lengthens a task, so no placement
occupies fewer device-hours than the slices' milli-GPU-hours plus the whole GPUs' hours,
each task at its solo speed on its fastest accepted GPU type.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from andreas import levels
from andreas.simulator import bound_rows
from andreas.costs import SECONDS_PER_HOUR, c_ng_per_hour
from andreas.errors import InputError
from andreas.model import GPU_MILLI, CatalogEntry, Energy, Job, Trace

BOUND_MARGIN = 1e-6      # relative: the interior-point solver's tolerance, and more
MAX_SLOTS = 120          # time slots of the on-premise relaxation (the last one open-ended)


def gpu_offers(catalog: Iterable[CatalogEntry]) -> dict[str, tuple[float, int]]:
    """Per GPU type: the lowest catalog price of one of its GPUs per hour, and the most GPUs
    one VM of the type has (the most a job can run on)."""
    offers: dict[str, tuple[float, int]] = {}
    for entry in catalog:
        per_gpu = entry.cost_per_hour / entry.gpus
        price, largest = offers.get(entry.gpu_type, (per_gpu, entry.gpus))
        offers[entry.gpu_type] = (min(price, per_gpu), max(largest, entry.gpus))
    return offers


def job_bound(job: Job, catalog: Iterable[CatalogEntry],
              offers: dict[str, tuple[float, int]] | None = None) -> float:
    """The least any schedule can bill ``job`` from its submission (see the module doc);
    ``offers``: ``gpu_offers(catalog)``, when the caller has it already."""
    points = []   # (whole-job seconds, GPU-priced dollars) per configuration
    for gpu_type, (price, largest) in (offers or gpu_offers(catalog)).items():
        times = job.epoch_time_s.get(gpu_type, ())
        for g in range(1, min(largest, len(times)) + 1):
            if job.runs_on(gpu_type, g):
                seconds = job.epochs_left * times[g - 1]
                points.append((seconds, g * price * seconds / SECONDS_PER_HOUR))
    if not points:
        raise InputError(f"job {job.id}: no epoch time on any VM of the catalog")
    slack = job.due_s - job.submit_s
    best = min(e + job.weight * max(0.0, s - slack) for s, e in points)
    for s_fast, e_fast in points:      # two configurations ending exactly on the due date
        for s_slow, e_slow in points:
            if s_fast < slack < s_slow:
                fast_share = (s_slow - slack) / (s_slow - s_fast)
                best = min(best, fast_share * e_fast + (1 - fast_share) * e_slow)
    return best


def cloud_lower_bound(trace: Trace) -> float:
    """The sum of ``job_bound`` over a cloud trace's jobs: below any schedule's bill."""
    if not trace.cloud:
        raise InputError(f"trace {trace.name}: the lower bound is defined for cloud traces only")
    offers = gpu_offers(trace.catalog)
    return sum(job_bound(job, trace.catalog, offers) for job in trace.jobs)


def device_hours_bound(trace: Trace) -> tuple[float, float]:
    """(the least device-hours any placement of the rigid tasks can occupy, what exclusive
    placement occupies at solo speed): their ratio bounds what sharing can save."""
    least = exclusive = 0.0
    for job in trace.jobs:
        if job.demand is None:
            raise InputError(f"job {job.id}: device-hours bounds need rigid tasks (a demand)")
        gpus = job.demand.gpus
        times = [t[gpus - 1] for t in job.epoch_time_s.values() if len(t) >= gpus]
        if not times:
            raise InputError(f"job {job.id}: no epoch time on {gpus} GPUs")
        hours = job.epochs_left * min(times) / SECONDS_PER_HOUR * gpus
        share = job.demand.gpu_milli / GPU_MILLI if job.demand.shared else 1.0
        least += hours * share
        exclusive += hours
    return least, exclusive


@dataclass(frozen=True, kw_only=True)
class OnPremBound:
    """The on-premise relaxation's optimum and its parts (money)."""

    total_cost: float
    energy_cost: float       # idle draw until the last completion + busy GPUs above it
    tardiness_cost: float
    slot_s: float
    slots: int
    status: str


def lower_bound(trace: Trace, *, power_off_idle: bool = False) -> float:
    """The bound of a trace in either setting: ``cloud_lower_bound`` or the on-premise
    relaxation's total (``onprem_lower_bound``)."""
    if trace.cloud:
        return max(cloud_lower_bound(trace), cloud_capacity_bound(trace).total_cost)
    return onprem_lower_bound(trace, power_off_idle=power_off_idle).total_cost


def onprem_lower_bound(trace: Trace, *, slot_s: float | None = None,
                       power_off_idle: bool = False, integral: bool = False,
                       time_limit_s: float | None = None, cuts: bool = True,
                       work_rows: bool = True) -> OnPremBound:
    """A lower bound on the bill of any schedule of an on-premise trace, as the simulator
    bills it (every node's power with its busy GPUs x PUE x price, idle nodes at
    ``power_w[0]`` from the first submission to the last completion; with
    ``power_off_idle`` idle nodes draw nothing), plus weighted tardiness.

    Time-indexed LP relaxation: time from the first submission is cut into slots of
    ``slot_s`` (default: the span to the last due date plus the longest fastest run,
    over MAX_SLOTS - 1), the last one open-ended. u[j,c,t] >= 0 is the share of job j's
    work done on configuration c = (node class k, g GPUs, power level) in slot t (not
    before its submission; P_jc its whole run time there, the level's time factor in
    it; the level's change of each busy GPU's draw is added to the GPU-second's cost
    below, as the simulator adds it to the node's curve): sum u = 1; per slot a job runs at most
    the slot's length, sum_c u P <= len_t (a job is on one node at a time); per slot and
    class the GPU-seconds used fit N_k G_k len_t. Energy: a node with g busy GPUs draws
    P_k(g) = P_k(0) + (P_k(g) - P_k(0)), and (P_k(g) - P_k(0)) >= a_k g with a_k = min_g
    (P_k(g) - P_k(0)) / g (the lower convex envelope through the origin), so each GPU-
    second on class k costs at least a_k, and the idle draw sum_k N_k P_k(0) runs until
    the makespan M. Completion: with F_t the share of j's work done from slot t on and
    W_t its run time, and s_t the slot's start (not before j's submission r_j): where j
    works after s_t it ends after s_t plus that work, since a job runs one configuration
    at a time, so C_j >= r_j + (s_t - r_j) F_t + W_t for every slot, and for slots that
    start after its due date its lateness is at least (s_t - d_j) F_t + W_t; M >= C_j;
    tardiness w_j max(0, C_j - d_j). Every real schedule (fractional progress, so both
    progress modes) gives a feasible point that costs at most its bill, so the LP's
    optimum is below every policy's bill (property tests). What it drops: that jobs need
    whole GPUs of one node (packing), epoch checkpoints and restarts, that a job's work
    within a slot is not before its completion, and power curves above the envelope.

    ``cuts`` (default) adds rows that every schedule satisfies, each with its reason in
    its writer's docstring: the makespan after each slot start covers the class's work
    from then on (``_capacity_rows``), a job ends half its fastest run after the mean time
    of its work (``_mean_busy_row``), and the jobs submitted from a slot start on cannot
    all end early nor all on time when their work exceeds the capacity before their due
    dates (``_completion_sum_rows``). Alone the relaxation lets every job end early.
    ``work_rows`` (default, with ``cuts``) adds ``bound_rows.py``'s: a slow run ends half
    its own run after the mean of its work, late work owes its mean lateness, and per
    set each job that must end late owes its own weighted lateness (an assignment to
    the k-th ends; the exact sequence for sets of at most 10 jobs), where the rows
    above let the LP hand a set's lateness to its lightest job.

    ``integral``: the same model with one binary per job and slot, y_t >= F_t ("j still
    works from slot t on"), and y_t in place of F_t in the completion and lateness rows,
    so a job that does any work in slot t ends after s_t plus that work. The relaxation
    lets a job spread thin slices over many slots and counts its completion near its
    mean busy time; the binaries forbid that. Solved as a MILP with HiGHS within
    ``time_limit_s``: the figure is the solver's dual bound, a lower bound whether or not
    the search finished (``status`` says which)."""
    if trace.cloud:
        raise InputError(f"trace {trace.name}: the on-premise bound needs an on-premise trace")
    return _lp_bound(trace, _classes(trace, power_off_idle), slot_s, shared_nodes=None,
                     integral=integral, time_limit_s=time_limit_s, cuts=cuts,
                     work_rows=work_rows)


def cloud_capacity_bound(trace: Trace, *, slot_s: float | None = None) -> OnPremBound:
    """The same relaxation for a cloud trace: per GPU type, a busy GPU costs the type's
    lowest price per GPU (no idle cost: an idle VM is released), and the N nodes are the
    capacity: a node runs one VM, of at most G_T GPUs of type T, so per slot
    sum_T (GPU-seconds of T) / G_T <= N x the slot. It sees what ``cloud_lower_bound``
    cannot, that jobs wait when the nodes are full; ``lower_bound`` takes the larger."""
    if not trace.cloud:
        raise InputError(f"trace {trace.name}: the cloud capacity bound needs a cloud trace")
    offers = gpu_offers(trace.catalog)
    classes = [(gpu_type, largest, len(trace.nodes), 0.0, price, None)
               for gpu_type, (price, largest) in offers.items()]
    return _lp_bound(trace, classes, slot_s, shared_nodes=len(trace.nodes))


def _lp_bound(trace: Trace, classes, slot_s: float | None,
              shared_nodes: int | None, integral: bool = False,
              time_limit_s: float | None = None, cuts: bool = True,
              work_rows: bool = False) -> OnPremBound:
    if trace.energy.tariff is not None and not trace.cloud:
        raise InputError(f"trace {trace.name}: the on-premise bound assumes a constant price "
                         "(no tariff)")
    jobs = [j for j in trace.jobs if j.epochs_left > 0]
    if not jobs:
        return OnPremBound(total_cost=0.0, energy_cost=0.0, tardiness_cost=0.0,
                           slot_s=0.0, slots=0, status="optimal")
    t0 = min(j.submit_s for j in trace.jobs)
    # capacity is modelled until every job could have run once more after the last due
    # date; the open-ended last slot after that
    end = max(max(j.due_s, j.submit_s) for j in jobs) + max(_fastest_s(j) for j in jobs)
    slot = slot_s or max((end - t0) / (MAX_SLOTS - 1), 60.0)
    n_slots = int(math.ceil((end - t0) / slot)) + 1        # the last one is open-ended
    return _solve_bound(trace, jobs, classes, t0, slot, n_slots, shared_nodes, integral,
                        time_limit_s, cuts, work_rows)


def _fastest_s(job: Job) -> float:
    return min(job.epochs_left * t for times in job.epoch_time_s.values() for t in times)


def _classes(trace: Trace, power_off_idle: bool) -> list[tuple]:
    """(GPU type, GPUs per node, nodes, idle cost per hour of all of them, least cost per
    busy GPU-hour, one of its nodes) per node class, in money (PUE x price); a class's
    nodes share their power curve and power limits."""
    groups: dict[tuple, list] = {}
    for node in trace.nodes:
        key = (node.gpu_type, node.gpus, tuple(node.power_w), node.power_limits)
        groups.setdefault(key, [0, node])[0] += 1
    out = []
    for (gpu_type, gpus, power, _), (count, node) in groups.items():
        idle = 0.0 if power_off_idle else power[0]
        per_gpu = min((power[g] - idle) / g for g in range(1, gpus + 1))
        out.append((gpu_type, gpus, count, count * c_ng_per_hour(idle, trace.energy),
                    c_ng_per_hour(max(per_gpu, 0.0), trace.energy), node))
    return out


def _configs(job: Job, classes, energy) -> list[tuple[int, int, float, float]]:
    """(class, GPUs, whole run seconds, cost per busy GPU-hour) of every way ``job`` can
    run: per class, GPU count and power level (``andreas/levels.py``: the level's time
    factor, and its change of each busy GPU's draw added to the class's least cost)."""
    out = []
    for k, (gt, gpus, _, _, per_gpu, node) in enumerate(classes):
        options = levels.options(job, node) if node is not None else (levels.DEFAULT,)
        for g in range(1, gpus + 1):
            if job.runs_on(gt, g):
                run_s = job.epochs_left * job.epoch_time_s[gt][g - 1]
                out += [(k, g, run_s * o.time_factor,
                         per_gpu + c_ng_per_hour(o.delta_w, energy)) for o in options]
    return out


class _Model:
    """A linear model being written: columns (cost, upper bound; lower bound 0), rows
    (columns, coefficients, lower, upper), the binary columns, and per (slot, class) the
    capacity rows' terms (the open-ended last slot's too), written last."""

    def __init__(self, cuts: bool, energy: Energy, work_rows: bool = False) -> None:
        self.cuts = cuts     # the valid inequalities that tighten it
        self.work_rows = work_rows     # and those of ``bound_rows.py``
        self.cols: list[tuple[float, float]] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []
        self.binary: list[int] = []
        self.cap: dict[tuple[int, int], tuple[list[int], list[float]]] = {}
        self.least_work: list[float] = []     # per job, in the capacity rows' unit
        self.least_by_key: list[dict[int, float]] = []   # the same per capacity key
        self.fastest: list[float] = []         # per job, its fastest whole run
        self.ends_after = -math.inf            # no schedule ends before this
        self.energy = energy                   # the prices of the configurations

    def col(self, cost: float, upper: float = math.inf) -> int:
        self.cols.append((cost, upper))
        return len(self.cols) - 1


def _solve_bound(trace: Trace, jobs: list[Job], classes, t0: float, slot: float,
                 n_slots: int, shared_nodes: int | None, integral: bool = False,
                 time_limit_s: float | None = None, cuts: bool = True,
                 work_rows: bool = False) -> OnPremBound:
    import highspy

    model = _Model(cuts, trace.energy, cuts and work_rows)
    m_col = model.col(sum(c[3] for c in classes) / SECONDS_PER_HOUR)      # makespan M
    starts = t0 + slot * np.arange(n_slots)
    cols = [_job_rows(model, job, classes, t0, slot, starts, shared_nodes, m_col,
                      integral) for job in jobs]
    tard_cols = [tard for tard, _ in cols]
    rates = ({k: float(c[2] * c[1]) for k, c in enumerate(classes)} if shared_nodes is None
             else {-1: float(shared_nodes)})      # GPUs per class; cloud: the N nodes
    _capacity_rows(model, rates, starts, m_col, model.ends_after)
    if cuts:
        _completion_sum_rows(model, jobs, cols, starts, sum(rates.values()))
    if model.work_rows:
        keys = sorted(rates)
        least = np.array([[by.get(k, math.inf) for k in keys] for by in model.least_by_key])
        bound_rows.set_rows(model.rows, jobs, cols, starts, least,
                            np.array([rates[k] for k in keys]), np.array(model.fastest))
    h = _highs(highspy, model, t0 * model.cols[m_col][0], time_limit_s)
    h.run()
    status = h.getModelStatus()
    if model.binary:
        return _mip_bound(h, highspy, trace, jobs, tard_cols, slot, n_slots)
    if status != highspy.HighsModelStatus.kOptimal:
        raise InputError(f"trace {trace.name}: the bound's LP ended "
                         f"{h.modelStatusToString(status)}")
    x = np.asarray(h.getSolution().col_value)
    total = float(h.getInfo().objective_function_value) * (1.0 - BOUND_MARGIN)
    tardiness = float(sum(jobs[i].weight * x[c] for i, c in enumerate(tard_cols)))
    return OnPremBound(total_cost=total, energy_cost=total - tardiness,
                       tardiness_cost=tardiness, slot_s=slot, slots=n_slots, status="optimal")


def _job_rows(model: _Model, job: Job, classes, t0: float, slot: float, starts: np.ndarray,
              shared_nodes: int | None, m_col: int, integral: bool) -> tuple[int, int]:
    """One job's columns and rows (``onprem_lower_bound``'s model); returns its
    tardiness and completion columns."""
    n_slots = len(starts)
    first = int(min(n_slots - 1, max(0, (job.submit_s - t0) // slot)))
    configs = _configs(job, classes, model.energy)
    if not configs:
        raise InputError(f"job {job.id}: runs on no node of the trace")
    fastest = min(c[2] for c in configs)
    done: list[int] = []
    least = math.inf      # the least capacity the whole job can take (GPU-seconds)
    by_key: dict[int, float] = {}
    work_after: list[list[tuple[int, float]]] = []
    for t in range(first, n_slots):
        here = []
        for k, g, p, cost in configs:
            u = model.col(p * g * cost / SECONDS_PER_HOUR, 1.0)
            here.append((u, p))
            done.append(u)
            # GPU-seconds on class k (cloud: node-seconds shared by every type)
            key = (t, k if shared_nodes is None else -1)
            model.cap.setdefault(key, ([], []))
            model.cap[key][0].append(u)
            model.cap[key][1].append(p * g if shared_nodes is None else p * g / classes[k][1])
            least = min(least, model.cap[key][1][-1])
            by_key[key[1]] = min(by_key.get(key[1], math.inf), model.cap[key][1][-1])
        if t < n_slots - 1:
            length = starts[t] + slot - max(starts[t], job.submit_s)
            model.rows.append(([u for u, _ in here], [p for _, p in here], -math.inf, length))
        work_after.append(here)
    model.rows.append((done, [1.0] * len(done), 1.0, 1.0))
    c_col = model.col(0.0)
    tard = model.col(job.weight)
    model.rows.append(([tard, c_col], [1.0, -1.0], -job.due_s, math.inf))    # T >= C - d
    model.rows.append(([m_col, c_col], [1.0, -1.0], 0.0, math.inf))           # M >= C
    slot_starts = [max(starts[first + i], job.submit_s) for i in range(len(work_after))]
    _completion_rows(model, job, work_after, slot_starts, c_col, tard, integral)
    if model.cuts:
        _mean_busy_row(model, work_after, slot_starts, c_col, fastest)
    if model.work_rows:
        times = bound_rows.run_times(work_after)
        bound_rows.busy_rows(model.rows, work_after, slot_starts, c_col,
                             [p for p in times if p > fastest])
        bound_rows.late_rows(model.rows, job.due_s, work_after, slot_starts, tard, times)
    model.least_work.append(least)
    model.least_by_key.append(by_key)
    model.fastest.append(fastest)
    model.ends_after = max(model.ends_after, job.submit_s + fastest)
    return tard, c_col


def _mean_busy_row(model: _Model, work_after: list[list[tuple[int, float]]],
                   slot_starts: list[float], c_col: int, fastest: float) -> None:
    """C >= sum_t s_t (share of the work done in slot t) + (the fastest whole run) / 2.

    Valid for every schedule: with F(t) the share of the job's work done by time t, the
    rest needs at least (1 - F(t)) x the fastest run, and it runs after t, so C >= t +
    (1 - F(t)) x fastest at every t before C; averaged over the work (dF) that is C >=
    (mean time of the work) + fastest / 2, and the work of slot t is done after s_t. The
    per-slot completion rows take the maximum of C >= s_t F_t + W_t, which a job spread
    thinly over [0, T] meets at about T / 4; this row puts it at T / 2 at least."""
    cols = [u for here in work_after for u, _ in here]
    times = [s for here, s in zip(work_after, slot_starts) for _ in here]
    model.rows.append(([c_col] + cols, [1.0] + [-s for s in times], fastest / 2, math.inf))


def _capacity_rows(model: _Model, rates: dict[int, float], starts: np.ndarray,
                   m_col: int, ends_after: float) -> None:
    """Per class k (cloud: the N nodes) and slot t, with R_t the class's work from slot t
    on in seconds of the whole class (GPU-seconds over its rate N_k G_k; cloud: node-
    seconds over N): R_t - R_t+1 <= the slot's length (capacity), and M >= s_t + R_t for
    the slots that start no later than ``ends_after`` (max_j of r_j plus j's fastest run).

    The second row is valid for every schedule: no schedule ends before ``ends_after``, so
    M >= s_t there, and the work a class does after s_t is done within [s_t, M] (M the
    last completion) on at most its N_k G_k GPUs at once, however jobs are stopped, moved
    or resized; restarts and lost epochs only add to it. (A slot after every completion
    has no work and M < s_t: the row would be wrong there.) The slot rows alone let the
    LP end every job early on its own and leave the class's total work unseen: on one GPU
    three jobs could all end by the longest one's run, while the idle draw lasts until
    the last of them really ends."""
    n_slots = len(starts)
    for key, rate in rates.items():
        r_next = -1
        for t in range(n_slots - 1, -1, -1):
            us, ws = model.cap.get((t, key), ([], []))
            r_t = model.col(0.0)
            nxt = [r_next] if r_next >= 0 else []
            model.rows.append(([r_t] + nxt + us, [1.0] + [-1.0] * len(nxt)
                               + [-w / rate for w in ws], 0.0, 0.0))
            if t < n_slots - 1:        # the last slot is open-ended
                model.rows.append(([r_t] + nxt, [1.0] + [-1.0] * len(nxt), -math.inf,
                                   float(starts[t + 1] - starts[t])))
            if model.cuts and starts[t] <= ends_after:
                model.rows.append(([m_col, r_t], [1.0, -1.0], float(starts[t]), math.inf))
            r_next = r_t


def _completion_sum_rows(model: _Model, jobs: list[Job], cols: list[tuple[int, int]],
                         starts: np.ndarray, rate: float) -> None:
    """For each slot start s_t, the set S of jobs submitted at or after it, r its first
    submission, p_j = (the least capacity job j can take) / (the cluster's rate, the sum
    of the classes' N_k G_k; cloud N), P = sum_S p_j, and Q_k the sum of the k smallest
    p_j: sum_S p_j C_j >= r P + (P^2 + sum_S p_j^2) / 2 (written divided by P), and
    sum_S T_j >= sum_k max(0, r + Q_k - d_(k)), d_(k) the k-th earliest due date in S.

    Valid for every schedule: in the order in which S's jobs end, the k-th cannot end
    before r plus the work of the first k, since all of it is done after r at the
    cluster's rate at most (preemption, moves and resizes included; a job's work is at
    least its least GPU-seconds over its configurations), and that work is at least Q_k.
    Weighting by p_(k) and summing gives the first row (Queyranne's preemptive single-
    machine inequality on one machine of the cluster's rate). For the second: the sum of
    lateness pairs the sorted ends with the due dates in some order, and since
    max(0, x) is convex, pairing both in sorted order gives the least sum, at least
    sum_k max(0, r + Q_k - d_(k)) (the SPT/EDD bound on total tardiness). Both make a set
    of jobs that share capacity unable to all finish early, which the per-job rows
    allow; the LP still chooses which of them are late, so the cheapest pay."""
    seen: set[tuple[int, ...]] = set()
    for s_t in starts:
        members = tuple(i for i, j in enumerate(jobs) if j.submit_s >= s_t)
        if len(members) < 2 or members in seen:
            continue
        seen.add(members)
        p = np.array([model.least_work[i] / rate for i in members])
        total = float(p.sum())
        release = min(jobs[i].submit_s for i in members)
        model.rows.append(([cols[i][1] for i in members], list(p / total),
                           release + (total + float((p * p).sum()) / total) / 2, math.inf))
        late = np.maximum(0.0, release + np.cumsum(np.sort(p))
                          - np.sort([jobs[i].due_s for i in members]))
        if late.sum() > 0:
            model.rows.append(([cols[i][0] for i in members], [1.0] * len(members),
                               float(late.sum()), math.inf))


def _completion_rows(model: _Model, job: Job, work_after: list[list[tuple[int, float]]],
                     slot_starts: list[float], c_col: int, tard: int, integral: bool) -> None:
    """C >= s_t F_t + W_t: F_t, W_t the share and run time of the work from slot t on
    (with ``integral`` a binary y_t >= F_t in F_t's place), and the lateness rows of the
    slots that start after the due date."""
    rows = model.rows
    f_next = w_next = -1
    for i in range(len(work_after) - 1, -1, -1):
        f_t, w_t = model.col(0.0), model.col(0.0)
        us = [u for u, _ in work_after[i]]
        ps = [p for _, p in work_after[i]]
        nxt_f = [f_next] if f_next >= 0 else []
        nxt_w = [w_next] if w_next >= 0 else []
        rows.append(([f_t] + nxt_f + us, [1.0] + [-1.0] * (len(nxt_f) + len(us)), 0.0, 0.0))
        rows.append(([w_t] + nxt_w + us, [1.0] + [-1.0] * len(nxt_w) + [-p for p in ps],
                     0.0, 0.0))
        s_t = slot_starts[i]
        works = f_t        # F_t, or with ``integral`` a binary y_t >= F_t
        if integral and s_t > job.submit_s:
            works = model.col(0.0, 1.0)
            model.binary.append(works)
            rows.append(([f_t, works], [1.0, -1.0], -math.inf, 0.0))
        rows.append(([c_col, works, w_t], [1.0, job.submit_s - s_t, -1.0], job.submit_s,
                     math.inf))
        if s_t >= job.due_s:
            rows.append(([tard, works, w_t], [1.0, job.due_s - s_t, -1.0], 0.0, math.inf))
        f_next, w_next = f_t, w_t


def _highs(highspy, model: _Model, offset: float, time_limit_s: float | None):
    """A HiGHS instance holding the model (rowwise), its binaries integral."""
    h = getattr(highspy, "_Highs", highspy.Highs)()
    # the interior-point solver without crossover: 4x faster than simplex on these LPs
    # (N = 10: 37 s against 136 s, the same optimum to 1e-8); BOUND_MARGIN absorbs its
    # tolerance so the figure stays below the LP optimum
    options: tuple[tuple[str, bool | float | str], ...] = (("output_flag", False),
                                                           ("log_to_console", False))
    options += ((("time_limit", float(time_limit_s)),) if time_limit_s else ())
    if not model.binary:
        options += (("solver", "ipm"), ("run_crossover", "off"))
    for name, value in options:
        h.setOptionValue(name, value)
    cols, rows = model.cols, model.rows
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(cols), len(rows)
    lp.col_cost_ = np.array([c for c, _ in cols])
    lp.col_lower_ = np.zeros(len(cols))
    lp.col_upper_ = np.array([u for _, u in cols])
    lp.row_lower_ = np.array([r[2] for r in rows])
    lp.row_upper_ = np.array([r[3] for r in rows])
    lp.offset_ = -offset
    lengths = np.array([len(r[0]) for r in rows])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = len(cols), len(rows)
    lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    lp.a_matrix_.index_ = np.array([i for r in rows for i in r[0]], dtype=np.int32)
    lp.a_matrix_.value_ = np.array([v for r in rows for v in r[1]], dtype=float)
    if model.binary:
        kinds = [highspy.HighsVarType.kContinuous] * len(cols)
        for c in model.binary:
            kinds[c] = highspy.HighsVarType.kInteger
        lp.integrality_ = kinds
    h.passModel(lp)
    return h


def _mip_bound(h, highspy, trace: Trace, jobs: list[Job], tard_cols: list[int], slot: float,
               n_slots: int) -> OnPremBound:
    """The integral model's figure: HiGHS' dual bound (a lower bound on its optimum, so on
    every schedule's bill, whether or not the search ended); the parts from its best
    solution, scaled to that total, and only where it has one."""
    status = h.getModelStatus()
    info = h.getInfo()
    dual = float(info.mip_dual_bound)
    if not math.isfinite(dual):
        raise InputError(f"trace {trace.name}: the integral bound found no dual bound "
                         f"({h.modelStatusToString(status)})")
    total = dual * (1.0 - BOUND_MARGIN)
    tardiness = 0.0
    if h.getSolution().value_valid:
        x = np.asarray(h.getSolution().col_value)
        primal = float(info.objective_function_value)
        tardiness = float(sum(jobs[i].weight * x[c] for i, c in enumerate(tard_cols)))
        tardiness *= total / primal if primal > 0 else 0.0
    how = ("optimal" if status == highspy.HighsModelStatus.kOptimal
           else f"dual bound, {h.modelStatusToString(status)}, gap {info.mip_gap:.3g}")
    return OnPremBound(total_cost=total, energy_cost=total - tardiness,
                       tardiness_cost=tardiness, slot_s=slot, slots=n_slots, status=how)


def bound_row(trace: Trace, *, power_off_idle: bool = False) -> dict:
    """The bound as a results entry (``"policy": "bound"``, FORMAT.md's cost keys) for
    ``andreas simulate --bound``: cloud ``cloud_lower_bound`` (its parts are not split),
    on premise ``onprem_lower_bound``."""
    import time

    start = time.perf_counter()
    if trace.cloud:
        per_job, lp = cloud_lower_bound(trace), cloud_capacity_bound(trace)
        if lp.total_cost > per_job:
            total, energy, tardiness = lp.total_cost, lp.energy_cost, lp.tardiness_cost
            how = f"time-indexed LP relaxation with the N nodes, {lp.slots} slots"
        else:
            total, energy, tardiness = per_job, None, None
            how = "per-job mixes at the cheapest price per GPU"
    else:
        b = onprem_lower_bound(trace, power_off_idle=power_off_idle)
        total, energy, tardiness = b.total_cost, b.energy_cost, b.tardiness_cost
        how = f"time-indexed LP relaxation, {b.slots} slots of {b.slot_s:.0f} s"
    return {"policy": "bound", "trace": trace.name, "total_cost": total,
            "energy_cost": energy, "tardiness_cost": tardiness, "method": how,
            "wall_s": time.perf_counter() - start}
