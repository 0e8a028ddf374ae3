"""The optimizer's hot loops, compiled with numba: B constructions and the local search.

Each construction row is independent, so a row is a plain loop over the queue with
per-row state (free GPUs per node, lists of open nodes by free GPUs per placement
group). Vectorising the rows in numpy cost one (B, N) array operation per step to find
a node; here a best-fit node is the head of a linked list, O(1).

Placement groups: on premise a group is a node class; in the cloud a group is a GPU
type. A cloud node opens as the group's *largest* VM so that later jobs pack onto it,
and once every job is placed each node is downsized to the cheapest VM of its GPU type
that holds its jobs (the published implementation's constructive step), split over
free nodes where that VM would idle GPUs (``_split``), after a job on a GPU count that is
not a power of two swaps into an exactly full node (``_swap_odd``); GPUs it still leaves idle go to
the job on it that they speed up most (``_fill_idle``). In *exclusive*
rows (the baselines' rule) every job opens a node of its own configuration's class and
nothing packs onto an open node. ``keep.py``: running jobs keep their nodes (an option).

Randomness comes from numba's generator, seeded per row from the caller's
``numpy.random.Generator``, so a seed reproduces every row bit for bit.

The objective of a row is computed from its final assignment with the same definitions
as ``andreas.costs.evaluate`` (tests hold them equal).

The kernels read the problem as one structure, ``problem.KernelArrays`` (built once per
problem), a batch's rows as ``Rows`` and write ``RowsOut``. A compiled call counts a
reference up and down for every array of the structures it is given, so a row's stages
take small views of the problem (``_Fit``, ``_Sizing``, ``_Costs``, ``_Moves``) and one
row state (``_Row``), all made once per batch.
"""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import njit

from andreas.optimizer.keep import SKIP, _holds, _keep_fit, _reserve
from andreas.optimizer.nodelists import _pop, _push
from andreas.optimizer.problem import VM_TIE

INF = np.inf
OPENED, CLOSED_LEFT, OPEN_FREE = 0, 1, 2    # a row's counters (``_Row.counters``)


class Rows(NamedTuple):
    """B rows to build: each row's strategy s, whether it draws and its seed; per strategy
    its queue, preferences, choice probabilities and flags (``construction.Strategy``)."""

    strategy: np.ndarray    # (B,) index into the per-strategy arrays
    randomized: np.ndarray  # (B,) bool
    seed: np.ndarray        # (B,)
    queue: np.ndarray       # (S, J)
    pref: np.ndarray        # (S, J, C)
    cdf: np.ndarray         # (S, J, C)
    pinned: np.ndarray      # (S,) bool
    exclusive: np.ndarray   # (S,) bool
    p_swap: np.ndarray      # (J,) probability that a job swaps with the next one


class RowsOut(NamedTuple):
    """What the rows built (``construction.Batch``)."""

    node: np.ndarray        # (B, J)
    cfg: np.ndarray         # (B, J)
    ncls: np.ndarray        # (B, N)
    obj: np.ndarray         # (B,)
    bar: np.ndarray         # (B,)
    mix: np.ndarray         # (B,)
    wc: np.ndarray          # (B,) bool


class _Row(NamedTuple):
    """One row's state: free and used GPUs, kept (``fixed``) nodes and classes per node,
    the lists of open nodes by group and free GPUs, each group's next closed node."""

    free: np.ndarray
    used: np.ndarray
    fixed: np.ndarray
    ncls: np.ndarray
    head: np.ndarray        # (G, L) first open node with l free GPUs, -1: none
    cnt: np.ndarray         # (G, L) open nodes with l free GPUs
    nxt: np.ndarray         # (N,) next node of the same list
    ptr: np.ndarray         # (G,) on premise: position of the next closed node
    is_open: np.ndarray
    placed: np.ndarray      # (J,)
    counters: np.ndarray    # (3,) nodes opened, closed nodes left, free GPUs on open nodes
    reserved: np.ndarray    # (N,) keep_node: GPUs held for running jobs not placed yet


