"""Turning one array solution into a Plan, keeping running jobs where they are.

Nodes of one class are interchangeable for the objectives, so a solution's nodes may be
relabelled within their class at no cost. We pick the relabelling that keeps the most
running jobs on the node they already occupy (same node and GPU count scores most),
which spares the cluster pointless checkpoint-and-restart migrations.

A plan also says when it goes stale (``revisit_s``). A job that must run fast now to
end on time gains slack as it runs; a slower configuration it pays less on becomes on
time at a moment no submission or completion may mark. Deciding again then lets the job
mix the two configurations so that it ends near its due date, as the lower bound's
mixes do (``simulator/bounds.py``); deciding only at events leaves it on the fast one
until the next event, ending early and paying for speed it did not need.

Only in the cloud: there ``pi`` is what the job itself pays (its GPUs' share of the VM
price), so a lower ``pi`` is a saving. On premise ``pi`` prices the whole node's power at
the job's GPU count, the static draw is shared, and a stopped job redoes its partial
epoch; revisits there cost more than they saved (docs/design/objectives.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from collections.abc import Mapping

import numpy as np

from andreas.costs import evaluate, switch_share, switch_targets
from andreas.model import Assignment, Plan, Progress
from andreas.optimizer.keep_cloud import keep_cloud, repriced
from andreas.optimizer.levels import limit_of
from andreas.optimizer.problem import Problem

# A revisit lands this long after the moment computed, so that the cheaper configuration
# is strictly on time then (D* is now + t < d) despite rounding.
REVISIT_MARGIN_S = 1.0


def to_plan(problem: Problem, node: np.ndarray, cfg: np.ndarray, node_cls: np.ndarray, *,
            policy: str, objective: float, objective_name: str,
            stats: Mapping[str, float] | None = None, revisit: bool = True) -> Plan:
    """Plan from per-job node indices and configurations (-1 = postponed); ``revisit_s``
    in the cloud unless ``revisit`` is False (the papers' baselines decide at their own
    points only)."""
    if problem.cloud and problem.keep_node:      # jobs put back on their VMs (keep_cloud.py)
        kept, label = keep_cloud(problem, node, cfg, node_cls)
        objective = float(objective) + repriced(problem, node, kept, cfg, label)
        node = kept
    else:
        label = _relabel(problem, node, cfg, node_cls)
    names = problem.node_names
    assignments = []
    postponed = []
    for i, job in enumerate(problem.jobs):
        if node[i] < 0:
            postponed.append(job.id)
        else:
            assignments.append(Assignment(job=job.id, node=names[label[node[i]]],
                                          gpus=int(problem.cfg_g[cfg[i]]),
                                          power_limit_w=limit_of(problem.cfg_limit_w,
                                                                 int(cfg[i]))))
    configs = {}
    if problem.cloud:
        for s in np.unique(node[node >= 0]):
            configs[names[label[s]]] = problem.class_name[node_cls[s]]
    plan = Plan(policy=policy, assignments=tuple(assignments), postponed=tuple(postponed),
                objective=float(objective), objective_name=objective_name,
                node_configs=configs, stats=dict(stats or {}),
                revisit_s=revisit_s(problem, node, cfg) if revisit and problem.cloud else None)
    if problem.above_idle:     # chosen above idle, it reports f_obj all the same
        plan = replace(plan, objective=evaluate(problem.snapshot, plan,
                                                move_margin=problem.move_margin).f_mix)
    return plan


def revisit_s(problem: Problem, node: np.ndarray, cfg: np.ndarray) -> float | None:
    """The earliest moment a job the solution runs on time could switch to a configuration
    with a lower ``pi`` (what the job pays there) and still end on time; None if none can.

    While a job runs on c its remaining time on a slower c' shrinks in proportion to its
    remaining work, t'(tau) = t' (1 - tau / t_c) (restart overheads are not scaled: an
    estimate of when to look, the policy decides then), and c' is on time once
    t'(tau) <= (d - now) - tau, i.e. tau = share * t_c with ``costs.switch_share``, below
    t_c whenever c is on time: the switch of ``costs.mix_cost``'s two-step mix."""
    placed = np.flatnonzero(node >= 0)
    if not placed.size:
        return None
    now = problem.snapshot.now_s
    own = cfg[placed]
    t_cur = problem.t[placed, own]
    pi_cur = problem.pi[placed, own]
    left = problem.due[placed] - now
    t_alt = problem.t[placed]
    on_time = np.isfinite(t_cur) & (t_cur > 0) & (t_cur < left)
    cheaper_later = on_time[:, None] & switch_targets(
        t_cur[:, None], pi_cur[:, None], t_alt, problem.pi[placed], left[:, None],
        np.isfinite(t_alt))
    if not cheaper_later.any():
        return None
    rows, cols = np.nonzero(cheaper_later)
    tau = switch_share(t_cur[rows], t_alt[rows, cols], left[rows]) * t_cur[rows]
    if problem.snapshot.params.progress == Progress.EPOCH:
        tau = _at_epoch_end(problem, placed[rows], own[rows], t_cur[rows], tau)
    return float(now + tau.min() + REVISIT_MARGIN_S)


