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
nothing packs onto an open node.

Randomness comes from numba's generator, seeded per row from the caller's
``numpy.random.Generator``, so a seed reproduces every row bit for bit.

The objective of a row is computed from its final assignment with the same definitions
as ``andreas.costs.evaluate`` (tests hold them equal).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from andreas.optimizer.problem import VM_TIE

INF = np.inf


@njit(cache=True, nogil=True)
def _push(head, nxt, cnt, grp, lvl, node):
    """Put an open node with ``lvl`` free GPUs at the head of its group's list."""
    nxt[node] = head[grp, lvl]
    head[grp, lvl] = node
    cnt[grp, lvl] += 1


@njit(cache=True, nogil=True)
def _pop(head, nxt, cnt, grp, lvl):
    """Take the first node of a list: any node with that many free GPUs fits as well."""
    node = head[grp, lvl]
    head[grp, lvl] = nxt[node]
    nxt[node] = -1
    cnt[grp, lvl] -= 1
    return node


@njit(cache=True, nogil=True)
def _split(n, m, grp, node_of, cfg_of, cfg_g, used, ncls, class_gpus, class_cost_h,
           group_cheapest, group_best):
    """Move a subset of node n's jobs to the free node m when the two parts can be held
    by VMs that cost less per hour than n's VM (``group_best[l]``: the least a set of VMs
    holding l GPUs costs, so a part may be split again); the cheapest such subset."""
    jobs = np.empty(class_gpus.max(), np.int64)
    k = 0
    for j in range(node_of.shape[0]):
        if node_of[j] == n:
            jobs[k] = j
            k += 1
    if k < 2 or k > 12:
        return False
    best_price = class_cost_h[ncls[n], 1] + VM_TIE   # one VM: fewer VMs win a tie
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
    ncls[n] = group_cheapest[grp, used[n]]
    ncls[m] = group_cheapest[grp, moved]
    return True


@njit(cache=True, nogil=True)
def _swap_odd(n, opened, grp, fixed, node_of, cfg_of, cfg_g, used, class_gpus, class_group,
              ncls, group_cheapest):
    """Node n's cheapest VM would idle GPUs and a job on it runs on a GPU count that is not
    a power of two (3, 5, 6, 7: no VM size of the published catalog, whose VMs have 1, 2,
    4 or 8 GPUs): swap that job with jobs of a node its VM holds exactly, of the same GPU
    type, whose counts are powers of two and add up to the job's. That node stays exactly
    full; n's jobs can then be split among VMs that idle nothing (``_split``)."""
    n_jobs = node_of.shape[0]
    ys = np.empty(class_gpus.max(), np.int64)
    for x in range(n_jobs):
        if node_of[x] != n:
            continue
        gx = cfg_g[cfg_of[x]]
        if gx & (gx - 1) == 0:
            continue
        for f in range(opened):
            if (f == n or fixed[f] or used[f] <= 0 or class_group[ncls[f]] != grp
                    or class_gpus[group_cheapest[grp, used[f]]] != used[f]):
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
def _fill_idle(opened, fixed, used, ncls, class_gpus, cfg_index, cfg_g, runnable, t,
               out_node, out_cfg):
    """Cloud: a rented GPU left idle costs as much as a busy one, so each (not kept) node's
    idle GPUs go to the job on it that they speed up most (the first on a tie); it ends
    sooner at the same price per hour. Runs after downsizing and splitting, which remove
    what they can. One pass over the jobs: O(J + N) per row."""
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
def evaluate_row(node_of, cfg_of, ncls, used, cloud, class_gpus, class_cost_h, cfg_g, cfg_index,
                 t, rank, tard, fbar_term, post, mu):
    """(f_obj, f_bar, f_mix) of one assignment; rewrites cfg_of to each node's final class.

    f_mix (``costs.evaluate``): in the cloud each job's ``rank`` (its remaining work at the
    cheapest mix its configuration starts) instead of the node's price until its first
    job ends, which is left only for the node's idle GPUs; on premise f_mix = f_obj."""
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
    obj = tard_sum + post_sum + node_sum + mu * idle
    if not cloud:
        return obj, bar, obj
    return obj, bar, tard_sum + post_sum + rank_sum + idle_sum + mu * idle


