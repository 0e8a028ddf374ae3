"""Reproducible workload traces in the papers' settings, from a seed and ``profiles/``.

Cluster: the ANDREAS scenarios, N nodes alternating V100-class and T4-class (scenario 1:
2 and 1 GPUs per node, scenario 2: 4 and 2), node power curves from ``profiles/``; or
(``cloud``) N bare nodes and the VM catalog of the path-relinking paper's Table 2.
Jobs: J = jobs_per_node * N, application drawn uniformly from ``profiles/apps.toml``,
epochs uniform in the application's range, epoch times for g = 1 .. the most GPUs of
each type a job can get, due date ``submit + U[min_t, 3 min_t]`` (min_t: the fastest
configuration), weight ``U[0.003, 0.015]`` per second. Everything is drawn from one
``numpy.random.default_rng(seed)`` in a fixed order, so a seed gives the same trace
bit for bit.

Arrivals (path-relinking-2022 §4.1). The first job is submitted at 0.

- ``exponential``: inter-arrival times exponential with mean 75 000 s / N.
- ``high``, ``low``: Poisson processes. The base rate ``lambda = 1 / E[min_t]`` is the
  reciprocal of the minimum expected completion time over the cluster's configurations.
  ``high = eps * k_max * lambda`` with ``k_max = N * (most GPUs one job can get)``;
  ``low = high / 4``.
- ``mixed``: alternates high and low, starting with high, in blocks of 8 to 12
  submissions (uniform; the paper says "approximately every 10").

eps is a constant (``EPSILON``; ``derive_epsilon`` recomputes it and a test keeps the two
in step), derived so that the peak rate matches the real-life figure the paper cites
(about 135 submissions per hour in a system of a few thousand GPUs), so other scenarios
and profiles change the rates through lambda and k_max, as in the paper. The derivation
and the offered loads it gives: docs/design/simulator.md, "Generated traces".

Workloads (``workloads``): by default the applications of ``profiles/apps.toml``; ``zeus``
takes the six Zeus NSDI '23 workloads of ``profiles/workloads/zeus.toml`` instead, on
nodes of the GPU types Zeus measured (``ZEUS_SCENARIOS``: V100 and P100), with the power
limits of ``profiles/power_limits.toml`` on every node and each job's measured levels,
so the policies choose power limits too. The draws are the same, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from andreas.errors import InputError
from andreas.model import CatalogEntry, Job, Node, Params, Trace
from andreas.profiles import Profiles, load_profiles

ARRIVALS = ("exponential", "high", "low", "mixed")
SCENARIOS: Mapping[int, Mapping[str, int]] = {1: {"V100": 2, "T4": 1}, 2: {"V100": 4, "T4": 2}}
ZEUS_SCENARIOS: Mapping[int, Mapping[str, int]] = {1: {"V100": 2, "P100": 1},
                                                   2: {"V100": 4, "P100": 2}}
WORKLOADS = ("default", "zeus")
EXPONENTIAL_MEAN_S = 75_000.0          # mean inter-arrival * N (path-relinking §4.1)
PEAK_SUBMISSIONS_PER_HOUR = 135.0      # DL2's production cluster, via path-relinking §4.1
REFERENCE_KMAX = 3_000                 # "a few thousand GPUs"
EPSILON = 0.379                        # = derive_epsilon() for the default profiles
LOW_DIVISOR = 4.0
MIXED_BLOCK = (8, 12)                  # submissions per mixed phase, both ends included
DUE_FACTOR = (1.0, 3.0)
WEIGHT_RANGE = (0.003, 0.015)
CLOUD_MU = 1.0                         # path-relinking-2022 section 4.1
MAX_MU = 1e6
CLOUD_CATALOG = (                      # path-relinking-2022, Table 2 ($/h)
    CatalogEntry(name="NC6", gpu_type="K80", gpus=1, cost_per_hour=0.56),
    CatalogEntry(name="NC12", gpu_type="K80", gpus=2, cost_per_hour=1.13),
    CatalogEntry(name="NC24", gpu_type="K80", gpus=4, cost_per_hour=2.25),
    CatalogEntry(name="NV6", gpu_type="M60", gpus=1, cost_per_hour=0.62),
    CatalogEntry(name="NV12", gpu_type="M60", gpus=2, cost_per_hour=1.24),
    CatalogEntry(name="NV24", gpu_type="M60", gpus=4, cost_per_hour=2.48),
    CatalogEntry(name="NC48*", gpu_type="K80", gpus=8, cost_per_hour=4.48),
    CatalogEntry(name="NV48*", gpu_type="M60", gpus=8, cost_per_hour=4.96),
)


def generate_trace(*, n_nodes: int, scenario: int = 1, arrival: str = "exponential",
                   seed: int, cloud: bool = False, jobs_per_node: int = 10,
                   profiles: Profiles | None = None, mu: float | None = None,
                   workloads: str = "default") -> Trace:
    """A whole workload; the same arguments (and profiles) always give the same trace.

    ``mu``, the idle-GPU penalty of P1a, defaults to the paper's 1 in the cloud (its
    section 4.1) and to 0 on premise (ANDREAS eq. 1 has no such term). ``workloads``:
    see the module docstring.
    """
    _check(n_nodes, scenario, arrival, jobs_per_node)
    prof = profiles or load_profiles()
    if workloads not in WORKLOADS:
        raise InputError(f"generate: workloads must be one of {', '.join(WORKLOADS)}, "
                         f"got {workloads!r}")
    zeus = workloads == "zeus"
    if zeus:
        if cloud:
            raise InputError("generate: workloads zeus is on premise only (a VM's price does "
                             "not follow its GPUs' power limits)")
        prof = prof.workload("zeus")
    nodes, catalog, hardware = cluster(n_nodes, scenario, cloud, prof,
                                       ZEUS_SCENARIOS if zeus else SCENARIOS)
    apps = [a for a in prof.apps.values() if any(t in a.epoch_s for t in hardware)]
    if not apps:
        raise InputError(f"{prof.path / 'apps.toml'}: no application runs on "
                         f"{', '.join(sorted(hardware))}")
    rng = np.random.default_rng(seed)
    n_jobs = n_nodes * jobs_per_node
    high, low = arrival_rates(n_nodes, hardware, prof)
    gaps = inter_arrivals(rng, n_jobs, arrival, n_nodes, high, low)
    submits = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
    choice = rng.integers(len(apps), size=n_jobs)
    lo = np.array([apps[c].epochs[0] for c in choice])
    hi = np.array([apps[c].epochs[1] for c in choice])
    epochs = rng.integers(lo, hi + 1)
    due_factor = rng.uniform(*DUE_FACTOR, size=n_jobs)
    weights = rng.uniform(*WEIGHT_RANGE, size=n_jobs)
    times = {a.name: _times(prof, a.name, hardware) for a in apps}
    width = max(5, len(str(n_jobs)))
    jobs = []
    for i in range(n_jobs):
        app = apps[int(choice[i])].name
        submit = round(float(submits[i]), 3)
        min_t = int(epochs[i]) * min(min(t) for t in times[app].values())
        due = min(max(round(submit + float(due_factor[i]) * min_t, 3), submit + min_t),
                  submit + 3 * min_t)
        jobs.append(Job(id=f"j{i + 1:0{width}d}", app=app, submit_s=submit, due_s=due,
                        weight=round(float(weights[i]), 6), epochs=int(epochs[i]),
                        epoch_time_s=times[app], power_levels={
                            t: v for t, v in prof.apps[app].power.items() if t in hardware}))
    where = "cloud" if cloud else f"{'zeus-' if zeus else ''}sc{scenario}"
    extra = "" if jobs_per_node == 10 else f"-jpn{jobs_per_node}"
    if mu is None:
        mu = CLOUD_MU if cloud else 0.0
    if not (isinstance(mu, (int, float)) and math.isfinite(mu) and 0 <= mu <= MAX_MU):
        raise InputError(f"generate: mu must be a number in [0, {MAX_MU:g}], got {mu!r}")
    return Trace(name=f"{arrival}-n{n_nodes}-{where}{extra}-s{seed}", nodes=nodes,
                 jobs=tuple(jobs), catalog=catalog, params=Params(mu=mu))


def cluster(n_nodes: int, scenario: int, cloud: bool, profiles: Profiles,
            scenarios: Mapping[int, Mapping[str, int]] = SCENARIOS
            ) -> tuple[tuple[Node, ...], tuple[CatalogEntry, ...], dict[str, int]]:
    """Nodes, catalog, and GPU type -> the most GPUs one job can get of that type; the
    nodes of ``ZEUS_SCENARIOS`` carry their GPU type's power limits."""
    width = max(3, len(str(n_nodes)))
    names = [f"n{i + 1:0{width}d}" for i in range(n_nodes)]
    if cloud:
        hardware: dict[str, int] = {}
        for entry in CLOUD_CATALOG:
            hardware[entry.gpu_type] = max(hardware.get(entry.gpu_type, 0), entry.gpus)
        return tuple(Node(name=n) for n in names), CLOUD_CATALOG, hardware
    layout = list(scenarios[scenario].items())
    limits = scenarios is ZEUS_SCENARIOS
    nodes = []
    for i, name in enumerate(names):
        gpu_type, gpus = layout[i % len(layout)]
        nodes.append(Node(name=name, gpu_type=gpu_type, gpus=gpus,
                          power_w=profiles.node_power_w(gpu_type, gpus),
                          power_limits=profiles.node_limits(gpu_type) if limits else None))
    hardware = {}
    for node in nodes:
        hardware[node.gpu_type or ""] = max(hardware.get(node.gpu_type or "", 0), node.gpus)
    return tuple(nodes), (), hardware


