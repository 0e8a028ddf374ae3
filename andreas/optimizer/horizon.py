"""Policy ``horizon``: a rolling-horizon plan of the next hours as a time-indexed MILP.

The other energy policies price one period (f_obj, f_mix); ``horizon`` plans when each
known job runs over the coming hours and starts now what that plan starts now.

The model (HiGHS, ``highspy``). Time from now is cut into T slots, short first and
growing geometrically (``slot_edges``) until every known job could have run; one more
option starts a job at the horizon's end. A column x[j, a, s] (binary) starts job j on
the aggregate configuration a at the start of slot s and runs it to its end; a running
job has one more column, to continue where it runs (no restart). Configurations are
aggregated per *resource*: on premise a node class (its GPUs: N_k G_k), in the cloud one
resource for all GPU types (nodes: a job on g GPUs of type T takes g / G_T of one of the
N nodes, G_T the largest VM of T). Each job takes exactly one column. Capacity: what
starts in slot 0 fits the resource's count; in later slots the resource-seconds of the
runs overlapping the slot fit the resource times its length (fluid within a slot).

Cost of a column, priced as the simulator bills: its run's energy above the nodes' idle
draw x PUE x price (on premise c_ng(g) - c_ng(0): a node draws its idle power whether or
not it runs a job; in the cloud g times the type's lowest price per GPU), plus the
weighted lateness of its completion; a restart's redone work (the partial epoch and the
overhead, ``Job.time_s``) is in its run time, so moves pay for themselves. The start at
the horizon's end takes the cheapest configuration and no capacity.

Warm start and the guard. The greedy's plan (row 0 of the constructions) and rg's
choice are completed into whole columns by ``_continue`` (the waiting jobs, in queue
order, each on its cheapest column that still fits) and valued in the model; the better
is the solver's starting solution, so its incumbent is never above it. The solver's plan
for slot 0 is then packed onto the real nodes by the constructions' kernel (its jobs
first kept, the others best fit, a job that does not fit on its configuration tries
fewer GPUs of the same resource, else waits); if packing changed anything, that plan is
valued with ``_continue`` as well. ``horizon`` returns the lowest-valued of the
packed plan, greedy's and rg's (in the cloud plus the idle GPUs each packing leaves, at
the VM's price): never above greedy's on the same snapshot objective.

Bounded time: the model is not built beyond ``max_columns`` columns, and the solver
stops at ``time_limit_s`` or ``max_nodes`` branch-and-bound nodes with its best plan;
the warm start stands in both cases. On premise under shortage (the greedy plan leaves
a job waiting) the greedy plan stands unless ``plan_shortage``. Rigid tasks are planned
by rg; power levels are not modelled (the policy gets the snapshot without them).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from andreas.costs import SECONDS_PER_HOUR, objective_name
from andreas.interference import Sharing
from andreas.model import Plan, Snapshot
from andreas.optimizer.construction import compile_ordered, construct
from andreas.optimizer.greedy import DEFAULT_ITERATIONS, decide_rg, has_demands
from andreas.optimizer.kernels import Rows, construct_rows
from andreas.optimizer.problem import INF, ON_TIME_MARGIN, Problem
from andreas.optimizer.solution import to_plan

DEFAULT_TIME_LIMIT_S = 4.0
DEFAULT_MAX_COLUMNS = 120_000
DEFAULT_SLOTS = 12
FIRST_SLOT_S = 1800.0            # the first slot: what starts now runs at least this long
MAX_NODES = 2_000                # branch-and-bound nodes: a deterministic limit first
MIP_GAP = 1e-3
CHOICES = ("greedy", "rg", "keep", "horizon")    # Plan.stats["chosen"]: an index
# Planning margins (the bill is unchanged): a run is planned to end
# ``problem.ON_TIME_MARGIN`` of its run time before its due date (lateness inside that
# margin is charged as lateness), and a start later than now costs ``DELAY`` x its weight
# per second of delay, so that a job with slack does not wait for nothing: the model does
# not know the jobs still to come.
DELAY = 1e-3


@dataclass(frozen=True, eq=False)
class Columns:
    """The model's columns: job, configuration (a ``Problem`` configuration), start slot
    (``n_slots``: at the horizon's end), run time, cost, and whether it continues a
    running job in place."""

    job: np.ndarray
    cfg: np.ndarray
    slot: np.ndarray
    run_s: np.ndarray
    cost: np.ndarray
    keep: np.ndarray
    res: np.ndarray          # resource of the column's configuration
    use: np.ndarray          # how much of it the run takes while it runs
    edges: np.ndarray        # (T + 1,) slot boundaries, seconds from now
    capacity: np.ndarray     # (R,) per resource
    idle_rate: float = 0.0   # money per second of the nodes' idle draw (on premise)

    @property
    def end(self) -> np.ndarray:
        """Each column's completion, seconds from now."""
        return self.edges[self.slot] + self.run_s

    @property
    def n_slots(self) -> int:
        return len(self.edges) - 1

    def __len__(self) -> int:
        return len(self.job)


def slot_edges(first_s: float, span_s: float, slots: int = DEFAULT_SLOTS) -> np.ndarray:
    """T + 1 boundaries from 0: the first slot ``first_s`` long, then growing by a common
    ratio (>= 1) so that the T slots reach ``span_s``."""
    if span_s <= first_s * slots:
        return first_s * np.arange(slots + 1, dtype=float)
    lo, hi = 1.0, 2.0
    while first_s * (hi ** slots - 1) / (hi - 1) < span_s:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if first_s * (mid ** slots - 1) / (mid - 1) < span_s:
            lo = mid
        else:
            hi = mid
    lengths = first_s * hi ** np.arange(slots)
    return np.concatenate(([0.0], np.cumsum(lengths)))


def _resources(p: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(resource per configuration, use per configuration, capacity per resource) and
    the configurations the model places jobs on (-1 elsewhere in the resource array)."""
    nc = len(p.cfg_g)
    res = np.full(nc, -1, dtype=np.int64)
    use = np.zeros(nc)
    if p.cloud:    # every GPU type's largest VM; one resource: the N nodes
        for k in p.pack_class:
            sel = (p.cfg_class == k) & (p.cfg_level == 0)
            res[sel] = 0
            use[sel] = p.cfg_g[sel] / p.class_gpus[k]
        return res, use, np.array([float(p.n_nodes)])
    sel = p.cfg_level == 0
    res[sel] = p.cfg_class[sel]
    use[sel] = p.cfg_g[sel]
    return res, use, (p.class_count * p.class_gpus).astype(float)


def _rates(p: Problem) -> np.ndarray:
    """Money per second of run per configuration: on premise the node's draw above idle,
    in the cloud the GPUs at the type's lowest price per GPU."""
    if not p.cloud:
        k, g = p.cfg_class, p.cfg_g
        return (p.class_cost_h[k, g] - p.class_cost_h[k, 0]) / SECONDS_PER_HOUR
    per_gpu = p.class_cost_h[:, 1] / p.class_gpus
    best = np.array([per_gpu[p.class_group == grp].min() for grp in p.class_group])
    return p.cfg_g * best[p.cfg_class] / SECONDS_PER_HOUR


def _restart_times(p: Problem, res: np.ndarray) -> np.ndarray:
    """(J, C) run time from a restart on each modelled configuration (inf elsewhere):
    ``Problem.t`` except where it continues a running job, which is recomputed."""
    t = np.where(res[None, :] >= 0, p.t, INF)
    params = p.snapshot.params
    for i in np.flatnonzero(p.run_node >= 0):
        job = p.jobs[i]
        for c in np.flatnonzero(res >= 0):
            if np.isfinite(t[i, c]):
                r = job.time_s(p.class_type[p.cfg_class[c]], int(p.cfg_g[c]), params,
                               continuing=False)
                t[i, c] = r if r is not None else INF
    return t


def build_columns(p: Problem, *, slots: int = DEFAULT_SLOTS, first_s: float | None = None,
                  margin: float = ON_TIME_MARGIN, delay: float = DELAY) -> Columns:
    """Every column of the model (see the module docstring), vectorised per job."""
    res, use, capacity = _resources(p)
    rate = _rates(p)
    t = _restart_times(p, res)
    runnable = np.isfinite(t)
    now, w, due = p.snapshot.now_s, p.weight, p.due
    fastest = np.where(runnable, t, INF).min(axis=1, initial=INF)
    work = np.where(runnable, np.where(runnable, t, 0.0) * np.where(res >= 0, use, 0.0), INF)
    backlog = float(np.where(np.isfinite(work.min(axis=1, initial=INF)),
                             work.min(axis=1, initial=INF), 0.0).sum() / capacity.sum())
    finite = np.isfinite(fastest)
    span = max(2.0 * backlog + (fastest[finite].max() if finite.any() else 0.0),
               float((due - now)[finite].max()) if finite.any() else 0.0)
    period = p.snapshot.params.period_s
    first = first_s or (min(period, FIRST_SLOT_S) if period > 0 else FIRST_SLOT_S)
    edges = slot_edges(first, max(span, first), slots)
    n_s = len(edges) - 1
    cols: dict[str, list] = {k: [] for k in ("job", "cfg", "slot", "run_s", "cost", "keep")}

    def add(j: int, c: np.ndarray, s: np.ndarray, run: np.ndarray, keep: bool) -> None:
        late = np.maximum(0.0, now + edges[s] + run * (1.0 + margin) - due[j])
        cols["job"].append(np.full(len(c), j))
        cols["cfg"].append(c)
        cols["slot"].append(s)
        cols["run_s"].append(run)
        cols["cost"].append(run * rate[c] + w[j] * (late + delay * edges[s]))
        cols["keep"].append(np.full(len(c), keep))

    pin_of = dict(zip(p.pin_job.tolist(), p.pin_cfg.tolist()))
    for j in range(p.n_jobs):
        cs = np.flatnonzero(runnable[j])
        if not cs.size:
            continue
        if j in pin_of:      # continue in place: its own configuration, now
            c0 = int(p.cfg_base[pin_of[j]])
            c0 = c0 if res[c0] >= 0 else _modelled(p, res, c0)
            if c0 >= 0 and np.isfinite(p.t[j, pin_of[j]]):
                add(j, np.array([c0]), np.array([0]), np.array([p.t[j, pin_of[j]]]), True)
        cc = np.repeat(cs, n_s)
        ss = np.tile(np.arange(n_s), len(cs))
        add(j, cc, ss, t[j, cc], False)
        end = now + edges[-1] + t[j, cs]      # the horizon's end: cheapest configuration
        tail = t[j, cs] * rate[cs] + w[j] * (np.maximum(0.0, end + margin * t[j, cs] - due[j])
                                             + delay * edges[-1])
        b = int(np.argmin(tail))
        add(j, cs[b:b + 1], np.array([n_s]), t[j, cs[b:b + 1]], False)
    cat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()}
    cfg = cat["cfg"].astype(np.int64)
    idle = 0.0 if p.cloud else float((p.class_count * p.class_cost_h[:, 0]).sum())
    return Columns(job=cat["job"].astype(np.int64), cfg=cfg,
                   slot=cat["slot"].astype(np.int64), run_s=cat["run_s"].astype(float),
                   cost=cat["cost"].astype(float), keep=cat["keep"].astype(bool),
                   res=res[cfg], use=use[cfg], edges=edges, capacity=capacity,
                   idle_rate=idle / SECONDS_PER_HOUR)


def _modelled(p: Problem, res: np.ndarray, c: int) -> int:
    """The modelled configuration standing for ``c`` (cloud: its GPU type's largest VM at
    the same GPU count), -1 if none."""
    k = p.pack_class[p.class_group[p.cfg_class[c]]]
    g = int(p.cfg_g[c])
    m = int(p.cfg_index[k, g]) if g < p.cfg_index.shape[1] else -1
    return m if m >= 0 and res[m] >= 0 else -1


def occupancy(cols: Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Capacity coefficients as (column, row, value): slot 0 counts what starts now; a
    later slot the share of its length each run overlaps, times the run's use. Row
    index = slot * R + resource."""
    n_s, n_r = cols.n_slots, len(cols.capacity)
    inside = cols.slot < n_s
    idx = np.flatnonzero(inside)
    start = cols.edges[cols.slot[idx]]
    end = start + cols.run_s[idx]
    out_c, out_r, out_v = [], [], []
    for s in range(n_s):
        lo, hi = cols.edges[s], cols.edges[s + 1]
        if s == 0:
            share = (cols.slot[idx] == 0).astype(float)
        else:
            share = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None) / (hi - lo)
        hit = share > 0
        out_c.append(idx[hit])
        out_r.append(s * n_r + cols.res[idx[hit]])
        out_v.append(share[hit] * cols.use[idx[hit]])
    return np.concatenate(out_c), np.concatenate(out_r), np.concatenate(out_v)


def _csr(n_rows: int, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.lexsort((cols, rows))
    start = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n_rows))))
    return start.astype(np.int32), cols[order].astype(np.int32), vals[order].astype(float)


def solve(cols: Columns, n_jobs: int, warm: np.ndarray | None, *,
          time_limit_s: float, max_nodes: int = MAX_NODES) -> tuple[np.ndarray | None, dict]:
    """The MILP: each job with a column takes exactly one, capacity per slot and resource.
    Returns the chosen column per job (-1: none) and the solver's figures; ``warm``
    (a column per job) is its starting solution."""
    import highspy

    n_s, n_r = cols.n_slots, len(cols.capacity)
    jobs = np.unique(cols.job)
    job_row = np.full(n_jobs, -1, dtype=np.int64)
    job_row[jobs] = np.arange(len(jobs))
    oc, orow, ov = occupancy(cols)
    n_x, n_j = len(cols), len(jobs)
    # rows: one per job (exactly one column), capacity per slot and resource, and the
    # makespan M >= each job's completion (M is the last column, at the idle draw's rate)
    n_rows = 2 * n_j + n_s * n_r
    rows = np.concatenate((job_row[cols.job], n_j + orow, n_j + n_s * n_r + job_row[cols.job],
                           n_j + n_s * n_r + np.arange(n_j)))
    columns = np.concatenate((np.arange(n_x), oc, np.arange(n_x), np.full(n_j, n_x)))
    values = np.concatenate((np.ones(n_x), ov, -cols.end, np.ones(n_j)))
    start, index, value = _csr(n_rows, rows, columns, values)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_x + 1, n_rows
    lp.col_cost_ = np.concatenate((cols.cost, [cols.idle_rate]))
    lp.col_lower_ = np.zeros(n_x + 1)
    lp.col_upper_ = np.concatenate((np.ones(n_x), [INF]))
    cap = np.tile(cols.capacity, n_s) * (1.0 + 1e-9)
    lp.row_lower_ = np.concatenate((np.ones(n_j), np.full(n_s * n_r, -INF), np.zeros(n_j)))
    lp.row_upper_ = np.concatenate((np.ones(n_j), cap, np.full(n_j, INF)))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_x + 1, n_rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = start, index, value
    lp.integrality_ = ([highspy.HighsVarType.kInteger] * n_x
                       + [highspy.HighsVarType.kContinuous])
    h = getattr(highspy, "_Highs", highspy.Highs)()
    for name, val in (("output_flag", False), ("log_to_console", False),
                      ("time_limit", float(time_limit_s)), ("mip_max_nodes", int(max_nodes)),
                      ("mip_rel_gap", MIP_GAP)):
        h.setOptionValue(name, val)
    h.passModel(lp)
    if warm is not None:
        h.setSolution(_start(highspy, cols, warm))
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    figures = {"optimal": float(status == highspy.HighsModelStatus.kOptimal),
               "mip_gap": float(info.mip_gap), "nodes": float(info.mip_node_count)}
    solution = h.getSolution()
    if not solution.value_valid:
        return None, figures
    x = np.asarray(solution.col_value)[:n_x]
    choice = np.full(n_jobs, -1, dtype=np.int64)
    picked = np.flatnonzero(x > 0.5)
    choice[cols.job[picked]] = picked
    figures["value"] = value_of(cols, choice)[0]
    return choice, figures


def _start(highspy: Any, cols: Columns, warm: np.ndarray) -> Any:
    """The solver's starting solution: the columns of ``warm`` and their makespan."""
    x0 = np.zeros(len(cols) + 1)
    x0[warm[warm >= 0]] = 1.0
    x0[len(cols)] = value_of(cols, warm)[1]
    sol = highspy.HighsSolution()
    sol.col_value = x0.tolist()
    return sol


def value_of(cols: Columns, choice: np.ndarray) -> tuple[float, float]:
    """(the model's objective, the makespan from now) of a column per job (-1: none)."""
    picked = choice[choice >= 0]
    makespan = float(cols.end[picked].max()) if picked.size else 0.0
    return float(cols.cost[picked].sum()) + cols.idle_rate * makespan, makespan


class Continuation:
    """Completes a plan for now into whole columns: each job the plan leaves waiting
    takes, in queue order, its cheapest later column that still fits what is left of the
    capacity (the horizon's end always fits). The warm start and the guard's yardstick."""

    def __init__(self, cols: Columns, queue: np.ndarray) -> None:
        self.cols, self.queue = cols, queue
        oc, orow, ov = occupancy(cols)
        order = np.argsort(oc, kind="stable")
        self.o_rows, self.o_vals = orow[order], ov[order]
        self.o_start = np.concatenate(([0], np.cumsum(np.bincount(oc, minlength=len(cols)))))
        self.by_job: dict[int, np.ndarray] = {}
        for j in np.unique(cols.job):
            self.by_job[int(j)] = np.flatnonzero(cols.job == j)

    def complete(self, fixed: dict[int, int]) -> tuple[np.ndarray, float]:
        cols = self.cols
        left = np.tile(cols.capacity, cols.n_slots) * (1.0 + 1e-9)
        choice = np.full(len(self.queue), -1, dtype=np.int64)
        for j, c in fixed.items():
            self._take(left, c)
            choice[j] = c
        for j in self.queue:
            j = int(j)
            if j in fixed or j not in self.by_job:
                continue
            cand = self.by_job[j]
            cand = cand[(cols.slot[cand] > 0) & ~cols.keep[cand]]
            for c in cand[np.argsort(cols.cost[cand], kind="stable")]:
                a, b = self.o_start[c], self.o_start[c + 1]
                if np.all(self.o_vals[a:b] <= left[self.o_rows[a:b]]):
                    self._take(left, c)
                    choice[j] = c
                    break
        return choice, value_of(cols, choice)[0]

    def _take(self, left: np.ndarray, c: int) -> None:
        a, b = self.o_start[c], self.o_start[c + 1]
        np.subtract.at(left, self.o_rows[a:b], self.o_vals[a:b])


def now_columns(p: Problem, cols: Columns, node: np.ndarray, cfg: np.ndarray
                ) -> dict[int, int] | None:
    """The slot-0 column of every job a packed plan runs (its job -> column); None when
    a job runs where the model has no column for it."""
    res = np.full(len(p.cfg_g), -1, dtype=np.int64)
    res[cols.cfg] = cols.res
    index = {(int(j), int(c), bool(k)): i for i, (j, c, k) in enumerate(
        zip(cols.job, cols.cfg, cols.keep)) if cols.slot[i] == 0}
    out: dict[int, int] = {}
    for j in np.flatnonzero(node >= 0):
        c = int(cfg[j])
        m = c if res[c] >= 0 else _modelled(p, res, c)
        keep = bool(p.run_node[j] >= 0 and p.cfg_base[c] == p.run_cfg[j])
        col = index.get((int(j), m, keep), index.get((int(j), m, False)))
        if col is None:
            return None
        out[int(j)] = col
    return out


Row = tuple[np.ndarray, np.ndarray, np.ndarray, float, float]    # node, cfg, class, f_obj, f_mix


def pack(p: Problem, cols: Columns, choice: np.ndarray) -> Row:
    """The model's slot 0 on the real nodes, by the constructions' kernel: jobs it keeps
    stay where they run; jobs it starts now, most GPUs first, best fit on the
    configuration it chose, else on fewer GPUs of the same node class (cloud: GPU
    type), else they wait (in the cloud idle GPUs of a VM may go to a job there, as in
    every construction). Returns (node, cfg, node class, f_obj, f_mix) of the one row."""
    nj, nc = p.n_jobs, len(p.cfg_g)
    now = np.flatnonzero((choice >= 0) & (cols.slot[np.maximum(choice, 0)] == 0))
    kept = {int(j) for j in now if cols.keep[choice[j]]}
    starts = [int(j) for j in now if int(j) not in kept]
    position = np.empty(nj, dtype=np.int64)
    position[p.queue] = np.arange(nj)
    starts.sort(key=lambda j: (-int(p.cfg_g[cols.cfg[choice[j]]]), position[j]))
    queue = np.array(starts + [j for j in p.queue.tolist() if j not in set(starts)],
                     dtype=np.int64)
    runnable = np.zeros((nj, nc), dtype=np.bool_)
    pref = np.tile(np.arange(nc, dtype=np.int64), (nj, 1))
    for j in starts:
        c = int(cols.cfg[choice[j]])
        same = np.flatnonzero((p.cfg_class == p.cfg_class[c]) & (p.cfg_level == 0)
                              & p.runnable[j])
        g = p.cfg_g[same]
        order = list(same[g == p.cfg_g[c]]) + list(same[g < p.cfg_g[c]][np.argsort(
            -g[g < p.cfg_g[c]])]) + list(same[g > p.cfg_g[c]][np.argsort(g[g > p.cfg_g[c]])])
        runnable[j, order] = True
        rest = [x for x in range(nc) if x not in set(order)]
        pref[j] = np.array(order + rest, dtype=np.int64)
    keep_rows = np.array([int(j) in kept for j in p.pin_job], dtype=np.bool_)
    return construct_one(p, queue, pref, runnable, keep_rows)


def construct_one(p: Problem, queue: np.ndarray, pref: np.ndarray, runnable: np.ndarray,
                  keep_rows: np.ndarray) -> Row:
    """One deterministic row of the constructions' kernel: the running jobs of
    ``keep_rows`` (a mask over ``Problem.pin_job``) kept where they run, then the queue
    with each job's preference among its ``runnable`` configurations. Returns (node,
    cfg, node class, f_obj, f_mix)."""
    from andreas.optimizer.construction import empty_rows

    nj, nc = p.n_jobs, len(p.cfg_g)
    rows = Rows(strategy=np.zeros(1, np.int64), randomized=np.zeros(1, np.bool_),
                seed=np.zeros(1, np.int64), queue=queue[None, :], pref=pref[None, :, :],
                cdf=np.ones((1, nj, nc)), pinned=np.ones(1, np.bool_),
                exclusive=np.zeros(1, np.bool_), p_swap=np.zeros(nj))
    out = empty_rows(1, nj, p.n_nodes)
    kernel = p.kernel._replace(runnable=runnable, pin_job=p.pin_job[keep_rows],
                               pin_node=p.pin_node[keep_rows], pin_cfg=p.pin_cfg[keep_rows])
    construct_rows(kernel, rows, out)
    return out.node[0], out.cfg[0], out.ncls[0], float(out.obj[0]), float(out.mix[0])


def idle_cost(p: Problem, node: np.ndarray, cfg: np.ndarray, ncls: np.ndarray) -> float:
    """Cloud: what a packing's idle GPUs cost until the first job of their node ends (the
    idle term of f_mix), which the model's price per GPU does not see; 0 on premise."""
    if not p.cloud:
        return 0.0
    placed = np.flatnonzero(node >= 0)
    if not placed.size:
        return 0.0
    n = node[placed]
    used = np.bincount(n, weights=p.cfg_g[cfg[placed]], minlength=p.n_nodes)
    first = np.full(p.n_nodes, INF)
    np.minimum.at(first, n, p.t[placed, cfg[placed]])
    on = np.flatnonzero(used > 0)
    k = ncls[on]
    idle = p.class_gpus[k] - used[on]
    price = p.class_cost_h[k, 1] / p.class_gpus[k]
    return float((idle * price * first[on]).sum() / SECONDS_PER_HOUR)


def decide_horizon(snapshot: Snapshot, rng: np.random.Generator, *,
                   time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                   max_columns: int = DEFAULT_MAX_COLUMNS, slots: int = DEFAULT_SLOTS,
                   iterations: int | None = None, plan_shortage: bool = False,
                   max_nodes: int = MAX_NODES, sharing: Sharing | None = None) -> Plan:
    """Plan the next hours, start what the plan starts now (see the module docstring).
    On premise, while the greedy plan leaves a job waiting, the greedy plan stands
    unless ``plan_shortage``: as for rg (``greedy.SHORTAGE_FALLBACK``), the model's
    plans lost to it by far over whole overloaded traces (docs/results.md)."""
    if has_demands(snapshot):
        return decide_rg(snapshot, rng, iterations=iterations, sharing=sharing)
    clock = time.perf_counter()
    p = compile_ordered(snapshot, rng)
    rows = _constructions(p, rng, iterations)
    stats: dict[str, float] = {"jobs": p.n_jobs, "columns": 0.0, "solved": -1.0}
    pick = ("greedy", *rows["greedy"])
    shortage = bool((rows["greedy"][0] < 0).any())
    stats["shortage"] = float(shortage)
    if shortage and not p.cloud and p.moves_cost and not plan_shortage:
        return _plan(p, pick, stats, clock)
    cols = build_columns(p, slots=slots) if p.n_jobs else None
    if cols is None or not len(cols):
        return _plan(p, pick, stats, clock)
    stats.update(columns=float(len(cols)), slots=float(cols.n_slots),
                 horizon_h=float(cols.edges[-1] / SECONDS_PER_HOUR))
    cont = Continuation(cols, p.queue)
    values = _values(p, cols, cont, rows)
    best_name = min(values, key=lambda k: values[k][0])
    pick = (best_name, *rows[best_name])
    stats["greedy_value"] = values["greedy"][0]
    stats["value"] = values[best_name][0]
    if len(cols) > max_columns or not math.isfinite(values[best_name][0]):
        return _plan(p, pick, stats, clock)
    budget = max(0.1, time_limit_s - (time.perf_counter() - clock))
    planned = _solve_and_pack(p, cols, cont, values[best_name][1], budget, stats,
                              max_nodes)
    if planned is not None and planned[0] < values[best_name][0] * (1 - 1e-9):
        value, node, cfg, ncls, f_mix = planned
        pick = ("horizon", node, cfg, ncls, f_mix)
        stats["value"] = value
    return _plan(p, pick, stats, clock)


def _constructions(p: Problem, rng: np.random.Generator, iterations: int | None
                   ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, float]]:
    """The warm starts: greedy's row, rg's choice, and the greedy with every running job
    kept where it runs; each (node, cfg, node class, f_mix)."""
    from andreas.optimizer.greedy import rg_choice

    batch = construct(p, max(1, iterations or DEFAULT_ITERATIONS), rng)
    rg_row, _ = rg_choice(p, batch)
    rows = {name: (batch.node[r], batch.cfg[r], batch.node_cls[r], float(batch.f_mix[r]))
            for name, r in (("greedy", 0), ("rg", rg_row))}
    if len(p.pin_job):
        node, cfg, ncls, _, f_mix = construct_one(p, p.queue, p.pref, p.runnable,
                                                  np.ones(len(p.pin_job), dtype=np.bool_))
        rows["keep"] = (node, cfg, ncls, f_mix)
    return rows


def _values(p: Problem, cols: Columns, cont: Continuation, rows: dict
            ) -> dict[str, tuple[float, np.ndarray | None]]:
    """Each construction valued in the model, completed by ``cont`` (inf where the model
    has no column for one of its jobs), with the column per job of that completion."""
    values: dict[str, tuple[float, np.ndarray | None]] = {}
    for name, (node, cfg, ncls, _) in rows.items():
        fixed = now_columns(p, cols, node, cfg)
        if fixed is None:
            values[name] = (INF, None)
            continue
        choice, value = cont.complete(fixed)
        values[name] = (value + idle_cost(p, node, cfg, ncls), choice)
    return values


def _solve_and_pack(p: Problem, cols: Columns, cont: Continuation, warm: np.ndarray | None,
                    budget_s: float, stats: dict[str, float], max_nodes: int = MAX_NODES
                    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, float] | None:
    """The MILP's slot 0 packed on the real nodes and valued: (value, node, cfg, node
    class, f_mix), or None where the solver found nothing or the packing has no column."""
    choice, figures = solve(cols, p.n_jobs, warm, time_limit_s=budget_s, max_nodes=max_nodes)
    stats.update(solved=figures["optimal"], mip_gap=figures["mip_gap"],
                 mip_nodes=figures["nodes"])
    if choice is None:
        return None
    node, cfg, ncls, _, f_mix = pack(p, cols, choice)
    fixed = now_columns(p, cols, node, cfg)
    if fixed is None:
        return None
    planned = {int(j): int(c) for j, c in enumerate(choice)
               if c >= 0 and cols.slot[c] == 0}
    value = _continued_value(cont, fixed, figures.get("value", INF), planned)
    stats["packed_as_planned"] = float(fixed == planned)
    return value + idle_cost(p, node, cfg, ncls), node, cfg, ncls, f_mix


def _continued_value(cont: Continuation, fixed: dict[int, int], model_value: float,
                     planned: dict[int, int]) -> float:
    """A packed slot 0 valued with its best known continuation: the solver's when the
    packing is what it planned, and ``Continuation``'s in any case."""
    _, value = cont.complete(fixed)
    return min(value, model_value) if fixed == planned else value


def _plan(p: Problem, pick: tuple, stats: dict[str, float], clock: float) -> Plan:
    name, node, cfg, ncls, f_mix = pick
    stats["chosen"] = float(CHOICES.index(name))
    stats["wall_s"] = time.perf_counter() - clock
    return to_plan(p, node, cfg, ncls, policy="horizon", objective=f_mix,
                   objective_name=objective_name(p.cloud), stats=stats)
