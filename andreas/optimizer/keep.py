"""``keep_node`` in the constructions (on premise): a running job that a row places at
its own (class, g) keeps its node (``kernels._place_queue`` calls ``_keep_fit``).

Best fit places every job anew in queue order, so two one-GPU jobs running on two nodes
are packed onto one and the other restarts elsewhere, redoing its partial epoch; kept on
its node a job runs in the same time at the same energy, and does not move. A running
job's GPUs are held for it until its turn (``_reserve``), so that a job ahead of it in
the queue takes them only where nothing else holds that job; a running job that can
continue where it runs never takes them to change its configuration (``SKIP``): on
the Zeus traces such upgrades moved the job they displaced again and again, and made
jobs late (docs/measurements/2026-11-28-loose). The row state is ``kernels._Row``;
``a`` is its ``_Fit`` view of the problem.
"""

from __future__ import annotations

from numba import njit

from andreas.optimizer.nodelists import _unlink

SKIP = -2   # ``_keep_fit``: not this configuration


@njit(cache=True, nogil=True)
def _holds(a, j, first):
    """Running job j would stay where it runs at its first choice of configuration."""
    return a.run_node[j] >= 0 and a.cfg_base[first] == a.run_cfg[j]


@njit(cache=True, nogil=True)
def _reserve(a, st, pref):
    """keep_node: each node holds the GPUs of the running jobs on it that would stay
    (``_holds``) until their turn comes, so that a job ahead of them in the queue takes
    them only where nothing else can hold it."""
    for j in range(a.run_node.shape[0]):
        if not st.placed[j] and a.runnable[j, pref[j, 0]] and _holds(a, j, pref[j, 0]):
            st.reserved[a.run_node[j]] += a.cfg_g[a.run_cfg[j]]


@njit(cache=True, nogil=True)
def _open_at(a, st, grp, node):
    """Open the closed node ``node`` of group ``grp``; its group's next closed node then
    skips it (nodes may open out of ``group_nodes``' order)."""
    ptr, is_open, group_nodes, group_count = st.ptr, st.is_open, a.group_nodes, a.group_count
    is_open[node] = True
    st.free[node] = a.class_gpus[st.ncls[node]]
    while ptr[grp] < group_count[grp] and is_open[group_nodes[grp, ptr[grp]]]:
        ptr[grp] += 1


@njit(cache=True, nogil=True)
def _keep_fit(a, st, j, c, lvl):
    """keep_node (on premise): the node for job j at configuration c, taken out of its
    open list or opened, and whether it was open; -1 if the caller's own rule decides.

    1. A running job at its own (class, g) stays on its node (open or not) where that
    node still has the GPUs: the same time and energy, and no move. 2. Best fit from
    level ``lvl`` up among open nodes, skipping those whose free GPUs are held for
    running jobs not placed yet (``_reserve``). 3. A closed node with enough GPUs not
    held. 4. A running job that could still continue in place takes no held GPUs to
    change configuration: ``SKIP``, its next configuration (in the end its own, step
    1). Else (-1) the queue's rule, which may take held GPUs: a job never waits for a
    running job's sake (a running job that can stay does not wait)."""
    free, reserved, is_open, head, nxt, cnt = (st.free, st.reserved, st.is_open, st.head,
                                               st.nxt, st.cnt)
    grp, g, home = a.cfg_group[c], a.cfg_g[c], a.run_node[j]
    if home >= 0 and a.cfg_base[c] == a.run_cfg[j]:
        if is_open[home] and free[home] >= g:
            if free[home] > 0:
                _unlink(head, nxt, cnt, grp, free[home], home)
            return home, True
        if not is_open[home]:
            _open_at(a, st, grp, home)
            return home, False
    for lv in range(max(lvl, g), cnt.shape[1] if lvl >= 0 else 0):
        n = head[grp, lv]
        while n >= 0 and free[n] - reserved[n] < g:
            n = nxt[n]
        if n >= 0:
            _unlink(head, nxt, cnt, grp, lv, n)
            return n, True
    nodes = a.group_nodes[grp]
    for i in range(st.ptr[grp], a.group_count[grp]):
        n = nodes[i]
        if not is_open[n] and a.class_gpus[st.ncls[n]] - reserved[n] >= g:
            _open_at(a, st, grp, n)
            return n, False
    if home >= 0 and _room_at_home(a, st, j):
        return SKIP, False
    return -1, False


@njit(cache=True, nogil=True)
def _room_at_home(a, st, j):
    """Running job j could still continue on its node at its own (class, g)."""
    home, g = a.run_node[j], a.cfg_g[a.run_cfg[j]]
    if st.is_open[home]:
        return st.free[home] - st.reserved[home] >= g
    return a.class_gpus[st.ncls[home]] - st.reserved[home] >= g
