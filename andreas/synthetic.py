"""Reproducible synthetic snapshots in the ANDREAS scenarios, for tests and benchmarks.

Scenario 1: half the nodes have 2 V100-class GPUs, half 1 T4-class GPU; scenario 2:
4 and 2. Node power curves and per-epoch times come from ``profiles/`` (each figure with
its source); due dates are submit + U[t_min, 3 t_min], weights U[0.003, 0.015] per
second, as in the papers' generators. Whole workloads are ``simulator.generate``'s job.
"""

from __future__ import annotations

import numpy as np

from andreas.model import CatalogEntry, Config, Job, Node, Snapshot
from andreas.profiles import load_profiles, node_power_w

SCENARIOS = {1: (2, 1), 2: (4, 2)}
PAPER_CATALOG = (
    ("NC6", "K80", 1, 0.56), ("NC12", "K80", 2, 1.13), ("NC24", "K80", 4, 2.25),
    ("NV6", "M60", 1, 0.62), ("NV12", "M60", 2, 1.24), ("NV24", "M60", 4, 2.48),
)


def scenario_nodes(n_nodes: int, scenario: int = 1) -> tuple[Node, ...]:
    v100, t4 = SCENARIOS[scenario]
    nodes = []
    for i in range(n_nodes):
        gpu_type, gpus = ("V100", v100) if i % 2 == 0 else ("T4", t4)
        nodes.append(Node(name=f"n{i + 1:03d}", gpu_type=gpu_type, gpus=gpus,
                          power_w=node_power_w(gpu_type, gpus)))
    return tuple(nodes)


def random_snapshot(rng: np.random.Generator, n_nodes: int, n_jobs: int, *, scenario: int = 1,
                    now_s: float = 100_000.0, running_share: float = 0.3,
                    cloud: bool = False) -> Snapshot:
    """A random but plausible rescheduling point; some jobs already run on feasible nodes
    (in the cloud on nodes that run a random VM of the catalog)."""
    if cloud:
        catalog = tuple(CatalogEntry(name=n, gpu_type=t, gpus=g, cost_per_hour=c)
                        for n, t, g, c in PAPER_CATALOG)
        nodes = tuple(Node(name=f"n{i + 1:03d}") for i in range(n_nodes))
        types = {"K80": 4, "M60": 4}
    else:
        catalog = ()
        nodes = scenario_nodes(n_nodes, scenario)
        types = {"V100": SCENARIOS[scenario][0], "T4": SCENARIOS[scenario][1]}
    profiles = load_profiles()
    names = sorted(profiles.apps)
    jobs = []
    free = {n.name: n.gpus for n in nodes}
    vm: dict[str, CatalogEntry] = {}   # cloud: the VM each node with running jobs runs
    for i in range(n_jobs):
        app = names[int(rng.integers(len(names)))]
        epoch_time = {t: profiles.epoch_times(app, t, g) for t, g in types.items()}
        epochs = int(rng.integers(20, 200))
        submit = float(now_s - rng.uniform(0, 50_000))
        done = int(rng.integers(0, epochs // 2 + 1)) if rng.random() < 0.5 else 0
        t_min = min(min(v) for v in epoch_time.values()) * epochs
        due = submit + float(rng.uniform(t_min, 3 * t_min))
        weight = float(rng.uniform(0.003, 0.015))
        running = None
        if not cloud and rng.random() < running_share:
            for node in nodes:
                g = int(rng.integers(1, node.gpus + 1))
                if free[node.name] >= g and node.gpu_type in epoch_time:
                    free[node.name] -= g
                    running = Config(node=node.name, gpus=g)
                    break
        elif cloud and rng.random() < running_share:
            for node in nodes:   # the first node with room, else a new VM on the next node
                if node.name not in vm:
                    vm[node.name] = catalog[int(rng.integers(len(catalog)))]
                    free[node.name] = vm[node.name].gpus
                entry = vm[node.name]
                g = int(rng.integers(1, entry.gpus + 1))
                if free[node.name] >= g and len(epoch_time.get(entry.gpu_type, ())) >= g:
                    free[node.name] -= g
                    running = Config(node=node.name, gpus=g)
                    break
        jobs.append(Job(id=f"j{i + 1:05d}", app=app, submit_s=round(submit, 3),
                        due_s=round(due, 3), weight=round(weight, 6), epochs=epochs,
                        epochs_done=done, epoch_time_s=epoch_time, running=running))
    if cloud:   # a node runs its VM only while it has running jobs
        busy = {j.running.node for j in jobs if j.running}
        nodes = tuple(Node(name=n.name, config=vm[n.name].name if n.name in busy else None)
                      for n in nodes)
    return Snapshot(name=f"synthetic-n{n_nodes}-j{n_jobs}-sc{scenario}", now_s=now_s,
                    nodes=nodes, jobs=tuple(jobs), catalog=catalog)