# What each stage of a row reads of the problem: ``KernelArrays`` fields of the same names
# (numba compiles a helper for the structure it is given, so its body reads ``a.cfg_g``
# from either). A call counts a reference up and down per array of its structures, so the
# stages take these views, made once per batch, not the whole problem (30 arrays).
_Fit = namedtuple("_Fit", "cloud runnable cfg_group cfg_g cfg_class pack_class class_gpus "
                 "group_nodes group_count keep_node run_node run_cfg cfg_base")
#                                                         _place_queue, _work_conserving
_Sizing = namedtuple("_Sizing", "class_gpus class_group class_cost_h group_cheapest group_best "
                     "cfg_g cfg_index runnable t_energy")   # _downsize and what it calls
_Costs = namedtuple("_Costs", "cloud mu class_gpus class_cost_h cfg_index cfg_g t_energy rank "
                    "job_cost fbar_term post_cost")        # evaluate_row
_Moves = namedtuple("_Moves", "node_class run_node run_cfg cfg_base mv_same mv_change "
                    "mv_stop")                             # move_cost_row


@njit(cache=True, nogil=True)
def _views(a):
    """The stages' views of the problem ``a``."""
    fit = _Fit(a.cloud, a.runnable, a.cfg_group, a.cfg_g, a.cfg_class, a.pack_class,
               a.class_gpus, a.group_nodes, a.group_count,
               a.keep_node and not a.cloud and a.run_node.shape[0] > 0, a.run_node, a.run_cfg,
               a.cfg_base)
    sizing = _Sizing(a.class_gpus, a.class_group, a.class_cost_h, a.group_cheapest,
                     a.group_best, a.cfg_g, a.cfg_index, a.runnable, a.t_energy)
    costs = _Costs(a.cloud, a.mu, a.class_gpus, a.class_cost_h, a.cfg_index, a.cfg_g,
                   a.t_energy, a.rank, a.job_cost, a.fbar_term, a.post_cost)
    moves = _Moves(a.node_class, a.run_node, a.run_cfg, a.cfg_base, a.mv_same, a.mv_change,
                   a.mv_stop)
    return fit, sizing, costs, moves


@njit(cache=True, nogil=True)
def _split(a, st, n, m, grp, node_of, cfg_of):
    """Move a subset of node n's jobs to the free node m when the two parts can be held
    by VMs that cost less per hour than n's VM (``group_best[l]``: the least a set of VMs
    holding l GPUs costs, so a part may be split again); the cheapest such subset."""
    cfg_g, used, ncls, group_best = a.cfg_g, st.used, st.ncls, a.group_best
    jobs = np.empty(a.class_gpus.max(), np.int64)
    k = 0
    for j in range(node_of.shape[0]):
        if node_of[j] == n:
            jobs[k] = j
            k += 1
    if k < 2 or k > 12:
        return False
    best_price = a.class_cost_h[ncls[n], 1] + VM_TIE   # one VM: fewer VMs win a tie
    best_mask = 0
    for mask in range(1, (1 << k) - 1):
        moved = 0
        for i in range(k):
            if mask & (1 << i):
                moved += cfg_g[cfg_of[jobs[i]]]
        price = group_best[grp, used[n] - moved] + group_best[grp, moved]
        if price < best_price - 1e-12 * best_price - 1e-10:
            best_price, best_mask = price, mask
    if best_mask == 0:
        return False
    moved = 0
    for i in range(k):
        if best_mask & (1 << i):
            node_of[jobs[i]] = m
            moved += cfg_g[cfg_of[jobs[i]]]
    used[n] -= moved
    used[m] = moved
    ncls[n] = a.group_cheapest[grp, used[n]]
    ncls[m] = a.group_cheapest[grp, moved]
    return True


