"""Import Alibaba's production GPU trace ("openb", cluster-trace-gpu-v2023) as an andreas trace.

Source: github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2023/csv`` (CC BY 4.0), published
with Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23. Two CSV files are read, strictly, with the
csv module: a pod list (``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time``) and a node list (``sn,
cpu_milli, memory_mib, gpu, model``). A bad row is one ``InputError`` line
``FILE: row R: field 'x' must be ..., got ...`` (R is the line in the file, the header is
row 1); nothing is written. The trace has no epochs, due dates, weights, power or GPU
memory: they are derived by the rules below (docs/FORMAT.md, "Alibaba GPU trace").

Pods kept: ``num_gpu >= 1``, scheduled (``pod_phase`` is not ``Pending`` and
``scheduled_time`` is set) and with a run time ``duration = deletion_time -
scheduled_time > 0``. ``Succeeded``, ``Failed`` and ``Running`` pods are kept alike: a
failed pod held its GPUs as long as the file says, and a pod still ``Running`` when the
trace was taken has its ``deletion_time`` set to when it was last seen (at most the trace
end; a ``Running`` pod without one runs until the latest time in the file). Dropped, and
counted by reason: CPU-only pods, pending pods, pods without run time, pods that ended
before ``since``, pods whose demand fits no kept node (or whose ``gpu_spec`` names no kept
GPU type), and pods left out by ``sample``.

The pods created before about 9.9e6 s of ``openb_pod_list_default.csv`` (24 of them) are
long-running survivors of an earlier period: after them arrivals are steady. ``since`` T
replays the window from T on: a pod created before T is submitted at T with the run time
it had left then (``deletion_time - max(scheduled_time, T)``), one that had ended is
dropped; the memory draws are made before, so they do not change.

A kept pod becomes a rigid job (``Job.demand``):

- ``submit_s = (creation_time - first creation_time) * time_scale`` (see below); the
  queueing the pod saw in Alibaba's cluster is not replayed, ``duration`` is its solo run
  time, the same on every GPU type (the trace does not say how fast each type is).
- ``epochs = ceil(duration / epoch_s)`` (``epoch_s`` = 600 by default), each epoch taking
  ``duration / epochs`` seconds, on every GPU type the pod accepts (``gpu_spec``, empty =
  any) that has a kept node the whole demand fits on.
- ``due_s = submit_s + slack * duration`` (``slack`` = 2 by default).
- ``weight`` (tardiness cost per second late) by QoS: Guaranteed 4, LS 2, Burstable 1,
  BE 0.5 times ``WEIGHT_UNIT`` = 0.0045, so that LS, the most common class, gets 0.009 per
  second, the mean of the ANDREAS papers' U[0.003, 0.015].
- demand: ``num_gpu`` whole GPUs, or, when ``gpu_milli < 1000``, ``num_gpu`` slices of
  ``gpu_milli`` each (the compute share alpha = gpu_milli / 1000); ``cpu_milli`` and
  ``memory_mib`` as in the pod.
- GPU memory <gamma, delta, p> (the trace has none; synthetic and seeded, drawn per pod
  independently of ``--sample`` and ``--max-nodes``): for a slice, with M the smallest
  GPU memory of the GPU types the job may run on, gamma = round(alpha * M * U(0.6, 0.8)),
  delta = round(alpha * M * U(0.2, 0.4)) (so gamma ~ 0.7 alpha M and delta ~ 0.3 alpha M;
  gamma + delta is capped at M so a slice alone always fits) and p ~ U(0, 0.3). A whole
  GPU is the job's alone, so it asks for no GPU memory (0: it never binds).

Nodes: GPU nodes of the node list (CPU-only ones are skipped), keeping their names, GPU
type (``model``), GPU count, ``cpu_milli`` and ``memory_mib``; per-GPU memory from
``GPU_MODELS`` (P100, T4, V100M16 16 GiB, V100M32 32 GiB, A10 24 GiB; the undisclosed G1,
G2, G3 are assumed 32 GiB); ``power_w`` from the profiles' node power model
(``andreas/profiles.py``) with each model's power profile: V100M16/V100M32 the V100, T4
the T4, P100 and A10 the TDP-based entries of ``EXTRA_GPU_POWER``, the undisclosed types
the V100 (an assumption: a data-centre training GPU of the same class).

Sampling (seeded, numpy): ``max_nodes`` K keeps K GPU nodes stratified by GPU type (each
type gets its share of K by largest remainder, its nodes drawn uniformly), so the type mix
stays; ``sample`` N keeps N of the pods that fit a kept node, uniformly.

Time scale: the GPU load of a trace is the mean share of its GPUs busy between the first
and the last submission if every task ran when submitted (a slice holding gpu_milli / 1000
of a GPU; the part of a task's run after the last submission does not count, so the
months-long pods of the trace do not swamp a short window). By default the submissions
are stretched (or compressed) by ``time_scale`` so that the imported trace's load equals
the full trace's (all pods kept by the rules above on all GPU nodes of the file): keeping
fewer nodes, or more of the work per node, keeps the load per GPU. With ``load`` set, the
scale gives that load instead. The load never rises as the scale grows, so the scale is
found by bisection; a load the tasks cannot reach even all submitted at once is an error.
Without spread in submission times the scale is 1.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from andreas.errors import InputError
from andreas.infra.fileio import open_capped
from andreas.formats.snapshot import MAX_CAPACITY, MAX_GPUS_PER_JOB, show
from andreas.model import GPU_MILLI, Demand, Job, Node, Trace

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
PHASES = ("Running", "Succeeded", "Failed", "Pending")
QOS_WEIGHT = MappingProxyType({"Guaranteed": 4.0, "LS": 2.0, "Burstable": 1.0, "BE": 0.5})
WEIGHT_UNIT = 0.0045          # LS (2 units) = 0.009 per second, the papers' mean weight
DEFAULT_EPOCH_S = 600.0
DEFAULT_SLACK = 2.0
GAMMA_RANGE = (0.6, 0.8)      # basic GPU memory of a slice, as a share of alpha * M
DELTA_RANGE = (0.2, 0.4)      # its variable (peak) part
PEAK_PROBABILITY_MAX = 0.3    # p ~ U(0, 0.3)
MAX_TIME = 2**53
# The published lists are 40-600 KiB; a file this big would take many minutes to import
# (a 50 MB pod list ran past a minute): refused, with the limit named.
MAX_CSV_BYTES = 8 << 20
MAX_LOAD = 100.0

# Why a pod is not a job of the imported trace (summary keys, in the order they apply).
DROP_CPU_ONLY = "cpu-only"
DROP_PENDING = "pending"
DROP_NO_RUN = "no run time"
DROP_BEFORE_SINCE = "ended before --since"
DROP_NO_TYPE = "no kept node of its gpu_spec"
DROP_TOO_BIG = "fits no kept node"
DROP_NOT_SAMPLED = "not sampled"


@dataclass(frozen=True)
class GpuModel:
    """A GPU type of the node list: memory per GPU (MiB) and the power profile it uses."""

    memory_mib: int
    power: str
    note: str


GPU_MODELS = MappingProxyType({
    "P100": GpuModel(16384, "P100", "Tesla P100 16 GB (datasheet)"),
    "T4": GpuModel(16384, "T4", "Tesla T4 16 GB (datasheet)"),
    "V100M16": GpuModel(16384, "V100", "Tesla V100 16 GB (datasheet)"),
    "V100M32": GpuModel(32768, "V100", "Tesla V100 32 GB (datasheet)"),
    "A10": GpuModel(24576, "A10", "NVIDIA A10 24 GB (datasheet)"),
    "G1": GpuModel(32768, "V100", "undisclosed: assumed 32 GiB and V100-class power"),
    "G2": GpuModel(32768, "V100", "undisclosed: assumed 32 GiB and V100-class power"),
    "G3": GpuModel(32768, "V100", "undisclosed: assumed 32 GiB and V100-class power"),
})

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

_INT = re.compile(r"[0-9]+")


# --------------------------------------------------------------------------- records

@dataclass(frozen=True, kw_only=True)
class Pod:
    """One row of the pod list, checked; ``row`` is its line in the file."""

    row: int
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]
    qos: str
    phase: str
    creation: int
    deletion: int | None
    scheduled: int | None


@dataclass(frozen=True, kw_only=True)
class NodeRow:
    """One GPU node of the node list, checked."""

    row: int
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


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

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------- CSV

def _rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) for every data row of ``path``; header and shape checked, one-line errors."""
    f = io.TextIOWrapper(open_capped(path, what="CSV file", limit=MAX_CSV_BYTES),
                         encoding="utf-8-sig", newline="")
    with f:
        reader = csv.reader(f, strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path}: is empty (expected a header: {','.join(columns)})")
            missing = [c for c in columns if c not in header]
            unknown = [c for c in header if c not in columns]
            repeated = sorted({c for c in header if header.count(c) > 1})
            if missing or unknown or repeated:
                what = (f"lacks column {show(missing[0])}" if missing else
                        f"has unknown column {show(unknown[0])}" if unknown else
                        f"repeats column {show(repeated[0])}")
                raise InputError(f"{path}: row 1: header {what} (expected "
                                 f"{','.join(columns)})")
            for raw in reader:
                line = reader.line_num
                if not raw:
                    continue
                if len(raw) != len(header):
                    raise InputError(f"{path}: row {line}: has {len(raw)} fields, the header "
                                     f"has {len(header)}")
                yield line, dict(zip(header, raw))
        except csv.Error as e:
            raise InputError(f"{path}: row {reader.line_num}: not CSV: {e}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


class _Row:
    """Field checks of one CSV row; every error is ``FILE: row R: field 'x' must be ...``."""

    def __init__(self, path: Path, line: int, raw: dict[str, str]) -> None:
        self.path, self.line, self.raw = path, line, raw

    def fail(self, key: str, problem: str) -> InputError:
        return InputError(f"{self.path}: row {self.line}: field '{key}' {problem}, "
                          f"got {show(self.raw[key])}")

    def integer(self, key: str, *, ge: int = 0, le: int = MAX_CAPACITY,
                optional: bool = False) -> int | None:
        text = self.raw[key]
        if optional and text == "":
            return None
        if not _INT.fullmatch(text):
            raise self.fail(key, f"must be an integer >= {ge}" + (" or empty" if optional
                                                                   else ""))
        value = int(text)
        if value < ge:
            raise self.fail(key, f"must be >= {ge}")
        if value > le:
            raise self.fail(key, f"must be <= {le}")
        return value

    def required(self, key: str, *, ge: int = 0, le: int = MAX_CAPACITY) -> int:
        value = self.integer(key, ge=ge, le=le)
        assert value is not None
        return value

    def name(self, key: str, seen: dict[str, int]) -> str:
        """A name no earlier row of the file has (``seen``: name -> row, updated)."""
        text = self.raw[key]
        if not text or not text.isprintable() or any(ch.isspace() for ch in text):
            raise self.fail(key, "must be a non-empty name without spaces")
        if text in seen:
            raise self.fail(key, f"must be unique (row {seen[text]} has it too)")
        seen[text] = self.line
        return text

    def choice(self, key: str, allowed: Sequence[str]) -> str:
        if self.raw[key] not in allowed:
            raise self.fail(key, f"must be one of {', '.join(allowed)}")
        return self.raw[key]


def read_pods(path: str | Path) -> list[Pod]:
    """Every row of a pod list, checked (module docstring); row order kept."""
    path = Path(path)
    pods: list[Pod] = []
    seen: dict[str, int] = {}
    for line, raw in _rows(path, POD_COLUMNS):
        r = _Row(path, line, raw)
        name = r.name("name", seen)
        num_gpu = r.required("num_gpu", le=MAX_GPUS_PER_JOB)
        gpu_milli = r.required("gpu_milli", le=GPU_MILLI)
        if num_gpu >= 1 and gpu_milli < 1:
            raise r.fail("gpu_milli", f"must be 1..{GPU_MILLI} when num_gpu >= 1")
        spec = tuple(dict.fromkeys(raw["gpu_spec"].split("|"))) if raw["gpu_spec"] else ()
        for model in spec:
            if model not in GPU_MODELS:
                raise r.fail("gpu_spec", f"must be empty or GPU types joined by '|' "
                             f"({', '.join(GPU_MODELS)})")
        creation = r.required("creation_time", le=MAX_TIME)
        deletion = r.integer("deletion_time", le=MAX_TIME, optional=True)
        scheduled = r.integer("scheduled_time", le=MAX_TIME, optional=True)
        if scheduled is not None and scheduled < creation:
            raise r.fail("scheduled_time", f"must be >= creation_time ({creation})")
        if deletion is not None and deletion < creation:
            raise r.fail("deletion_time", f"must be >= creation_time ({creation})")
        pods.append(Pod(row=line, name=name, cpu_milli=r.required("cpu_milli"),
                        memory_mib=r.required("memory_mib"), num_gpu=num_gpu,
                        gpu_milli=gpu_milli, gpu_spec=spec,
                        qos=r.choice("qos", tuple(QOS_WEIGHT)),
                        phase=r.choice("pod_phase", PHASES), creation=creation,
                        deletion=deletion, scheduled=scheduled))
    if not pods:
        raise InputError(f"{path}: has no pods (only a header)")
    return pods


def read_nodes(path: str | Path) -> tuple[list[NodeRow], int]:
    """The GPU nodes of a node list, checked, and how many CPU-only nodes were skipped."""
    path = Path(path)
    nodes: list[NodeRow] = []
    cpu_only = 0
    seen: dict[str, int] = {}
    for line, raw in _rows(path, NODE_COLUMNS):
        r = _Row(path, line, raw)
        name = r.name("sn", seen)
        gpus = r.required("gpu", le=MAX_GPUS_PER_JOB)
        cpu = r.required("cpu_milli", ge=1)
        mem = r.required("memory_mib", ge=1)
        if gpus == 0:
            if raw["model"]:
                raise r.fail("model", "must be empty on a node without GPUs (gpu = 0)")
            cpu_only += 1
            continue
        model = r.choice("model", tuple(GPU_MODELS))
        nodes.append(NodeRow(row=line, name=name, cpu_milli=cpu, memory_mib=mem, gpus=gpus,
                             model=model))
    if not nodes:
        raise InputError(f"{path}: has no GPU nodes")
    return nodes, cpu_only


# --------------------------------------------------------------------------- rules

def node_power_w(model: str, gpus: int) -> tuple[float, ...]:
    """Whole-node watts with 0..gpus GPUs busy: the profiles' model with the model's profile."""
    return _power_profiles().node_power_w(GPU_MODELS[model].power, gpus)


@functools.cache
def _power_profiles():
    from andreas.profiles import PowerProfile, load_profiles

    base = load_profiles()
    extra = {name: PowerProfile(name=name, idle_w=idle, busy_w=busy, sources=src,
                                description=f"{name} (andreas.formats.alibaba)")
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


def _held(pod: Pod) -> float:
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
                   epoch_s: float, load: float | None) -> None:
    def bad(name: str, problem: str, value: Any) -> InputError:
        return InputError(f"{name}: {problem}, got {show(value)}", field=name)

    for name, count in (("sample", sample), ("max_nodes", max_nodes)):
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 1):
            raise bad(name, "must be an integer >= 1", count)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise bad("seed", "must be an integer >= 0", seed)
    limits: tuple[tuple[str, float | None, float], ...] = (
        ("slack", slack, 1e6), ("epoch_s", epoch_s, 1e9), ("load", load, MAX_LOAD))
    for name, number, top in limits:
        if name == "load" and number is None:
            continue
        value: Any = number
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise bad(name, "must be a number > 0", value)
        if value > top:
            raise bad(name, f"must be <= {top:g}", value)


