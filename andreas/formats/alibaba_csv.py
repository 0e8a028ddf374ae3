"""The files of Alibaba's GPU trace ("openb", cluster-trace-gpu-v2023): their columns, the
values they may hold, and every row checked (``andreas.simulator.alibaba`` turns them into
a trace).

Pod lists: every published one has ``name, cpu_milli, memory_mib, num_gpu, gpu_milli``;
all but the ``multigpu*`` variants add ``gpu_spec, qos, pod_phase`` and the three time
columns (creation, deletion, scheduled; seconds), which go together. Node lists: ``sn,
cpu_milli, memory_mib, gpu, model``. Files are read strictly with the csv module; a bad
row is one ``InputError`` line ``FILE: row R: field 'x' must be ..., got ...`` (R is the
line in the file, the header is row 1).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from andreas.errors import InputError
from andreas.infra.fileio import open_capped
from andreas.formats.snapshot import MAX_CAPACITY, MAX_GPUS_PER_JOB, show
from andreas.model import GPU_MILLI

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time")
# Every published pod list has these; the multigpu* variants have nothing else.
POD_REQUIRED = POD_COLUMNS[:5]
TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
DEFAULT_QOS = "LS"            # a pod list without a qos column: the most common class
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
PHASES = ("Running", "Succeeded", "Failed", "Pending")
QOS_WEIGHT = MappingProxyType({"Guaranteed": 4.0, "LS": 2.0, "Burstable": 1.0, "BE": 0.5})
MAX_TIME = 2**53
# The published lists are 40-600 KiB; a file this big would take many minutes to import
# (a 50 MB pod list ran past a minute): refused, with the limit named.
MAX_CSV_BYTES = 8 << 20


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

_INT = re.compile(r"[0-9]+")


@dataclass(frozen=True, kw_only=True)
class Pod:
    """One row of the pod list, checked; ``row`` is its line in the file. A list without
    time columns: ``creation`` is the pod's index in the file, ``scheduled`` the same,
    ``deletion`` None; ``qos`` and ``phase`` "" where the file has no such column."""

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


# --------------------------------------------------------------------------- CSV

def _rows(path: Path, columns: Sequence[str], required: Sequence[str] | None = None
          ) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) for every data row of ``path``; header and shape checked, one-line
    errors. The header has every name of ``required`` (default: all ``columns``) and
    nothing outside ``columns``."""
    required = columns if required is None else required
    f = io.TextIOWrapper(open_capped(path, what="CSV file", limit=MAX_CSV_BYTES),
                         encoding="utf-8-sig", newline="")
    with f:
        reader = csv.reader(f, strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path}: is empty (expected a header: {','.join(columns)})")
            missing = [c for c in required if c not in header]
            unknown = [c for c in header if c not in columns]
            repeated = sorted({c for c in header if header.count(c) > 1})
            if missing or unknown or repeated:
                what = (f"lacks column {show(missing[0])}" if missing else
                        f"has unknown column {show(unknown[0])}" if unknown else
                        f"repeats column {show(repeated[0])}")
                optional = [c for c in columns if c not in required]
                raise InputError(f"{path}: row 1: header {what} (expected "
                                 f"{','.join(required)}"
                                 + (f"[,{','.join(optional)}]" if optional else "") + ")")
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


def read_pod_list(path: str | Path) -> tuple[list[Pod], bool]:
    """Every row of a pod list, checked (module docstring), in file order, and whether it
    has the time columns. Without them a pod's creation and scheduled times are its index
    in the file (the replay spaces them), gpu_spec is empty, qos ``DEFAULT_QOS`` and the
    phase ""."""
    path = Path(path)
    pods: list[Pod] = []
    seen: dict[str, int] = {}
    timed: bool | None = None
    for line, raw in _rows(path, POD_COLUMNS, POD_REQUIRED):
        if timed is None:
            present = [c for c in TIME_COLUMNS if c in raw]
            if present and len(present) < len(TIME_COLUMNS):
                missing = next(c for c in TIME_COLUMNS if c not in raw)
                raise InputError(f"{path}: row 1: header has {present[0]} but lacks "
                                 f"{missing} (the time columns go together)")
            timed = bool(present)
        has_phase = "pod_phase" in raw
        raw = {"gpu_spec": "", "qos": DEFAULT_QOS, "pod_phase": "", **raw}
        if not timed:
            index = str(len(pods))
            raw.update(creation_time=index, deletion_time="", scheduled_time=index)
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
                        phase=r.choice("pod_phase", PHASES) if has_phase else "",
                        creation=creation,
                        deletion=deletion, scheduled=scheduled))
    if not pods:
        raise InputError(f"{path}: has no pods (only a header)")
    return pods, bool(timed)


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