@njit(cache=True, nogil=True)
def _swap_odd(a, st, n, grp, node_of, cfg_of):
    """Node n's cheapest VM would idle GPUs and a job on it runs on a GPU count that is not
    a power of two (3, 5, 6, 7: no VM size of the published catalog, whose VMs have 1, 2,
    4 or 8 GPUs): swap that job with jobs of a node its VM holds exactly, of the same GPU
    type, whose counts are powers of two and add up to the job's. That node stays exactly
    full; n's jobs can then be split among VMs that idle nothing (``_split``)."""
    cfg_g, used, ncls, fixed = a.cfg_g, st.used, st.ncls, st.fixed
    class_group, class_gpus, cheapest = a.class_group, a.class_gpus, a.group_cheapest
    n_jobs = node_of.shape[0]
    ys = np.empty(class_gpus.max(), np.int64)
    for x in range(n_jobs):
        if node_of[x] != n:
            continue
        gx = cfg_g[cfg_of[x]]
        if gx & (gx - 1) == 0:
            continue
        for f in range(st.counters[OPENED]):
            if (f == n or fixed[f] or used[f] <= 0 or class_group[ncls[f]] != grp
                    or class_gpus[cheapest[grp, used[f]]] != used[f]):
                continue
            k = 0
            for j in range(n_jobs):
                if node_of[j] == f and k < ys.shape[0]:
                    g = cfg_g[cfg_of[j]]
                    if g & (g - 1) == 0:
                        ys[k] = j
                        k += 1
            hit = 0
            for mask in range(1, 1 << k):
                total = 0
                for i in range(k):
                    if mask & (1 << i):
                        total += cfg_g[cfg_of[ys[i]]]
                if total == gx:
                    hit = mask
                    break
            if hit:
                for i in range(k):
                    if hit & (1 << i):
                        node_of[ys[i]] = n
                node_of[x] = f
                break


@njit(cache=True, nogil=True)
def _fill_idle(a, st, out_node, out_cfg):
    """Cloud: a rented GPU left idle costs as much as a busy one, so each (not kept) node's
    idle GPUs go to the job on it that they speed up most (the first on a tie); it ends
    sooner at the same price per hour. Runs after downsizing and splitting, which remove
    what they can. One pass over the jobs: O(J + N) per row."""
    opened, used, ncls, fixed = st.counters[OPENED], st.used, st.ncls, st.fixed
    cfg_index, class_gpus, cfg_g, runnable, t = (a.cfg_index, a.class_gpus, a.cfg_g,
                                                 a.runnable, a.t_energy)
    levels = cfg_index.shape[1]
    best_j = np.full(opened, -1, np.int64)
    best_c = np.full(opened, -1, np.int64)
    best_ratio = np.full(opened, 1.0 + 1e-9)
    for j in range(out_node.shape[0]):
        n = out_node[j]
        if n < 0 or n >= opened or fixed[n] or used[n] <= 0:
            continue
        k = ncls[n]
        idle = class_gpus[k] - used[n]
        g = cfg_g[out_cfg[j]]
        if idle <= 0 or g + idle >= levels:
            continue
        c_now = cfg_index[k, g]
        c_new = cfg_index[k, g + idle]
        if c_now < 0 or c_new < 0 or not runnable[j, c_new]:
            continue
        ratio = t[j, c_now] / t[j, c_new]
        if ratio > best_ratio[n]:
            best_ratio[n] = ratio
            best_j[n] = j
            best_c[n] = c_new
    for n in range(opened):
        if best_j[n] >= 0:
            out_cfg[best_j[n]] = best_c[n]
            used[n] = class_gpus[ncls[n]]


