"""``keep_node`` in the cloud: the chosen plan's jobs put back on the VMs they run on.

The constructions re-pack jobs into VMs from scratch at every decision, so two jobs at
the same (VM type, GPU count) on two solution VMs of that type may each land on the
other's VM: a relocation that buys nothing (docs/measurements/2026-11-28-cloudmix).
Jobs at one base configuration (VM type, GPU count) are interchangeable among the
solution VMs of that type: swapping them keeps every job's configuration and every
VM's type and load, so the VMs' prices, every job's time and cost and the idle GPUs are
the plan's own; only which running jobs restart changes. ``keep_cloud`` picks the
mapping of solution VMs to physical VMs and the swaps that together keep the largest
move cost (``Problem.mv_same``) in place, an assignment problem solved exactly
(``_assign``): the kernel's mapping (``kernels.move_cost_row``) without swaps is one of
its candidates, so the plan's move cost is never above what the kernel priced.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from andreas.optimizer.kernels import _Moves, move_cost_row
from andreas.optimizer.problem import Problem

# Weights: kept move cost first, then kept jobs, then a VM that keeps its type.
_PER_JOB = 1e-3
_PER_TYPE = 1e-6


def keep_cloud(problem: Problem, node: np.ndarray, cfg: np.ndarray,
               node_cls: np.ndarray) -> tuple[np.ndarray, dict[int, int]]:
    """(node, label): the solution's jobs swapped among its VMs of their type at their
    base configuration, and the map of solution VM -> physical VM, keeping in place the
    running jobs of the most move cost."""
    p = problem
    node = node.astype(np.int64).copy()
    used = sorted({int(s) for s in node if s >= 0})
    if not used:
        return node, {}
    base = np.where(node >= 0, p.cfg_base[np.where(node >= 0, cfg, 0)], -1)
    # slots[s][b]: jobs of solution VM s at base configuration b
    slots: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for j in map(int, np.flatnonzero(node >= 0)):
        slots[int(node[j])][int(base[j])].append(j)
    # cand[(ph, b)]: running jobs on physical VM ph that the plan places at b, their own
    # base configuration (dearest move first)
    cand: dict[tuple[int, int], list[int]] = defaultdict(list)
    for j in map(int, np.flatnonzero((node >= 0) & (p.run_node >= 0))):
        if base[j] == p.run_cfg[j]:
            cand[(int(p.run_node[j]), int(base[j]))].append(j)
    for js in cand.values():
        js.sort(key=lambda j: (-float(p.mv_same[j]), j))
    n = p.n_nodes
    weight = np.zeros((len(used), n))
    for r, s in enumerate(used):
        for ph in range(n):
            w = 0.0
            for b, js in slots[s].items():
                kept = cand.get((ph, b), [])[:len(js)]
                w += float(sum(p.mv_same[j] for j in kept)) + _PER_JOB * len(kept)
            if p.snapshot.nodes[ph].config == p.class_name[node_cls[s]]:
                w += _PER_TYPE
            weight[r, ph] = w
    cols = _assign(-weight)
    label = {s: int(cols[r]) for r, s in enumerate(used)}
    # each solution VM takes the running jobs of its physical VM (a job is a candidate of
    # one physical VM only); the other jobs fill the slots left, their own VM first
    out = node.copy()
    by_base: dict[int, list[int]] = defaultdict(list)
    for s in used:
        for b, js in slots[s].items():
            by_base[b].extend(js)
    for b, js in by_base.items():
        room = {s: len(slots[s].get(b, ())) for s in used if b in slots[s]}
        chosen: set[int] = set()
        for s in room:
            kept = cand.get((label[s], b), [])[:room[s]]
            for j in kept:
                out[j] = s
                chosen.add(j)
            room[s] -= len(kept)
        rest = [j for j in sorted(js) if j not in chosen]
        left = []
        for j in rest:
            if room.get(int(node[j]), 0) > 0:
                room[int(node[j])] -= 1
                out[j] = node[j]
            else:
                left.append(j)
        for j in left:
            s = next(s for s in sorted(room) if room[s] > 0)
            room[s] -= 1
            out[j] = s
    return out, label


def _assign(cost: np.ndarray) -> np.ndarray:
    """Rows -> distinct columns of least total cost (rows <= columns): the Hungarian
    method with potentials, O(rows^2 cols)."""
    n, m = cost.shape
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    match = np.zeros(m + 1, np.int64)      # column -> row (1-based), 0 free
    way = np.zeros(m + 1, np.int64)
    for i in range(1, n + 1):
        match[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        done = np.zeros(m + 1, bool)
        while True:
            done[j0] = True
            i0 = match[j0]
            free = ~done[1:]
            red = cost[i0 - 1] - u[i0] - v[1:]
            better = free & (red < minv[1:])
            minv[1:][better] = red[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[match[done]] += delta
            v[done] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    rows = np.full(n, -1, np.int64)
    for j in range(1, m + 1):
        if match[j]:
            rows[match[j] - 1] = j - 1
    return rows


def repriced(problem: Problem, before: np.ndarray, after: np.ndarray, cfg: np.ndarray,
             label: dict[int, int]) -> float:
    """How much the move cost changes from the kernel's price of ``before``
    (``kernels.move_cost_row``, its own guess of the mapping) to ``after`` under ``label``
    (never positive: see the module's docstring)."""
    p = problem
    if not len(p.run_node):
        return 0.0
    moves = _Moves(p.node_class, p.run_node, p.run_cfg, p.cfg_base, p.mv_same, p.mv_change,
                   p.mv_stop)
    old = move_cost_row(moves, before.astype(np.int64), cfg.astype(np.int64))
    new = 0.0
    for j in np.flatnonzero(p.run_node >= 0):
        if after[j] < 0:
            new += float(p.mv_stop[j])
        elif p.cfg_base[cfg[j]] != p.run_cfg[j]:
            new += float(p.mv_change[j])
        elif label[int(after[j])] != p.run_node[j]:
            new += float(p.mv_same[j])
    return new - float(old)