@njit(cache=True, nogil=True)
def move_cost_row(node_of, cfg_of, run_node, run_cfg, cfg_base, mv_same, mv_change, mv_stop,
                  n_nodes):
    """The move costs (``costs.move_costs``) of one assignment (``cfg_of`` final): a
    running job continues in place when its solution node stands for its physical node
    at its configuration. A solution node stands for the physical node most of its
    in-place candidates run on (the largest groups first, each physical node once), as
    ``solution.to_plan`` relabels nodes within a class."""
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
def construct_row(randomize, seed, cloud, node_class, class_gpus, class_group, class_cost_h,
                  cfg_class, cfg_g, cfg_group, cfg_index, pack_class, group_cheapest,
                  group_best, group_nodes, group_count, t, rank, tard, fbar_term, post, runnable,
                  mu, pin_job, pin_node, pin_cfg, queue, pref, cdf, pinned, exclusive, p_swap,
                  out_node, out_cfg, out_ncls, run_node, run_cfg, cfg_base, mv_same, mv_change,
                  mv_stop):
    """One construction (ANDREAS Algorithm 1); returns (f_obj, f_bar, f_mix,
    work-conserving), move costs included (``move_cost_row``).

    With ``pinned`` the running jobs are first kept where they run.
    """
    n_jobs = t.shape[0]
    has_moves = run_node.shape[0] > 0
    n_nodes = node_class.shape[0]
    n_cfg = cfg_class.shape[0]
    n_groups = group_count.shape[0]
    levels = class_cost_h.shape[1]
    if randomize:
        np.random.seed(seed)
    free = np.zeros(n_nodes, np.int64)
    used = np.zeros(n_nodes, np.int64)
    fixed = np.zeros(n_nodes, np.bool_)
    ncls = np.empty(n_nodes, np.int64)
    for n in range(n_nodes):
        ncls[n] = -1 if cloud else node_class[n]
    head = np.full((n_groups, levels), -1, np.int64)
    cnt = np.zeros((n_groups, levels), np.int64)
    nxt = np.full(n_nodes, -1, np.int64)
    ptr = np.zeros(n_groups, np.int64)

    opened = 0
    closed_left = n_nodes
    open_free = 0
    for j in range(n_jobs):
        out_node[j] = -1
        out_cfg[j] = -1
    placed = np.zeros(n_jobs, np.bool_)

    # running jobs kept where they run (their node, class and GPU count)
    is_open = np.zeros(n_nodes, np.bool_)
    if pinned:
        node = -1
        last = -1
        for r in range(pin_job.shape[0]):
            j, c = pin_job[r], pin_cfg[r]
            if pin_node[r] != last:
                last = pin_node[r]
                k = cfg_class[c]
                if cloud:
                    node = opened
                    opened += 1
                else:
                    node = pin_node[r]
                ncls[node] = k
                free[node] = class_gpus[k]
                fixed[node] = True
                is_open[node] = True
                closed_left -= 1
            g = cfg_g[c]
            free[node] -= g
            used[node] += g
            out_node[j] = node
            out_cfg[j] = c
            placed[j] = True
        for n in range(n_nodes):
            if fixed[n] and free[n] > 0:
                _push(head, nxt, cnt, class_group[ncls[n]], free[n], n)
                open_free += free[n]

    if not cloud:   # the next closed node of each group: skip the nodes kept open above
        for grp in range(n_groups):
            while ptr[grp] < group_count[grp] and is_open[group_nodes[grp, ptr[grp]]]:
                ptr[grp] += 1
    order = queue.copy()
    for step in range(n_jobs):
        if closed_left == 0 and open_free == 0:
            break
        if randomize and step + 1 < n_jobs:
            if np.random.random() < p_swap[order[step]]:
                tmp = order[step]
                order[step] = order[step + 1]
                order[step + 1] = tmp
        j = order[step]
        if placed[j] or not runnable[j, pref[j, 0]]:
            continue
        if randomize:
            u = np.random.random()
            c = 0
            while c < n_cfg - 1 and cdf[j, c] < u:
                c += 1
            if not runnable[j, c]:
                c = pref[j, 0]
        else:
            c = pref[j, 0]
        # 1. best fit on an open node; 2. open a node; 3. the first config that fits
        for attempt in range(n_cfg + 1):
            if attempt > 0:
                c = pref[j, attempt - 1]
                if not runnable[j, c]:
                    break
            grp = cfg_group[c]
            g = cfg_g[c]
            lvl = -1
            if not exclusive:
                if randomize and attempt == 0:
                    total = 0.0
                    for lv in range(g, levels):
                        if cnt[grp, lv] > 0:
                            total += cnt[grp, lv] / max(1.0 + lv - g, 1.0)
                    if total > 0.0:
                        target = np.random.random() * total
                        acc = 0.0
                        for lv in range(g, levels):
                            if cnt[grp, lv] > 0:
                                acc += cnt[grp, lv] / max(1.0 + lv - g, 1.0)
                                lvl = lv
                                if acc > target:
                                    break
                else:
                    for lv in range(g, levels):
                        if cnt[grp, lv] > 0:
                            lvl = lv
                            break
            if lvl >= 0:
                node = _pop(head, nxt, cnt, grp, lvl)
                open_free -= free[node]
            elif cloud and opened < n_nodes:
                node = opened
                opened += 1
                closed_left -= 1
                k = cfg_class[c] if exclusive else pack_class[grp]
                ncls[node] = k
                free[node] = class_gpus[k]
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
            out_node[j] = node
            out_cfg[j] = c
            placed[j] = True
            if free[node] > 0:
                _push(head, nxt, cnt, grp, free[node], node)
                open_free += free[node]
            break

    # work-conserving: no postponed job could have run on the GPUs left free (P1n's
    # spirit); the constructions are by design, the baselines' one-job-per-node rows not
    # always, and a row that is not may not set the floor (see construction.py)
    wc = True
    for j in range(n_jobs):
        if placed[j] or not wc:
            continue
        for c in range(n_cfg):
            if not runnable[j, c]:
                continue
            grp = cfg_group[c]
            if closed_left > 0 and (cloud or ptr[grp] < group_count[grp]):
                wc = False
                break
            for lv in range(cfg_g[c], levels):
                if cnt[grp, lv] > 0:
                    wc = False
                    break
            if not wc:
                break

    # cloud: each packed node becomes the cheapest VM of its GPU type that holds its jobs,
    # or, where that VM would idle GPUs and a node is free, the cheaper pair of VMs
    if cloud and not exclusive:
        n = 0
        while n < opened:
            if used[n] > 0 and not fixed[n]:
                grp = class_group[ncls[n]]
                ncls[n] = group_cheapest[grp, used[n]]
                if class_gpus[ncls[n]] > used[n] and opened < n_nodes:
                    _swap_odd(n, opened, grp, fixed, out_node, out_cfg, cfg_g, used,
                              class_gpus, class_group, ncls, group_cheapest)
                while opened < n_nodes and class_gpus[ncls[n]] > used[n]:
                    if not _split(n, opened, grp, out_node, out_cfg, cfg_g, used, ncls,
                                  class_gpus, class_cost_h, group_cheapest, group_best):
                        break
                    fixed[opened] = False
                    opened += 1
            n += 1
        _fill_idle(opened, fixed, used, ncls, class_gpus, cfg_index, cfg_g, runnable, t,
                   out_node, out_cfg)
    for n in range(n_nodes):
        out_ncls[n] = ncls[n]
    obj, bar, mix = evaluate_row(out_node, out_cfg, ncls, used, cloud, class_gpus, class_cost_h,
                                 cfg_g, cfg_index, t, rank, tard, fbar_term, post, mu)
    if has_moves:
        moves = move_cost_row(out_node, out_cfg, run_node, run_cfg, cfg_base, mv_same,
                              mv_change, mv_stop, n_nodes)
        obj += moves
        mix += moves
    return obj, bar, mix, wc