# --------------------------------------------------------------------------- import

def import_alibaba(pods_path: str | Path, nodes_path: str | Path, *, sample: int | None = None,
                   seed: int = 0, max_nodes: int | None = None, slack: float = DEFAULT_SLACK,
                   epoch_s: float = DEFAULT_EPOCH_S, load: float | None = None,
                   since: float = 0.0, name: str | None = None) -> tuple[Trace, ImportReport]:
    """Read both files and build the trace by the module docstring's rules; writes nothing."""
    import numpy as np

    _check_options(sample, seed, max_nodes, slack, epoch_s, load)
    if isinstance(since, bool) or not isinstance(since, (int, float)) \
            or not 0 <= since <= MAX_TIME:
        raise InputError(f"since: must be a time >= 0 (seconds of the trace), got "
                         f"{show(since)}", field="since")
    pods = read_pods(pods_path)
    all_nodes, cpu_only = read_nodes(nodes_path)
    end = max(t for p in pods for t in (p.creation, p.deletion, p.scheduled) if t is not None)

    dropped: Counter = Counter()
    eligible: list[tuple[Pod, int]] = []          # (pod, duration)
    for pod in pods:
        reason = _drop_reason(pod)
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

    # Per-pod GPU memory draws come first, in file order, so they do not depend on which
    # nodes and pods the sampling keeps.
    mem_rng = np.random.default_rng([seed, 2])
    draws = {pod.name: (float(a), float(b), float(c)) for (pod, _), a, b, c in zip(
        eligible, mem_rng.uniform(*GAMMA_RANGE, len(eligible)),
        mem_rng.uniform(*DELTA_RANGE, len(eligible)),
        mem_rng.uniform(0.0, PEAK_PROBABILITY_MAX, len(eligible)))}

    if since:
        eligible = _open_window(eligible, since, dropped)
        if not eligible:
            raise InputError(f"since: every GPU pod ended by {since:g}", field="since")

    nodes = stratified_nodes(all_nodes, max_nodes, np.random.default_rng([seed, 0]))
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
    notes: list[str] = []
    if sample is not None and sample < len(fitting):
        picks = np.random.default_rng([seed, 1]).choice(len(fitting), size=sample,
                                                         replace=False)
        chosen = set(int(i) for i in picks)
        dropped[DROP_NOT_SAMPLED] += len(fitting) - sample
        fitting = [f for i, f in enumerate(fitting) if i in chosen]
    elif sample is not None and sample > len(fitting):
        notes.append(f"--sample {sample} > {len(fitting)} pods that fit: kept them all")
    if max_nodes is not None and max_nodes > len(all_nodes):
        notes.append(f"--max-nodes {max_nodes} > {len(all_nodes)} GPU nodes: kept them all")

    gpus = sum(n.gpus for n in nodes)
    first = min(p.creation for p, _, _ in fitting)
    window = _Window([(p, d) for p, d, _ in fitting], gpus)
    load_full = _Window(eligible, sum(n.gpus for n in all_nodes)).share(1.0)
    target = load if load is not None else load_full
    scale = 1.0
    if window.span > 0 and target:
        if target >= window.most():
            if load is not None:
                raise InputError(f"load: must be < {window.most():.4g} for these pods on these "
                                 f"{gpus} GPUs (all of them submitted at once), got {load:g}",
                                 field="load")
            raise InputError(f"{pods_path}: the {len(fitting)} pods kept cannot offer the full "
                             f"trace's GPU load {target:.4g} on {gpus} GPUs (at most "
                             f"{window.most():.4g}): keep fewer nodes (--max-nodes), more "
                             f"pods (--sample) or set --load")
        scale = window.scale_for(target)

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
    trace_nodes = tuple(Node(name=n.name, gpu_type=n.model, gpus=n.gpus,
                             power_w=node_power_w(n.model, n.gpus), cpu_milli=n.cpu_milli,
                             memory_mib=n.memory_mib,
                             gpu_memory_mib=GPU_MODELS[n.model].memory_mib) for n in nodes)
    stem = Path(pods_path).stem
    trace = Trace(name=name or f"alibaba-{stem}-n{len(nodes)}-j{len(jobs)}-s{seed}",
                  nodes=trace_nodes, jobs=tuple(jobs))
    new_span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
    report = ImportReport(
        pods=len(pods), jobs=len(jobs),
        dropped={k: dropped[k] for k in (DROP_CPU_ONLY, DROP_PENDING, DROP_NO_RUN,
                                         DROP_BEFORE_SINCE, DROP_NO_TYPE, DROP_TOO_BIG,
                                         DROP_NOT_SAMPLED)
                 if dropped[k]},
        phases=dict(sorted(Counter(p.phase for p, _, _ in fitting).items())),
        slices=sum(1 for p, _, _ in fitting if p.gpu_milli < GPU_MILLI),
        nodes_read=len(all_nodes) + cpu_only, cpu_nodes_skipped=cpu_only, nodes=len(nodes),
        gpus=gpus, nodes_by_type=dict(sorted(Counter(n.model for n in nodes).items())),
        time_scale=scale, load_full=load_full, load=window.share(scale),
        offered=_offered(trace) if new_span > 0 else None, span_s=new_span,
        notes=tuple(notes))
    return trace, report


