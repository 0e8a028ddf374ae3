"""The MILP of ``milp.py`` as HiGHS reads it: its columns (x, a, s and w blocks) and rows.

Apart from the solver's side (options, the start from the greedy plan, HiGHS runs) so
that each stays under the module size; the model itself is described in ``milp.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from andreas.costs import SECONDS_PER_HOUR
from andreas.errors import InputError
from andreas.optimizer.problem import Problem

DEFAULT_MAX_VARIABLES = 1_000_000


@dataclass(frozen=True, kw_only=True)
class Model:
    """The MILP's columns (x, a, s blocks, all binary) and rows in HiGHS's row-wise form."""

    xj: np.ndarray          # (X,) job of each x column
    xn: np.ndarray          # (X,) node of each x column
    xc: np.ndarray          # (X,) configuration of each x column
    ax: np.ndarray          # (A,) x column of each charge candidate
    ao: np.ndarray          # (A,) rate option of each charge candidate
    sn: np.ndarray          # (S,) node of each rate option
    sk: np.ndarray          # (S,) class of each rate option
    sl: np.ndarray          # (S,) busy level
    cost: np.ndarray        # (V,) objective coefficients; every column is binary
    offset: float
    start: np.ndarray       # (R+1,) CSR row starts
    index: np.ndarray
    value: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    n_wc_rows: int = 0      # rows of the work-conserving set (0: not imposed)
    # cloud work conservation: the w column of each job's profile (-1: none), see
    # _cloud_wc_rows; the w block follows the s block
    job_w: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def n_x(self) -> int:
        return len(self.xj)

    @property
    def n_a(self) -> int:
        return len(self.ax)

    @property
    def n_s(self) -> int:
        return len(self.sn)

    @property
    def n_cols(self) -> int:
        return len(self.cost)

    @property
    def n_rows(self) -> int:
        return len(self.row_lo)


def _as_int(parts: list) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _x_columns(p: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (job, node, configuration) the job can run on: on premise the node's own class."""
    js, ns, cs = [], [], []
    for n in range(p.n_nodes):
        allowed = (np.ones(len(p.cfg_class), bool) if p.cloud
                   else p.cfg_class == p.node_class[n])
        j, c = np.nonzero(p.runnable & allowed[None, :])
        js.append(j)
        cs.append(c)
        ns.append(np.full(len(j), n))
    return _as_int(js), _as_int(ns), _as_int(cs)