def _times(profiles: Profiles, app: str, hardware: Mapping[str, int]
           ) -> dict[str, tuple[float, ...]]:
    spec = profiles.apps[app]
    return {t: profiles.epoch_times(app, t, g) for t, g in hardware.items() if t in spec.epoch_s}


def mean_min_completion_s(profiles: Profiles, hardware: Mapping[str, int]) -> float:
    """E[min_t]: mean over applications (uniform) and epochs of the fastest completion time."""
    values = []
    for app in profiles.apps.values():
        times = _times(profiles, app.name, hardware)
        if times:
            values.append((app.epochs[0] + app.epochs[1]) / 2 * min(min(t) for t in times.values()))
    return float(np.mean(values))


def derive_epsilon(profiles: Profiles | None = None) -> float:
    """eps such that k_max = REFERENCE_KMAX gets PEAK_SUBMISSIONS_PER_HOUR (scenario 1)."""
    hardware = dict(SCENARIOS[1])
    e_min = mean_min_completion_s(profiles or load_profiles(), hardware)
    return PEAK_SUBMISSIONS_PER_HOUR / 3600.0 * e_min / REFERENCE_KMAX


def arrival_rates(n_nodes: int, hardware: Mapping[str, int], profiles: Profiles
                  ) -> tuple[float, float]:
    """(high, low) submissions per second: eps * k_max * lambda and a quarter of it."""
    k_max = n_nodes * max(hardware.values())
    high = EPSILON * k_max / mean_min_completion_s(profiles, hardware)
    return high, high / LOW_DIVISOR


