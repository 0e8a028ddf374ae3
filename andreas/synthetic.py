"""Reproducible synthetic snapshots in the ANDREAS scenarios, for tests and benchmarks.

Scenario 1: half the nodes have 2 V100-class GPUs, half 1 T4-class GPU; scenario 2:
4 and 2. Node power is host idle + every GPU's idle power + the busy-minus-idle power
of each busy GPU, with the per-GPU figures of the example snapshot (V100 35 -> 245 W,
T4 10 -> 70 W). Epoch times follow Amdahl's law, fitted to the example's 1- and 2-GPU
V100 times. Due dates are submit + U[t_min, 3 t_min], weights U[0.003, 0.015] per
second, as in the papers' generators.
"""

from __future__ import annotations

import numpy as np

from andreas.model import CatalogEntry, Config, Job, Node, Snapshot

# app -> (fast-type 1-GPU epoch s, slow-type 1-GPU epoch s, Amdahl serial fraction);
# V100 is the fast type on premise, M60 in the cloud catalog (path-relinking paper Table 2)
APPS = {
    "resnet50": (600.0, 1500.0, 0.1096),
    "lstm": (150.0, 260.0, 0.3195),
    "efficientnet": (700.0, 1600.0, 0.1487),
    "deepspeech": (300.0, 800.0, 0.1892),
}
GPU_POWER_W = {"V100": (35.0, 245.0), "T4": (10.0, 70.0)}
HOST_POWER_W = {"V100": 210.0, "T4": 150.0}
SCENARIOS = {1: (2, 1), 2: (4, 2)}
FAST_TYPES = {"V100", "M60"}
PAPER_CATALOG = (
    ("NC6", "K80", 1, 0.56), ("NC12", "K80", 2, 1.13), ("NC24", "K80", 4, 2.25),
    ("NV6", "M60", 1, 0.62), ("NV12", "M60", 2, 1.24), ("NV24", "M60", 4, 2.48),
)


def node_power_w(gpu_type: str, gpus: int) -> tuple[float, ...]:
    idle, busy = GPU_POWER_W[gpu_type]
    base = HOST_POWER_W[gpu_type] + gpus * idle
    return tuple(round(base + g * (busy - idle), 3) for g in range(gpus + 1))


def amdahl(t1: float, serial: float, gpus: int) -> tuple[float, ...]:
    return tuple(round(t1 * (serial + (1 - serial) / g), 3) for g in range(1, gpus + 1))


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
    """A random but plausible rescheduling point; some jobs already run on feasible nodes."""
    if cloud:
        catalog = tuple(CatalogEntry(name=n, gpu_type=t, gpus=g, cost_per_hour=c)
                        for n, t, g, c in PAPER_CATALOG)
        nodes = tuple(Node(name=f"n{i + 1:03d}") for i in range(n_nodes))
        types = {"K80": 4, "M60": 4}
    else:
        catalog = ()
        nodes = scenario_nodes(n_nodes, scenario)
        types = {"V100": SCENARIOS[scenario][0], "T4": SCENARIOS[scenario][1]}
    names = list(APPS)
    jobs = []
    free = {n.name: n.gpus for n in nodes}
    for i in range(n_jobs):
        app = names[int(rng.integers(len(names)))]
        fast, slow, serial = APPS[app]
        epoch_time = {}
        for gpu_type, gpus in types.items():
            t1 = fast if gpu_type in FAST_TYPES else slow
            epoch_time[gpu_type] = amdahl(t1, serial, gpus)
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
        jobs.append(Job(id=f"j{i + 1:05d}", app=app, submit_s=round(submit, 3),
                        due_s=round(due, 3), weight=round(weight, 6), epochs=epochs,
                        epochs_done=done, epoch_time_s=epoch_time, running=running))
    return Snapshot(name=f"synthetic-n{n_nodes}-j{n_jobs}-sc{scenario}", now_s=now_s,
                    nodes=nodes, jobs=tuple(jobs), catalog=catalog)