def _s_columns(p: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rate options, grouped by node: (node, class, busy GPUs, cost per hour); in the cloud
    one per VM type and busy level (f_mix prices the idle GPUs, G - level)."""
    options: list[tuple[int, int, int, float]] = []
    for n in range(p.n_nodes):
        if p.cloud:
            options += [(n, k, level, float(p.class_cost_h[k, 1]))
                        for k in range(len(p.class_gpus))
                        for level in range(1, int(p.class_gpus[k]) + 1)]
        else:
            k = int(p.node_class[n])
            options += [(n, k, level, float(p.class_cost_h[k, level]))
                        for level in range(1, int(p.class_gpus[k]) + 1)]
    if not options:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, np.zeros(0)
    sn, sk, sl, rate = (np.array(col) for col in zip(*options))
    return sn.astype(np.int64), sk.astype(np.int64), sl.astype(np.int64), rate.astype(float)


class _Rows:
    """Accumulates constraint rows as (row, column, value) triplets."""

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.count = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray | float, n_rows: int,
            lo: float | np.ndarray, hi: float | np.ndarray) -> None:
        """``n_rows`` new rows; ``rows`` numbers them 0..n_rows-1 for each entry."""
        rows = np.asarray(rows, dtype=np.int64)
        self.r.append(rows + self.count)
        self.c.append(np.asarray(cols, dtype=np.int64))
        self.v.append(np.broadcast_to(np.asarray(vals, dtype=float), rows.shape).copy())
        self.lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (n_rows,)).copy())
        self.hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (n_rows,)).copy())
        self.count += n_rows

    def csr(self) -> tuple[np.ndarray, ...]:
        r = np.concatenate(self.r) if self.r else np.zeros(0, np.int64)
        c = np.concatenate(self.c) if self.c else np.zeros(0, np.int64)
        v = np.concatenate(self.v) if self.v else np.zeros(0)
        order = np.lexsort((c, r))
        start = np.zeros(self.count + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=self.count), out=start[1:])
        lo = np.concatenate(self.lo) if self.lo else np.zeros(0)
        hi = np.concatenate(self.hi) if self.hi else np.zeros(0)
        return start, c[order], v[order], lo, hi


def _a_columns(p: Problem, xn, xc, sn, sk, sl) -> tuple[np.ndarray, np.ndarray]:
    """Charge candidates (x column, rate option of its node): every busy level that leaves
    room for the job's own GPUs (in the cloud, of the VM type of its configuration)."""
    first = np.searchsorted(sn, np.arange(p.n_nodes))     # options are grouped by node
    # cloud: a node's options are (class, level) in class order, levels 1..G_k
    offset = np.concatenate([[0], np.cumsum(p.class_gpus)])[:-1] if p.cloud else None
    ax, ao = [], []
    for x, (n, c) in enumerate(zip(xn, xc)):
        g = int(p.cfg_g[c])
        k = int(p.cfg_class[c]) if p.cloud else int(p.node_class[n])
        base = first[n] + (offset[k] if offset is not None else 0)
        for level in range(g, int(p.class_gpus[k]) + 1):
            ax.append(x)
            ao.append(base + level - 1)
    return np.array(ax, dtype=np.int64), np.array(ao, dtype=np.int64)


def build_model(p: Problem, *, max_variables: int = DEFAULT_MAX_VARIABLES,
                work_conserving: bool = True) -> Model:
    """The MILP of one compiled problem (see the module docstring for the formulation)."""
    post = p.post_cost
    xj, xn, xc = _x_columns(p)
    sn, sk, sl, rate = _s_columns(p)
    nx, ns = len(xj), len(sn)
    per_x = int(p.class_gpus.max(initial=1))
    if nx * (1 + per_x) + ns > max_variables:
        raise InputError(f"snapshot: the MILP needs about {nx * (1 + per_x) + ns} variables for "
                         f"{p.n_jobs} jobs and {p.n_nodes} nodes, more than "
                         f"max_variables={max_variables}")
    ax, ao = _a_columns(p, xn, xc, sn, sk, sl)
    na = len(ax)
    X, A, S = 0, nx, nx + na   # block offsets
    n_cols = nx + na + ns
    mu = float(p.snapshot.params.mu)
    g = p.cfg_g[xc].astype(float)
    hours = p.t_energy[xj, xc] / SECONDS_PER_HOUR

    cost = np.zeros(n_cols)
    cost[X:A] = p.job_cost[xj, xc] - post[xj] - mu * g    # tardiness (+ power level)
    if p.cloud:    # f_mix: each job its rank, the charged job's time prices the idle GPUs
        cost[X:A] += p.rank[xj, xc]
        capacity = p.class_gpus[sk[ao]].astype(float)
        cost[A:S] = hours[ax] * rate[ao] * (capacity - sl[ao]) / capacity
    else:
        cost[A:S] = hours[ax] * rate[ao]         # the charged job's time x the node's rate
    cost[S:] = mu * p.class_gpus[sk].astype(float)   # capacity of a running node
    offset = float(post.sum())
    if p.has_moves:     # a running job pays its move costs unless it runs in place
        cost[X:A] += _move_columns(p, xj, xn, xc)
        offset += float(p.mv_stop.sum())
    rows = _Rows()
    ix, ia, io = np.arange(nx), np.arange(na), np.arange(ns)
    # each job at most once (the rest is postponed)
    rows.add(xj, X + ix, 1.0, p.n_jobs, -np.inf, 1.0)
    # at most one rate option per node (P1b)
    rows.add(sn, S + io, 1.0, p.n_nodes, -np.inf, 1.0)
    # one charged job under the chosen option, none under the others (P1k)
    rows.add(np.concatenate([ao, io]), np.concatenate([A + ia, S + io]),
             np.concatenate([np.ones(na), -np.ones(ns)]), ns, 0.0, 0.0)
    # only a job that runs there can be charged (P1l)
    rows.add(np.concatenate([ax, ix]), np.concatenate([A + ia, X + ix]),
             np.concatenate([np.ones(na), -np.ones(nx)]), nx, -np.inf, 0.0)
    if p.cloud:
        _cloud_rows(p, rows, xn, xc, sn, sk, sl, g, X, S)
    else:
        _onprem_rows(p, rows, xn, sn, sl, g, X, S)
    before = rows.count
    job_w = np.full(p.n_jobs, -1, dtype=np.int64)
    if work_conserving:
        if p.cloud:
            job_w = _cloud_wc_rows(p, rows, xj, xn, xc, sn, sk, X, S, n_cols)
            cost = np.concatenate([cost, np.zeros(int(job_w.max(initial=-1)) + 1)])
        else:
            _onprem_wc_rows(p, rows, xj, sn, sl, X, S)
    start, index, value, lo, hi = rows.csr()
    return Model(xj=xj, xn=xn, xc=xc, ax=ax, ao=ao, sn=sn, sk=sk, sl=sl, cost=cost,
                 offset=offset, start=start, index=index, value=value,
                 row_lo=lo, row_hi=hi, n_wc_rows=rows.count - before, job_w=job_w)


def _move_columns(p: Problem, xj, xn, xc) -> np.ndarray:
    """Per x column, the move costs (``costs.move_costs``) it adds, less the stop cost
    that running anywhere saves (that one is in the offset): nothing for a job that runs
    on its own node at its configuration (cloud: the node keeps its VM, the class of c)."""
    rn, rc = p.run_node[xj], p.run_cfg[xj]
    running = rn >= 0
    extra = np.where(p.cfg_base[xc] != rc, p.mv_change[xj],
                     np.where(xn != rn, p.mv_same[xj], 0.0))
    return np.where(running, extra - p.mv_stop[xj], 0.0)


def _onprem_rows(p: Problem, rows: _Rows, xn, sn, sl, g, X: int, S: int) -> None:
    """Busy GPUs = the one-hot level; identical nodes ordered by busy GPUs (not where
    moves cost something: then a node's identity matters)."""
    nx, ns = len(xn), len(sn)
    rows.add(np.concatenate([xn, sn]), np.concatenate([X + np.arange(nx), S + np.arange(ns)]),
             np.concatenate([g, -sl.astype(float)]), p.n_nodes, 0.0, 0.0)
    if p.has_moves:
        return
    pairs = [(int(a), int(b)) for k in range(len(p.class_gpus))
             for a, b in zip(class_members(p, k), class_members(p, k)[1:])]
    _order_rows(rows, pairs, sn, S, sl.astype(float))


def _cloud_rows(p: Problem, rows: _Rows, xn, xc, sn, sk, sl, g, X: int, S: int) -> None:
    """The GPUs of a node's jobs of VM type k = the busy level of its one-hot option (k, l),
    l <= G_k: capacity (P1g), and x <= y (P1c), y[n,k] = sum_l s[n,k,l]. Open nodes come
    first.

    Measured on 20 random cloud snapshots (<= 6 nodes, <= 15 jobs), proving optimality took
    40 s in all with P1c's one row per x and nodes ordered by (VM type, busy GPUs); 13 s
    with neither, only "open nodes first".
    """
    nx, ns = len(xn), len(sn)
    n_k = len(p.class_gpus)
    row_x = xn * n_k + p.cfg_class[xc]              # one row per (node, VM type)
    row_s = sn * n_k + sk
    rows.add(np.concatenate([row_x, row_s]),
             np.concatenate([X + np.arange(nx), S + np.arange(ns)]),
             np.concatenate([g, -sl.astype(float)]), p.n_nodes * n_k, 0.0, 0.0)
    if not p.has_moves:
        _order_rows(rows, [(n, n + 1) for n in range(p.n_nodes - 1)], sn, S, np.ones(ns))


def fewest_gpus(p: Problem, key: np.ndarray) -> np.ndarray:
    """(J, max key + 1) the fewest GPUs each job runs on per value of ``key`` (one value per
    configuration: its class, or its GPU type), 0 where it runs on none."""
    width = int(key.max(initial=-1)) + 1
    out = np.zeros((p.n_jobs, width), dtype=np.int64)
    for v in range(width):
        g = np.where(p.runnable & (key == v)[None, :], p.cfg_g[None, :], np.iinfo(np.int64).max)
        low = g.min(axis=1, initial=np.iinfo(np.int64).max)
        out[:, v] = np.where(low < np.iinfo(np.int64).max, low, 0)
    return out


def _by_job(xj: np.ndarray, n_jobs: int) -> list[np.ndarray]:
    """x columns of each job."""
    order = np.argsort(xj, kind="stable")
    return np.split(order, np.searchsorted(xj[order], np.arange(1, n_jobs)))


def _onprem_wc_rows(p: Problem, rows: _Rows, xj, sn, sl, X: int, S: int) -> None:
    """Work conservation on premise (module docstring): per job and class, the least busy
    node of the class (the last in the symmetry order) has fewer than g_min free GPUs
    unless the job runs."""
    need = fewest_gpus(p, p.cfg_class)                     # (J, K)
    cols_of = _by_job(xj, p.n_jobs)
    for k in range(len(p.class_gpus)):
        members = class_members(p, k)
        if not members:
            continue
        # without the symmetry order (move costs) every node of the class has the row
        for node in (members if p.has_moves else members[-1:]):
            opts = np.flatnonzero(sn == node)
            for j in np.flatnonzero(need[:, k] > 0):
                big = float(p.class_gpus[k] - need[j, k] + 1)
                mine = cols_of[j]
                cols = np.concatenate([S + opts, X + mine])
                vals = np.concatenate([sl[opts].astype(float), np.full(len(mine), big)])
                rows.add(np.zeros(len(cols), np.int64), cols, vals, 1, big, np.inf)


def _cloud_wc_rows(p: Problem, rows: _Rows, xj, xn, xc, sn, sk, X: int, S: int,
                   W: int) -> np.ndarray:
    """Work conservation in the cloud (module docstring), with jobs grouped by *profile*
    (their a_jv over VM types; in practice every job of a GPU type set shares one): a
    binary w per profile, w >= 1 - z_j for its jobs, and per profile and node
    ``busy(n) - M w + sum_v (M - a_v) y[n,v] >= 0``. w = 1 asks the node to be open and,
    if of a type the profile runs on, loaded with at least a_v GPUs; busy(n) counts every
    job, which is the load of the others whenever one of the profile waits.

    The same set written per job and node (J x N rows, each summing the node's load)
    proved the same optima in 15 s of CPU instead of 10 s over 40 cloud snapshots
    (<= 6 nodes); the w columns give HiGHS one implication per profile instead of one
    per job. Returns each job's w column within the w block (-1: it runs nowhere)."""
    types = list(dict.fromkeys(p.class_type))
    type_of = np.array([types.index(t) for t in p.class_type], dtype=np.int64)   # (K,)
    need = fewest_gpus(p, type_of[p.cfg_class])                                  # (J, T)
    gmax = np.array([p.class_gpus[type_of == t].max() for t in range(len(types))])
    a = np.where(need > 0, gmax[None, :] - need + 1, 0)                          # (J, T)
    runs = need.max(axis=1, initial=0) > 0
    profiles: dict[tuple[int, ...], int] = {}
    job_w = np.full(p.n_jobs, -1, dtype=np.int64)
    for j in np.flatnonzero(runs):
        job_w[j] = profiles.setdefault(tuple(int(v) for v in a[j]), len(profiles))
    cols_of = _by_job(xj, p.n_jobs)
    for j in np.flatnonzero(runs):           # w + z_j >= 1
        mine = cols_of[j]
        rows.add(np.zeros(len(mine) + 1, np.int64),
                 np.concatenate([[W + job_w[j]], X + mine]), 1.0, 1, 1.0, np.inf)
    g = p.cfg_g[xc].astype(float)
    for profile, w in profiles.items():
        a_t = np.array(profile, dtype=float)
        big = float(a_t.max())
        for n in range(p.n_nodes):
            load = np.flatnonzero(xn == n)
            opts = np.flatnonzero(sn == n)
            cols = np.concatenate([X + load, [W + w], S + opts])
            vals = np.concatenate([g[load], [-big], big - a_t[type_of[sk[opts]]]])
            keep = vals != 0.0
            rows.add(np.zeros(int(keep.sum()), np.int64), cols[keep], vals[keep], 1, 0.0,
                     np.inf)
    return job_w


def class_members(p: Problem, k: int) -> list[int]:
    return [int(n) for n in p.class_nodes[k] if n >= 0]


def _order_rows(rows: _Rows, pairs: list[tuple[int, int]], sn, S: int, weight) -> None:
    """sum_o weight_o s[a,o] >= sum_o weight_o s[b,o] for each (a, b)."""
    for a, b in pairs:
        ia, ib = np.flatnonzero(sn == a), np.flatnonzero(sn == b)
        cols = np.concatenate([S + ia, S + ib])
        vals = np.concatenate([weight[ia], -weight[ib]])
        rows.add(np.zeros(len(cols), np.int64), cols, vals, 1, 0.0, np.inf)


# --------------------------------------------------------------------------- solving