def mixed_phases(rng: np.random.Generator, n: int) -> np.ndarray:
    """True where a submission belongs to a high-rate block; blocks of 8..12, high first."""
    phases = np.empty(n, dtype=bool)
    i, high = 0, True
    while i < n:
        block = int(rng.integers(MIXED_BLOCK[0], MIXED_BLOCK[1] + 1))
        phases[i:i + block] = high
        i, high = i + block, not high
    return phases


def inter_arrivals(rng: np.random.Generator, n: int, arrival: str, n_nodes: int,
                   high: float, low: float) -> np.ndarray:
    """n gaps in seconds; gap i separates submission i from submission i + 1."""
    if arrival == "exponential":
        return rng.exponential(EXPONENTIAL_MEAN_S / n_nodes, size=n)
    if arrival == "high":
        return rng.exponential(1.0 / high, size=n)
    if arrival == "low":
        return rng.exponential(1.0 / low, size=n)
    phases = mixed_phases(rng, n)
    return rng.exponential(1.0, size=n) / np.where(phases, high, low)


# A trace of 10**6 nodes or 10**6 jobs per node would take minutes and gigabytes to write
# and could never be simulated; the papers use up to 100 nodes and 10 jobs per node.
MAX_NODES = 10_000
MAX_JOBS_PER_NODE = 1_000


def _check(n_nodes: int, scenario: int, arrival: str, jobs_per_node: int) -> None:
    if (isinstance(n_nodes, bool) or not isinstance(n_nodes, int)
            or not 1 <= n_nodes <= MAX_NODES):
        raise InputError(f"generate: nodes must be an integer 1-{MAX_NODES}, got {n_nodes!r}")
    if scenario not in SCENARIOS:
        raise InputError(f"generate: scenario must be one of {', '.join(map(str, SCENARIOS))}, "
                         f"got {scenario!r}")
    if arrival not in ARRIVALS:
        raise InputError(f"generate: arrival must be one of {', '.join(ARRIVALS)}, "
                         f"got {arrival!r}")
    if (isinstance(jobs_per_node, bool) or not isinstance(jobs_per_node, int)
            or not 1 <= jobs_per_node <= MAX_JOBS_PER_NODE):
        raise InputError(f"generate: jobs per node must be an integer 1-{MAX_JOBS_PER_NODE}, "
                         f"got {jobs_per_node!r}")