@njit(cache=True, nogil=True)
def evaluate_row(a, node_of, cfg_of, ncls, used):
    """(f_obj, f_bar, f_mix) of one assignment; rewrites cfg_of to each node's final class.

    f_mix (``costs.evaluate``): in the cloud each job's ``rank`` (its remaining work at the
    cheapest mix its configuration starts) instead of the node's price until its first
    job ends, which is left only for the node's idle GPUs; on premise f_mix = f_obj."""
    cloud, class_gpus, class_cost_h, t = a.cloud, a.class_gpus, a.class_cost_h, a.t_energy
    post, cfg_index, cfg_g, tard, rank, fbar_term = (a.post_cost, a.cfg_index, a.cfg_g,
                                                     a.job_cost, a.rank, a.fbar_term)
    n_nodes = ncls.shape[0]
    tmin = np.full(n_nodes, INF)
    tard_sum = 0.0
    post_sum = 0.0
    rank_sum = 0.0
    bar = 0.0
    for j in range(node_of.shape[0]):
        n = node_of[j]
        if n < 0:
            post_sum += post[j]
            continue
        c = cfg_of[j]
        if cloud:   # the node's final VM; on premise the class is fixed (and so the level)
            c = cfg_index[ncls[n], cfg_g[c]]
            cfg_of[j] = c
        tard_sum += tard[j, c]
        rank_sum += rank[j, c]
        bar += fbar_term[j, c]
        if t[j, c] < tmin[n]:
            tmin[n] = t[j, c]
    node_sum = 0.0
    idle_sum = 0.0
    idle = 0
    for n in range(n_nodes):
        if used[n] > 0:
            node_sum += tmin[n] * class_cost_h[ncls[n], used[n]] / 3600.0
            idle += class_gpus[ncls[n]] - used[n]
            if cloud:
                idle_sum += (tmin[n] * (class_gpus[ncls[n]] - used[n])
                             * class_cost_h[ncls[n], 1] / class_gpus[ncls[n]] / 3600.0)
    obj = tard_sum + post_sum + node_sum + a.mu * idle
    if not cloud:
        return obj, bar, obj
    return obj, bar, tard_sum + post_sum + rank_sum + idle_sum + a.mu * idle


@njit(cache=True, nogil=True)
def move_cost_row(a, node_of, cfg_of):
    """The move costs (``costs.move_costs``) of one assignment (``cfg_of`` final): a
    running job continues in place when its solution node stands for its physical node
    at its configuration. A solution node stands for the physical node most of its
    in-place candidates run on (the largest groups first, each physical node once), as
    ``solution.to_plan`` relabels nodes within a class."""
    run_node, run_cfg, cfg_base = a.run_node, a.run_cfg, a.cfg_base
    mv_same, mv_change, mv_stop = a.mv_same, a.mv_change, a.mv_stop
    n_nodes = a.node_class.shape[0]
    n_jobs = node_of.shape[0]
    k = 0
    key = np.empty(n_jobs, np.int64)
    for j in range(n_jobs):
        if run_node[j] >= 0 and node_of[j] >= 0 and cfg_base[cfg_of[j]] == run_cfg[j]:
            key[k] = node_of[j] * n_nodes + run_node[j]
            k += 1
    owner = np.full(n_nodes, -1, np.int64)      # solution node -> physical node
    if k > 0:
        pairs = np.sort(key[:k])
        uniq = np.empty(k, np.int64)
        votes = np.empty(k, np.int64)
        m = 0
        for i in range(k):
            if m > 0 and uniq[m - 1] == pairs[i]:
                votes[m - 1] += 1
            else:
                uniq[m] = pairs[i]
                votes[m] = 1
                m += 1
        taken = np.zeros(n_nodes, np.bool_)
        for i in np.argsort(-votes[:m], kind="mergesort"):
            s, ph = uniq[i] // n_nodes, uniq[i] % n_nodes
            if owner[s] < 0 and not taken[ph]:
                owner[s] = ph
                taken[ph] = True
    total = 0.0
    for j in range(n_jobs):
        if run_node[j] < 0:
            continue
        if node_of[j] < 0:
            total += mv_stop[j]
        elif cfg_base[cfg_of[j]] != run_cfg[j]:
            total += mv_change[j]
        elif owner[node_of[j]] != run_node[j]:
            total += mv_same[j]
    return total


@njit(cache=True, nogil=True)
def _new_row(a, n_jobs):
    """Room for one row's state, reused by every row of a batch (``_clear_row``)."""
    n, lists = a.node_class.shape[0], (a.group_count.shape[0], a.class_cost_h.shape[1])
    return _Row(np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.bool_),
                np.empty(n, np.int64), np.empty(lists, np.int64), np.empty(lists, np.int64),
                np.empty(n, np.int64), np.empty(lists[0], np.int64), np.empty(n, np.bool_),
                np.empty(n_jobs, np.bool_), np.empty(3, np.int64), np.empty(n, np.int64))