class _Window:
    """GPU load over the submission window: the mean share of the GPUs busy between the
    first and the last submission if every task ran when submitted, at a time scale."""

    def __init__(self, items: Sequence[tuple[Pod, int]], gpus: int) -> None:
        import numpy as np

        created = np.array([p.creation for p, _ in items], dtype=float)
        self.created = created - created.min()
        self.span = float(self.created.max())
        self.duration = np.array([d for _, d in items], dtype=float)
        self.held = np.array([_held(p) for p, _ in items])
        self.gpus = gpus

    def share(self, scale: float) -> float | None:
        import numpy as np

        if self.span <= 0:
            return None
        window = self.span * scale
        busy = np.minimum(self.duration, window - self.created * scale)
        return float((self.held * busy).sum() / (self.gpus * window))

    def most(self) -> float:
        """The limit as the scale goes to 0: every task submitted at once."""
        return float((self.held * (self.span - self.created)).sum() / (self.gpus * self.span))

    def scale_for(self, target: float) -> float:
        """The scale whose share is ``target`` (0 < target < most()): the share does not
        grow with the scale, so bisect (on a log scale) between a scale that gives most()
        and one that gives at most ``target``."""
        if abs((self.share(1.0) or 0.0) - target) <= 1e-12 * target:
            return 1.0          # the whole trace, or a sample as loaded as it: keep its times
        left = self.span - self.created
        lo = float((self.duration[left > 0] / left[left > 0]).min())
        hi = max(float((self.held * self.duration).sum() / (self.gpus * self.span * target)),
                 lo)
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if (self.share(mid) or 0.0) > target:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + 1e-12:
                break
        return hi


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