def _at_epoch_end(problem: Problem, jobs: np.ndarray, cfgs: np.ndarray, t_cur: np.ndarray,
                  tau: np.ndarray) -> np.ndarray:
    """Each switch moment moved to the job's first epoch end at or after it: a job that
    switches there loses no partial epoch (epoch checkpoints), only the restart overhead,
    so the move pays for itself sooner than one in the middle of an epoch."""
    out = tau.copy()
    for i, (j, c) in enumerate(zip(jobs, cfgs)):
        job = problem.jobs[int(j)]
        times = job.epoch_time_s.get(problem.class_type[problem.cfg_class[c]], ())
        g = int(problem.cfg_g[c])
        if g > len(times) or times[g - 1] <= 0:
            continue
        e = times[g - 1]
        left = job.epochs - job.epochs_done
        if abs(t_cur[i] - left * e) > 1e-6 * max(t_cur[i], 1.0):    # a restart: whole epochs
            left = job.epochs - math.floor(job.epochs_done + 1e-9)
        first = t_cur[i] - (math.ceil(left - 1e-9) - 1) * e         # its next epoch end
        out[i] = first + math.ceil(max(0.0, tau[i] - first) / e - 1e-9) * e
    return out


def _relabel(problem: Problem, node: np.ndarray, cfg: np.ndarray,
             node_cls: np.ndarray) -> dict[int, int]:
    """Map solution node index -> physical node index (a permutation within each class)."""
    index = {name: i for i, name in enumerate(problem.node_names)}
    used = sorted({int(s) for s in node if s >= 0})
    group = (lambda s: 0) if problem.cloud else (lambda s: int(problem.node_class[s]))
    scores: dict[tuple[int, int], int] = defaultdict(int)
    for i, job in enumerate(problem.jobs):
        run = job.running
        if run is None or node[i] < 0:
            continue
        phys = index[run.node]
        if group(phys) != group(int(node[i])):
            continue
        same_g = run.gpus == int(problem.cfg_g[cfg[i]])
        scores[(int(node[i]), phys)] += 2 if same_g else 1
    if problem.cloud:
        for s in used:
            for p in index.values():
                current = problem.snapshot.nodes[p].config
                if current == problem.class_name[node_cls[s]]:
                    scores[(s, p)] += 1
    # keep_node places running jobs on their own nodes: on a tie a node keeps its label
    home = problem.keep_node and not problem.cloud
    label: dict[int, int] = {}
    taken: set[int] = set()
    for (s, p), _ in sorted(scores.items(), key=lambda kv: (-kv[1], home and kv[0][0] != kv[0][1],
                                                             kv[0])):
        if s not in label and p not in taken:
            label[s] = p
            taken.add(p)
    members: dict[int, list[int]] = defaultdict(list)
    for p in range(problem.n_nodes):
        if p not in taken:
            members[group(p)].append(p)
    for s in used:
        if s not in label:
            label[s] = members[group(s)].pop(0)
    return label


def restarts(problem: Problem, node: np.ndarray, cfg: np.ndarray) -> int:
    """Running jobs that a solution stops, resizes or moves to another node class: each one
    restarts from its checkpoint (moves within a class are undone by relabelling)."""
    p = problem
    if not len(p.pin_job):
        return 0
    placed = node[p.pin_job] >= 0
    c = np.where(placed, cfg[p.pin_job], p.pin_cfg)
    same = (p.cfg_class[c] == p.cfg_class[p.pin_cfg]) & (p.cfg_g[c] == p.cfg_g[p.pin_cfg])
    return int((~placed | ~same).sum())