@njit(cache=True, nogil=True)
def _clear_row(st, cloud, node_class, node_of, cfg_of):
    """An empty row: every node closed (on premise each keeps its class), no job placed."""
    st.free[:] = 0
    st.used[:] = 0
    st.fixed[:] = False
    for n in range(node_class.shape[0]):
        st.ncls[n] = -1 if cloud else node_class[n]
    st.head[:] = -1
    st.cnt[:] = 0
    st.nxt[:] = -1
    st.ptr[:] = 0
    st.is_open[:] = False
    st.placed[:] = False
    st.counters[:] = 0
    st.reserved[:] = 0
    st.counters[CLOSED_LEFT] = node_class.shape[0]
    node_of[:] = -1
    cfg_of[:] = -1


@njit(cache=True, nogil=True)
def _pin_running(a, st, node_of, cfg_of):
    """Keep the running jobs where they run (their node, class and GPU count); the GPUs
    their nodes have left join the open lists. On premise each group's next closed node
    then skips the nodes kept open."""
    pin_job, pin_node, pin_cfg, cfg_class, cfg_g = (a.pin_job, a.pin_node, a.pin_cfg,
                                                    a.cfg_class, a.cfg_g)
    cloud, class_gpus, class_group = a.cloud, a.class_gpus, a.class_group
    free, used, fixed, ncls, is_open, placed, counters = (st.free, st.used, st.fixed, st.ncls,
                                                          st.is_open, st.placed, st.counters)
    node = -1
    last = -1
    for r in range(pin_job.shape[0]):
        j, c = pin_job[r], pin_cfg[r]
        if pin_node[r] != last:
            last = pin_node[r]
            k = cfg_class[c]
            if cloud:
                node = counters[OPENED]
                counters[OPENED] += 1
            else:
                node = pin_node[r]
            ncls[node] = k
            free[node] = class_gpus[k]
            fixed[node] = True
            is_open[node] = True
            counters[CLOSED_LEFT] -= 1
        g = cfg_g[c]
        free[node] -= g
        used[node] += g
        node_of[j] = node
        cfg_of[j] = c
        placed[j] = True
    head, nxt, cnt = st.head, st.nxt, st.cnt
    for n in range(free.shape[0]):
        if fixed[n] and free[n] > 0:
            _push(head, nxt, cnt, class_group[ncls[n]], free[n], n)
            counters[OPEN_FREE] += free[n]
    ptr, group_nodes, group_count = st.ptr, a.group_nodes, a.group_count
    for grp in range(0 if cloud else group_count.shape[0]):
        while ptr[grp] < group_count[grp] and is_open[group_nodes[grp, ptr[grp]]]:
            ptr[grp] += 1