@njit(cache=True, nogil=True)
def construct_rows(row_strategy, row_random, row_seed, cloud, node_class, class_gpus,
                   class_group, class_cost_h, cfg_class, cfg_g, cfg_group, cfg_index,
                   pack_class, group_cheapest, group_best, group_nodes, group_count, t, rank,
                   tard, fbar_term, post, runnable, mu, pin_job, pin_node, pin_cfg, s_queue,
                   s_pref, s_cdf, s_pinned, s_exclusive, p_swap, out_node, out_cfg, out_ncls,
                   out_obj, out_bar, out_mix, out_wc, run_node, run_cfg, cfg_base, mv_same,
                   mv_change, mv_stop):
    """Every row b with strategy ``row_strategy[b]``; results in the out_* arrays."""
    for b in range(row_strategy.shape[0]):
        s = row_strategy[b]
        obj, bar, mix, wc = construct_row(
            row_random[b], row_seed[b], cloud, node_class, class_gpus, class_group,
            class_cost_h, cfg_class, cfg_g, cfg_group, cfg_index, pack_class, group_cheapest,
            group_best, group_nodes, group_count, t, rank, tard, fbar_term, post, runnable, mu,
            pin_job,
            pin_node, pin_cfg, s_queue[s], s_pref[s], s_cdf[s], s_pinned[s], s_exclusive[s],
            p_swap, out_node[b], out_cfg[b], out_ncls[b], run_node, run_cfg, cfg_base, mv_same,
            mv_change, mv_stop)
        out_obj[b] = obj
        out_bar[b] = bar
        out_mix[b] = mix
        out_wc[b] = wc
