"""Turning one array solution into a Plan, keeping running jobs where they are.

Nodes of one class are interchangeable for the objectives, so a solution's nodes may be
relabelled within their class at no cost. We pick the relabelling that keeps the most
running jobs on the node they already occupy (same node and GPU count scores most),
which spares the cluster pointless checkpoint-and-restart migrations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from andreas.model import Assignment, Plan
from andreas.optimizer.problem import Problem


def to_plan(problem: Problem, node: np.ndarray, cfg: np.ndarray, node_cls: np.ndarray, *,
            policy: str, objective: float, objective_name: str,
            stats: Mapping[str, float] | None = None) -> Plan:
    """Plan from per-job node indices and configurations (-1 = postponed)."""
    label = _relabel(problem, node, cfg, node_cls)
    names = problem.node_names
    assignments = []
    postponed = []
    for i, job in enumerate(problem.jobs):
        if node[i] < 0:
            postponed.append(job.id)
        else:
            assignments.append(Assignment(job=job.id, node=names[label[node[i]]],
                                          gpus=int(problem.cfg_g[cfg[i]])))
    configs = {}
    if problem.cloud:
        for s in np.unique(node[node >= 0]):
            configs[names[label[s]]] = problem.class_name[node_cls[s]]
    return Plan(policy=policy, assignments=tuple(assignments), postponed=tuple(postponed),
                objective=float(objective), objective_name=objective_name,
                node_configs=configs, stats=dict(stats or {}))


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
    label: dict[int, int] = {}
    taken: set[int] = set()
    for (s, p), _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
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