@njit(cache=True, nogil=True)
def _place_queue(a, st, rows, s, randomize, node_of, cfg_of):
    """Place the strategy's queue in order (a randomized row swaps neighbours with
    ``p_swap``) until every node is full. A job: 1. best fit of its first configuration
    (a randomized row draws it from ``cdf`` and the open node's level, closer fits
    likelier) on an open node; 2. open a node (cloud: as the group's largest VM, or the
    configuration's own in an exclusive row); 3. the same for each configuration of its
    preference in turn; with ``keep_node`` (on premise) ``_keep_fit`` chooses the node,
    or ``SKIP``s the configuration. The hot loop: the arrays are taken out of the
    structures once and the counters are locals (1.6x faster per row than in an array,
    which every store may alias); no call but _push, _pop and ``_keep_fit``."""
    cloud, runnable, cfg_group, cfg_g, cfg_class = (a.cloud, a.runnable, a.cfg_group, a.cfg_g,
                                                    a.cfg_class)
    pack_class, class_gpus, group_nodes, group_count = (a.pack_class, a.class_gpus,
                                                        a.group_nodes, a.group_count)
    free, used, ncls, head, cnt, nxt = st.free, st.used, st.ncls, st.head, st.cnt, st.nxt
    ptr, is_open, placed, counters = st.ptr, st.is_open, st.placed, st.counters
    pref, cdf, exclusive, p_swap = rows.pref[s], rows.cdf[s], rows.exclusive[s], rows.p_swap
    keep_row = a.keep_node and not exclusive
    if keep_row:
        _reserve(a, st, pref)
    n_jobs, n_nodes, n_cfg, levels = node_of.shape[0], free.shape[0], pref.shape[1], cnt.shape[1]
    order = rows.queue[s].copy()
    opened, closed_left, open_free = counters[OPENED], counters[CLOSED_LEFT], counters[OPEN_FREE]
    for step in range(n_jobs):
        if closed_left == 0 and open_free == 0:
            break
        if randomize and step + 1 < n_jobs:
            if np.random.random() < p_swap[order[step]]:
                order[step], order[step + 1] = order[step + 1], order[step]
        j = order[step]
        if placed[j] or not runnable[j, pref[j, 0]]:
            continue
        if keep_row and _holds(a, j, pref[j, 0]):
            st.reserved[a.run_node[j]] -= cfg_g[a.run_cfg[j]]
        c = pref[j, 0]
        if randomize:
            u = np.random.random()
            c = 0
            while c < n_cfg - 1 and cdf[j, c] < u:
                c += 1
            if not runnable[j, c]:
                c = pref[j, 0]
        for attempt in range(n_cfg + 1):
            if attempt > 0:
                c = pref[j, attempt - 1]
                if not runnable[j, c]:
                    break
            grp, g, lvl = cfg_group[c], cfg_g[c], -1
            if not exclusive and randomize and attempt == 0:
                total = 0.0
                for lv in range(g, levels):
                    if cnt[grp, lv] > 0:
                        total += cnt[grp, lv] / max(1.0 + lv - g, 1.0)
                if total > 0.0:
                    target, acc = np.random.random() * total, 0.0
                    for lv in range(g, levels):
                        if cnt[grp, lv] > 0:
                            acc += cnt[grp, lv] / max(1.0 + lv - g, 1.0)
                            lvl = lv
                            if acc > target:
                                break
            elif not exclusive:
                for lv in range(g, levels):
                    if cnt[grp, lv] > 0:
                        lvl = lv
                        break
            node, was_open = _keep_fit(a, st, j, c, lvl) if keep_row else (-1, False)
            if node >= 0:
                open_free -= free[node] if was_open else 0
                closed_left -= 0 if was_open else 1
            elif node == SKIP:
                continue
            elif lvl >= 0:
                node = _pop(head, nxt, cnt, grp, lvl)
                open_free -= free[node]
            elif cloud and opened < n_nodes:
                node = opened
                opened += 1
                closed_left -= 1
                ncls[node] = cfg_class[c] if exclusive else pack_class[grp]
                free[node] = class_gpus[ncls[node]]
                is_open[node] = True
            elif not cloud and ptr[grp] < group_count[grp]:
                node = group_nodes[grp, ptr[grp]]
                ptr[grp] += 1
                while ptr[grp] < group_count[grp] and is_open[group_nodes[grp, ptr[grp]]]:
                    ptr[grp] += 1
                closed_left -= 1
                is_open[node] = True
                free[node] = class_gpus[ncls[node]]
            else:
                continue
            free[node] -= g
            used[node] += g
            node_of[j], cfg_of[j], placed[j] = node, c, True
            if free[node] > 0:
                _push(head, nxt, cnt, grp, free[node], node)
                open_free += free[node]
            break
    counters[OPENED], counters[CLOSED_LEFT], counters[OPEN_FREE] = opened, closed_left, open_free


