"""Import Alibaba's production GPU trace ("openb", cluster-trace-gpu-v2023) as an andreas trace.

Source: github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2023/csv`` (CC BY 4.0), published
with Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23. The files are read by
:mod:`andreas.formats.alibaba_csv` (every published pod list, with or without time
columns); the submissions are spaced by :mod:`andreas.simulator.alibaba_load` (offered load,
busy share, the file's own times, or, without times, file order at a rate). Nothing is
written; the rules in full are docs/FORMAT.md, "Alibaba GPU trace".

Pods kept: ``num_gpu >= 1``, scheduled (not ``Pending``, ``scheduled_time`` set) and with
a run time ``deletion_time - scheduled_time > 0`` (a ``Running`` pod without a deletion
time runs until the latest time in the file); a list without times keeps every GPU pod,
each running ``duration_s``. Dropped pods are counted by reason (CPU-only, pending, no run
time, ended before ``since``, no kept node of its types or none it fits, not sampled).
``since`` T replays from T on: a pod created before T is submitted at T with the run time
it had left (the default list's first 24 pods are months-long survivors).

A kept pod becomes a rigid job (``Job.demand``): submit = (creation - first) x the time
scale; ``epochs = ceil(duration / epoch_s)`` on every GPU type it accepts that has a kept
node its demand fits on; ``due = submit + slack x duration``; ``weight`` by QoS
(Guaranteed 4, LS 2, Burstable 1, BE 0.5 times ``WEIGHT_UNIT``, so LS gets the ANDREAS
papers' mean 0.009/s); ``num_gpu`` whole GPUs or slices of ``gpu_milli``, its CPU and
memory; synthetic seeded GPU memory <gamma, delta, p> for slices (gamma ~ 0.7, delta ~
0.3 of alpha x the smallest memory of its types, p ~ U(0, 0.3)), drawn per pod before any
sampling. Nodes: the GPU nodes with their capacities, per-GPU memory from ``GPU_MODELS``
and power from the profiles' node model (``EXTRA_GPU_POWER`` for P100 and A10, the V100
for the undisclosed types). ``max_nodes`` keeps nodes stratified by GPU type, ``sample``
keeps pods uniformly (seeded).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from andreas.errors import InputError
from andreas.formats.alibaba_csv import (  # noqa: F401 (names tests and callers import)
    DEFAULT_QOS, GPU_MODELS, MAX_TIME, NODE_COLUMNS, PHASES, POD_COLUMNS, QOS_WEIGHT, GpuModel,
    NodeRow, Pod, read_nodes, read_pod_list)
from andreas.formats.snapshot import show
from andreas.model import GPU_MILLI, Demand, Job, Node, Trace

DEFAULT_DURATION_S = 3600.0   # a pod list without times: every task's run time
WEIGHT_UNIT = 0.0045          # LS (2 units) = 0.009 per second, the papers' mean weight
DEFAULT_EPOCH_S = 600.0
DEFAULT_SLACK = 2.0
GAMMA_RANGE = (0.6, 0.8)      # basic GPU memory of a slice, as a share of alpha * M
DELTA_RANGE = (0.2, 0.4)      # its variable (peak) part
PEAK_PROBABILITY_MAX = 0.3    # p ~ U(0, 0.3)

# Why a pod is not a job of the imported trace (summary keys, in the order they apply).
DROP_CPU_ONLY = "cpu-only"
DROP_PENDING = "pending"
DROP_NO_RUN = "no run time"
DROP_BEFORE_SINCE = "ended before --since"
DROP_NO_TYPE = "no kept node of its gpu_spec"
DROP_TOO_BIG = "fits no kept node"
DROP_NOT_SAMPLED = "not sampled"


# GPU power profiles the repository's profiles/gpus.toml lacks, TDP-based like its entries.
EXTRA_GPU_POWER = {
    "P100": (30.0, 250.0, {
        "idle_w": "Estimate, not a datasheet value: 12 % of the TDP, the share of the V100 "
                  "profile (35 W of 250 W); public idle readings of P100 PCIe boards at P0 "
                  "are of this order.",
        "busy_w": "NVIDIA Tesla P100 PCIe product brief PB-08248: 250 W maximum power (TDP), "
                  "taken as the draw of a GPU busy training."}),
    "A10": (20.0, 150.0, {
        "idle_w": "Estimate, not a datasheet value: about 13 % of the TDP, the share of the "
                  "V100 and P100 profiles.",
        "busy_w": "NVIDIA A10 datasheet: 150 W maximum power (TDP), taken as the draw of a "
                  "GPU busy training."}),
}

# --------------------------------------------------------------------------- records

@dataclass(frozen=True, kw_only=True)
class ImportReport:
    """What the import kept, dropped and derived (the summary ``trace import-alibaba`` prints)."""

    pods: int
    jobs: int
    dropped: dict[str, int]
    phases: dict[str, int]
    slices: int
    nodes_read: int
    cpu_nodes_skipped: int
    nodes: int
    gpus: int
    nodes_by_type: dict[str, int]
    time_scale: float
    load_full: float | None
    load: float | None
    offered: float | None
    span_s: float
    notes: tuple[str, ...] = ()
    timed: bool = True                 # the pod list has creation/deletion/scheduled times
    spacing: str = ""                  # how the submissions were spaced, in words

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------- rules

def node_power_w(model: str, gpus: int) -> tuple[float, ...]:
    """Whole-node watts with 0..gpus GPUs busy: the profiles' model with the model's profile."""
    return _power_profiles().node_power_w(GPU_MODELS[model].power, gpus)


@functools.cache
def _power_profiles():
    from andreas.profiles import PowerProfile, load_profiles

    base = load_profiles()
    extra = {name: PowerProfile(name=name, idle_w=idle, busy_w=busy, sources=src,
                                description=f"{name} (andreas.simulator.alibaba)")
             for name, (idle, busy, src) in EXTRA_GPU_POWER.items() if name not in base.gpus}
    return dataclasses.replace(base, gpus=MappingProxyType({**base.gpus, **extra}))


def stratified_nodes(nodes: Sequence[NodeRow], k: int | None, rng) -> list[NodeRow]:
    """K nodes with each GPU type's share of K (largest remainder), drawn uniformly per type."""
    if k is None or k >= len(nodes):
        return list(nodes)
    by_type: dict[str, list[NodeRow]] = {}
    for n in nodes:
        by_type.setdefault(n.model, []).append(n)
    total = len(nodes)
    quota = {t: k * len(v) // total for t, v in by_type.items()}
    order = sorted(by_type, key=lambda t: (-(k * len(by_type[t]) % total), -len(by_type[t]), t))
    for t in order[: k - sum(quota.values())]:
        quota[t] += 1
    kept: list[NodeRow] = []
    for t in sorted(by_type):
        group = by_type[t]
        picks = rng.choice(len(group), size=quota[t], replace=False) if quota[t] else []
        kept += [group[i] for i in sorted(int(i) for i in picks)]
    return sorted(kept, key=lambda n: n.row)


def _drop_reason(pod: Pod) -> str | None:
    if pod.num_gpu == 0:
        return DROP_CPU_ONLY
    if pod.phase == "Pending" or pod.scheduled is None:
        return DROP_PENDING
    return None


def _open_window(eligible: Sequence[tuple[Pod, int]], since: float,
                 dropped: Counter) -> list[tuple[Pod, int]]:
    """Replay from ``since`` on: a pod created before it is submitted at ``since`` with the
    run time it had left then; one that had ended by then is dropped."""
    out: list[tuple[Pod, int]] = []
    start = math.ceil(since)
    for pod, duration in eligible:
        if pod.creation >= start:
            out.append((pod, duration))
            continue
        assert pod.scheduled is not None
        left = pod.scheduled + duration - max(pod.scheduled, start)
        if left <= 0:
            dropped[DROP_BEFORE_SINCE] += 1
            continue
        out.append((dataclasses.replace(pod, creation=start,
                                        scheduled=max(pod.scheduled, start)), left))
    return out


def held_gpus(pod: Pod) -> float:
    """GPUs the pod holds: whole GPUs, or slices as a share of one GPU each."""
    return pod.num_gpu * (pod.gpu_milli / GPU_MILLI if pod.gpu_milli < GPU_MILLI else 1.0)


def _fitting_types(pod: Pod, shapes: Sequence[tuple[str, int, int, int]]
                   ) -> tuple[set[str], set[str]]:
    """(types of kept nodes the pod accepts, those with a node the whole demand fits on);
    ``shapes``: the distinct (model, gpus, cpu_milli, memory_mib) of the kept nodes."""
    accepted = set(pod.gpu_spec) if pod.gpu_spec else set(GPU_MODELS)
    present = {m for m, _, _, _ in shapes if m in accepted}
    fits = {m for m, g, cpu, mem in shapes if m in accepted and g >= pod.num_gpu
            and cpu >= pod.cpu_milli and mem >= pod.memory_mib}
    return present, fits


def _check_options(sample: int | None, seed: int, max_nodes: int | None, slack: float,
                   epoch_s: float, duration_s: float) -> None:
    def bad(name: str, problem: str, value: Any) -> InputError:
        return InputError(f"{name}: {problem}, got {show(value)}", field=name)

    for name, count in (("sample", sample), ("max_nodes", max_nodes)):
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 1):
            raise bad(name, "must be an integer >= 1", count)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise bad("seed", "must be an integer >= 0", seed)
    for name, value, top in (("slack", slack, 1e6), ("epoch_s", epoch_s, 1e9),
                             ("duration_s", duration_s, MAX_TIME)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise bad(name, "must be a number > 0", value)
        if value > top:
            raise bad(name, f"must be <= {top:g}", value)


# --------------------------------------------------------------------------- import

def import_alibaba(pods_path: str | Path, nodes_path: str | Path, *, sample: int | None = None,
                   seed: int = 0, max_nodes: int | None = None, slack: float = DEFAULT_SLACK,
                   epoch_s: float = DEFAULT_EPOCH_S, load: float | None = None,
                   busy_share: float | str | None = None, keep_times: bool = False,
                   arrival_rate_per_h: float | None = None,
                   duration_s: float = DEFAULT_DURATION_S, since: float = 0.0,
                   name: str | None = None) -> tuple[Trace, ImportReport]:
    """Read both files and build the trace by the module docstring's rules; writes nothing.
    The submissions are spaced by one of ``load`` (offered, default 1), ``busy_share``,
    ``keep_times`` or ``arrival_rate_per_h`` (``andreas.simulator.alibaba_load``)."""
    import numpy as np

    from andreas.simulator import alibaba_load as spacing_rules

    _check_options(sample, seed, max_nodes, slack, epoch_s, duration_s)
    if isinstance(since, bool) or not isinstance(since, (int, float)) \
            or not 0 <= since <= MAX_TIME:
        raise InputError(f"since: must be a time >= 0 (seconds of the trace), got "
                         f"{show(since)}", field="since")
    pods, timed = read_pod_list(pods_path)
    spacing = spacing_rules.Spacing(load=load, busy_share=busy_share, keep_times=keep_times,
                                    arrival_rate_per_h=arrival_rate_per_h).check(timed)
    if since and not timed:
        raise InputError(f"since: the pod list {pods_path} has no time columns", field="since")
    all_nodes, cpu_only = read_nodes(nodes_path)
    eligible, dropped = _eligible(pods, timed, duration_s, pods_path)
    draws = _memory_draws(eligible, seed)
    if since:
        eligible = _open_window(eligible, since, dropped)
        if not eligible:
            raise InputError(f"since: every GPU pod ended by {since:g}", field="since")

    nodes = stratified_nodes(all_nodes, max_nodes, np.random.default_rng([seed, 0]))
    fitting, notes = _sampled(_fitting(eligible, nodes, dropped, pods_path), sample, seed,
                              dropped)
    notes += _notes(pods_path, max_nodes, len(all_nodes), timed, duration_s)

    gpus = sum(n.gpus for n in nodes)
    trace_nodes = _trace_nodes(nodes)
    stem = Path(pods_path).stem
    title = name or f"alibaba-{stem}-n{len(nodes)}-j{len(fitting)}-s{seed}"

    def build(scale: float) -> Trace:
        return Trace(name=title, nodes=trace_nodes,
                     jobs=_jobs(fitting, scale, slack, epoch_s, draws))

    window = spacing_rules.BusyWindow([(p, d) for p, d, _ in fitting], gpus)
    load_full = (spacing_rules.BusyWindow(eligible, sum(n.gpus for n in all_nodes)).share(1.0)
                 if timed else None)
    scale = spacing_rules.time_scale(spacing, window, load_full,
                                     _offered(build(1.0)) if spacing.load else None,
                                     what=str(pods_path))
    trace = build(scale)
    new_span = max(j.submit_s for j in trace.jobs) - min(j.submit_s for j in trace.jobs)
    offered = _offered(trace) if new_span > 0 else None
    how, more = spacing_rules.describe(spacing, timed, scale, offered, duration_s)
    report = ImportReport(
        pods=len(pods), jobs=len(trace.jobs), dropped=_dropped_in_order(dropped),
        phases=dict(sorted(Counter(p.phase or "(no phase column)"
                                   for p, _, _ in fitting).items())),
        slices=sum(1 for p, _, _ in fitting if p.gpu_milli < GPU_MILLI),
        nodes_read=len(all_nodes) + cpu_only, cpu_nodes_skipped=cpu_only, nodes=len(nodes),
        gpus=gpus, nodes_by_type=dict(sorted(Counter(n.model for n in nodes).items())),
        time_scale=scale, load_full=load_full, load=window.share(scale),
        offered=offered, span_s=new_span, notes=tuple(notes) + more, timed=timed,
        spacing=how)
    return trace, report


def _trace_nodes(nodes: Sequence[NodeRow]) -> tuple[Node, ...]:
    """The kept nodes as the trace's nodes, with their power and GPU memory."""
    return tuple(Node(name=n.name, gpu_type=n.model, gpus=n.gpus,
                      power_w=node_power_w(n.model, n.gpus), cpu_milli=n.cpu_milli,
                      memory_mib=n.memory_mib, gpu_memory_mib=GPU_MODELS[n.model].memory_mib)
                 for n in nodes)


def _memory_draws(eligible: Sequence[tuple[Pod, int]], seed: int
                  ) -> dict[str, tuple[float, float, float]]:
    """Per-pod GPU memory draws (gamma, delta, peak probability). They come first, in file
    order, so they do not depend on which nodes and pods the sampling keeps."""
    import numpy as np

    mem_rng = np.random.default_rng([seed, 2])
    return {pod.name: (float(a), float(b), float(c)) for (pod, _), a, b, c in zip(
        eligible, mem_rng.uniform(*GAMMA_RANGE, len(eligible)),
        mem_rng.uniform(*DELTA_RANGE, len(eligible)),
        mem_rng.uniform(0.0, PEAK_PROBABILITY_MAX, len(eligible)))}


def _fitting(eligible: Sequence[tuple[Pod, int]], nodes: Sequence[NodeRow], dropped: Counter,
             pods_path: str | Path) -> list[tuple[Pod, int, set[str]]]:
    """(pod, run time, the GPU types it fits) of the pods some kept node can hold; the
    others are counted in ``dropped``."""
    shapes = sorted({(n.model, n.gpus, n.cpu_milli, n.memory_mib) for n in nodes})
    fitting: list[tuple[Pod, int, set[str]]] = []
    for pod, duration in eligible:
        present, fits = _fitting_types(pod, shapes)
        if not fits:
            dropped[DROP_NO_TYPE if not present else DROP_TOO_BIG] += 1
            continue
        fitting.append((pod, duration, fits))
    if not fitting:
        raise InputError(f"{pods_path}: no pod fits a kept node (--max-nodes too small?)")
    return fitting


def _sampled(fitting: list[tuple[Pod, int, set[str]]], sample: int | None, seed: int,
             dropped: Counter) -> tuple[list[tuple[Pod, int, set[str]]], list[str]]:
    """``sample`` of the fitting pods, in file order (all of them without ``sample``), and
    the notes for the summary."""
    import numpy as np

    notes: list[str] = []
    if sample is not None and sample < len(fitting):
        picks = np.random.default_rng([seed, 1]).choice(len(fitting), size=sample,
                                                         replace=False)
        chosen = set(int(i) for i in picks)
        dropped[DROP_NOT_SAMPLED] += len(fitting) - sample
        fitting = [f for i, f in enumerate(fitting) if i in chosen]
    elif sample is not None and sample > len(fitting):
        notes.append(f"--sample {sample} > {len(fitting)} pods that fit: kept them all")
    return fitting, notes


def _notes(pods_path: str | Path, max_nodes: int | None, gpu_nodes: int, timed: bool,
           duration_s: float) -> list[str]:
    """The summary's notes on what the options could not do and what the file lacks."""
    notes = []
    if max_nodes is not None and max_nodes > gpu_nodes:
        notes.append(f"--max-nodes {max_nodes} > {gpu_nodes} GPU nodes: kept them all")
    if not timed:
        notes.append(f"{Path(pods_path).name} has no time, qos or phase columns: every task "
                     f"runs {duration_s:g} s (--duration-s), weighs as {DEFAULT_QOS} and "
                     "counts as scheduled")
    return notes


def _dropped_in_order(dropped: Counter) -> dict[str, int]:
    """The pods dropped, by reason in the order the reasons apply (reasons with none left
    out)."""
    return {k: dropped[k] for k in (DROP_CPU_ONLY, DROP_PENDING, DROP_NO_RUN,
                                    DROP_BEFORE_SINCE, DROP_NO_TYPE, DROP_TOO_BIG,
                                    DROP_NOT_SAMPLED)
            if dropped[k]}


def _eligible(pods: Sequence[Pod], timed: bool, duration_s: float, pods_path: str | Path
              ) -> tuple[list[tuple[Pod, int]], Counter]:
    """(pod, run time) of the GPU pods that ran, and the others counted by reason."""
    dropped: Counter = Counter()
    eligible: list[tuple[Pod, int]] = []
    end = max(t for p in pods for t in (p.creation, p.deletion, p.scheduled) if t is not None)
    for pod in pods:
        reason = DROP_CPU_ONLY if pod.num_gpu == 0 else None
        if reason is None and not timed:
            eligible.append((pod, max(1, round(duration_s))))
            continue
        reason = reason or _drop_reason(pod)
        if reason is None:
            assert pod.scheduled is not None
            deletion = pod.deletion
            if deletion is None and pod.phase == "Running":
                deletion = end
            duration = (deletion - pod.scheduled) if deletion is not None else 0
            if duration <= 0:
                reason = DROP_NO_RUN
            else:
                eligible.append((pod, duration))
        if reason is not None:
            dropped[reason] += 1
    if not eligible:
        raise InputError(f"{pods_path}: no pod asks for a GPU and ran (all are CPU-only, "
                         f"pending or without run time)")
    return eligible, dropped


def _jobs(fitting: Sequence[tuple[Pod, int, set[str]]], scale: float, slack: float,
          epoch_s: float, draws: dict[str, tuple[float, float, float]]) -> tuple[Job, ...]:
    """The kept pods as jobs, submissions ``scale`` times the file's (from the first)."""
    first = min(p.creation for p, _, _ in fitting)
    jobs = []
    for pod, duration, types in fitting:
        epochs = max(1, math.ceil(duration / epoch_s))
        epoch_time = round(duration / epochs, 3)
        submit = round((pod.creation - first) * scale, 3)
        jobs.append(Job(id=pod.name, app=_app(pod), submit_s=submit,
                        due_s=round(submit + slack * duration, 3),
                        weight=round(QOS_WEIGHT[pod.qos] * WEIGHT_UNIT, 6), epochs=epochs,
                        epoch_time_s={t: (epoch_time,) * pod.num_gpu for t in sorted(types)},
                        demand=_demand(pod, types, draws[pod.name])))
    jobs.sort(key=lambda j: j.submit_s)
    return tuple(jobs)


def _offered(trace: Trace) -> float | None:
    """``trace show``'s load estimate: all GPU-seconds asked over (GPUs x submission span)."""
    from andreas.formats.trace import summary

    return summary(trace)["load"]


def _app(pod: Pod) -> str:
    """A label for ``trace show``'s table: GPU-sharing slices or whole GPUs by count."""
    return "openb-share" if pod.gpu_milli < GPU_MILLI else f"openb-{pod.num_gpu}gpu"


def _demand(pod: Pod, types: set[str], draw: tuple[float, float, float]) -> Demand:
    if pod.gpu_milli >= GPU_MILLI:
        return Demand(gpus=pod.num_gpu, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib)
    alpha = pod.gpu_milli / GPU_MILLI
    memory = min(GPU_MODELS[t].memory_mib for t in types)
    u_gamma, u_delta, p = draw
    gamma = max(1, round(alpha * memory * u_gamma))
    delta = min(round(alpha * memory * u_delta), memory - gamma)
    return Demand(gpus=pod.num_gpu, gpu_milli=pod.gpu_milli, cpu_milli=pod.cpu_milli,
                  memory_mib=pod.memory_mib, gpu_memory_mib=gamma,
                  gpu_memory_peak_mib=max(delta, 0),
                  peak_probability=round(p, 4) if delta > 0 else 0.0)