@njit(cache=True, nogil=True)
def _work_conserving(a, st):
    """No postponed job could have run on the GPUs left free (P1n's spirit); the
    constructions are by design, the baselines' one-job-per-node rows not always, and a
    row that is not may not set the floor (see construction.py)."""
    cloud, runnable, cfg_group, cfg_g, group_count = (a.cloud, a.runnable, a.cfg_group,
                                                      a.cfg_g, a.group_count)
    placed, ptr, cnt, closed_left = st.placed, st.ptr, st.cnt, st.counters[CLOSED_LEFT]
    levels = cnt.shape[1]
    for j in range(placed.shape[0]):
        if placed[j]:
            continue
        for c in range(cfg_g.shape[0]):
            if not runnable[j, c]:
                continue
            grp = cfg_group[c]
            if closed_left > 0 and (cloud or ptr[grp] < group_count[grp]):
                return False
            for lv in range(cfg_g[c], levels):
                if cnt[grp, lv] > 0:
                    return False
    return True


@njit(cache=True, nogil=True)
def _downsize(a, st, node_of, cfg_of):
    """Cloud: each packed node becomes the cheapest VM of its GPU type that holds its jobs,
    or, where that VM would idle GPUs and a node is free, the cheaper pair of VMs."""
    class_group, group_cheapest, class_gpus = a.class_group, a.group_cheapest, a.class_gpus
    used, fixed, ncls, counters = st.used, st.fixed, st.ncls, st.counters
    n_nodes = used.shape[0]
    n = 0
    while n < counters[OPENED]:
        if used[n] > 0 and not fixed[n]:
            grp = class_group[ncls[n]]
            ncls[n] = group_cheapest[grp, used[n]]
            if class_gpus[ncls[n]] > used[n] and counters[OPENED] < n_nodes:
                _swap_odd(a, st, n, grp, node_of, cfg_of)
            while counters[OPENED] < n_nodes and class_gpus[ncls[n]] > used[n]:
                if not _split(a, st, n, counters[OPENED], grp, node_of, cfg_of):
                    break
                fixed[counters[OPENED]] = False
                counters[OPENED] += 1
        n += 1
    _fill_idle(a, st, node_of, cfg_of)


@njit(cache=True, nogil=True)
def construct_rows(a, rows, out):
    """Every row of ``rows`` on the problem ``a`` (``problem.KernelArrays``), into ``out``.

    Row b: one construction (ANDREAS Algorithm 1) of its strategy, its f_obj, f_bar and
    f_mix, move costs included (``move_cost_row``), and whether it is work-conserving.
    With the strategy's ``pinned`` the running jobs are first kept where they run. The
    row state and the stages' views are made once per batch; a row only clears them."""
    fit, sizing, costs, moves = _views(a)
    st = _new_row(a, out.node.shape[1])
    cloud, node_class, has_moves = a.cloud, a.node_class, a.run_node.shape[0] > 0
    strategy, randomized, seed = rows.strategy, rows.randomized, rows.seed
    pinned, exclusive = rows.pinned, rows.exclusive
    out_node, out_cfg, out_ncls, out_wc = out.node, out.cfg, out.ncls, out.wc
    out_obj, out_bar, out_mix = out.obj, out.bar, out.mix
    for b in range(strategy.shape[0]):
        s = strategy[b]
        randomize = randomized[b]
        if randomize:
            np.random.seed(seed[b])
        node_of, cfg_of = out_node[b], out_cfg[b]
        _clear_row(st, cloud, node_class, node_of, cfg_of)
        if pinned[s]:
            _pin_running(a, st, node_of, cfg_of)
        _place_queue(fit, st, rows, s, randomize, node_of, cfg_of)
        out_wc[b] = _work_conserving(fit, st)
        if cloud and not exclusive[s]:
            _downsize(sizing, st, node_of, cfg_of)
        out_ncls[b, :] = st.ncls
        obj, bar, mix = evaluate_row(costs, node_of, cfg_of, st.ncls, st.used)
        if has_moves:
            moved = move_cost_row(moves, node_of, cfg_of)
            obj += moved
            mix += moved
        out_obj[b] = obj
        out_bar[b] = bar
        out_mix[b] = mix
