"""The one multi-resource model: what a node has free, what a job asks, what fits where.

Every GPU is 1000 milli-GPU (``GPU_MILLI``). A whole-GPU job takes all of each GPU it
gets; a GPU-sharing job (``Demand.gpu_milli < 1000``) puts each of its ``gpus`` workers
on a distinct GPU as a slice that other slices may share (the compute share alpha of the
interference-aware placement paper). CPU milli-cores and memory are per node. GPU memory
is per GPU and follows that paper's opportunistic model (eq. 3): the basic parts gamma
of a GPU's residents plus the largest variable part delta must fit its memory. A node
capacity of 0 is not modelled and never binds.

The feasibility check, the simulator and every packing policy place through a
``Ledger``, so "fits" means one thing everywhere; the ledger also knows who shares each
GPU (``residents``), which the interference model (``andreas.interference``) reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from andreas.model import GPU_MILLI, Demand, Job, Node

UNLIMITED = np.inf

Resident = tuple[str, Demand]      # (owner, demand): a job's worker on a GPU


def demand_of(job: Job, gpus: int | None = None) -> Demand:
    """The job's demand; an elastic ANDREAS job asks for ``gpus`` whole GPUs and nothing else."""
    if job.demand is not None:
        return job.demand
    return Demand(gpus=gpus or 1)


def held_milli(demand: Demand) -> int:
    """Milli-GPU a placed demand holds over all its GPUs."""
    return demand.gpus * (demand.gpu_milli if demand.shared else GPU_MILLI)


@dataclass(frozen=True, kw_only=True)
class Shortfall:
    """Why a demand does not fit a node: the first resource that is short, with figures."""

    resource: str
    need: float
    free: float

    def __str__(self) -> str:
        return f"{self.resource}: needs {self.need:g}, {self.free:g} free"


@dataclass(frozen=True)
class _Empty:
    """A cluster's capacities as arrays, built once per node tuple (a simulation builds a
    ledger per decision and a feasibility check per plan over the same nodes)."""

    nodes: tuple[Node, ...]
    index: dict[str, int]
    gpus: np.ndarray
    gpu_free: np.ndarray
    cpu_free: np.ndarray
    mem_free: np.ndarray
    gpu_mem_free: np.ndarray


_EMPTY: dict[int, _Empty] = {}


def _empty(nodes: tuple[Node, ...]) -> _Empty:
    hit = _EMPTY.get(id(nodes))
    if hit is not None and hit.nodes is nodes:
        return hit
    n = len(nodes)
    width = max(max((node.gpus for node in nodes), default=0), 1)
    gpu_free = np.full((n, width), -1, dtype=np.int64)
    for i, node in enumerate(nodes):
        gpu_free[i, : node.gpus] = GPU_MILLI

    def cap(key: str) -> np.ndarray:
        return np.array([getattr(node, key) or UNLIMITED for node in nodes], dtype=float)

    gpu_mem_free = np.repeat(cap("gpu_memory_mib")[:, None], width, axis=1)
    gpu_mem_free[gpu_free < 0] = -1
    hit = _Empty(nodes=nodes, index={node.name: i for i, node in enumerate(nodes)},
                 gpus=np.array([node.gpus for node in nodes], dtype=np.int64),
                 gpu_free=gpu_free, cpu_free=cap("cpu_milli"), mem_free=cap("memory_mib"),
                 gpu_mem_free=gpu_mem_free)
    if len(_EMPTY) >= 16:
        _EMPTY.clear()
    _EMPTY[id(nodes)] = hit          # the entry holds the tuple, so its id is not reused
    return hit


class Ledger:
    """Free resources of every node (mutable); ``fit`` / ``place`` / ``release`` are the only
    ways to change them, so no caller can double-book a GPU slice."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes if isinstance(nodes, tuple) else tuple(nodes)
        empty = _empty(self.nodes)
        self.index = empty.index                 # shared, never written
        self.gpus = empty.gpus
        # free milli-GPU per GPU slot; slots a node does not have are -1 (never fit)
        self.gpu_free = empty.gpu_free.copy()
        self.cpu_free = empty.cpu_free.copy()
        self.mem_free = empty.mem_free.copy()
        # per GPU: memory minus the residents' basic parts, and their largest variable part
        self.gpu_mem_free = empty.gpu_mem_free.copy()
        self.gpu_peak = np.zeros_like(empty.gpu_mem_free)
        self.residents: dict[tuple[int, int], list[Resident]] = {}

    # -- queries --------------------------------------------------------------------------
    def shortfall(self, demand: Demand, node: int) -> Shortfall | None:
        """None if ``demand`` fits ``node`` now, else the first resource that is short."""
        if demand.cpu_milli > self.cpu_free[node]:
            return Shortfall(resource="cpu_milli", need=demand.cpu_milli,
                             free=self.cpu_free[node])
        if demand.memory_mib > self.mem_free[node]:
            return Shortfall(resource="memory_mib", need=demand.memory_mib,
                             free=self.mem_free[node])
        ok = self.gpu_ok(demand, node)
        if int(ok.sum()) < demand.gpus:
            if demand.shared:
                return Shortfall(resource=f"GPUs with {demand.gpu_milli} milli-GPU and its "
                                 "GPU memory free", need=demand.gpus, free=int(ok.sum()))
            return Shortfall(resource="whole free GPUs", need=demand.gpus,
                             free=int((self.gpu_free[node] == GPU_MILLI).sum()))
        return None

    def fit(self, demand: Demand, node: int) -> tuple[int, ...] | None:
        """The GPU slots ``demand`` would take on ``node``, or None if it does not fit.

        Slices go to the fullest GPUs that still hold them (best fit, so whole GPUs stay
        free for whole-GPU jobs); whole GPUs are the lowest-numbered free ones.
        """
        if demand.cpu_milli > self.cpu_free[node] or demand.memory_mib > self.mem_free[node]:
            return None
        ok = self.gpu_ok(demand, node)
        slots = np.flatnonzero(ok)
        if len(slots) < demand.gpus:
            return None
        if demand.shared:
            slots = slots[np.argsort(self.gpu_free[node, slots], kind="stable")]
        return tuple(int(s) for s in slots[: demand.gpus])

    def fits_on(self, demand: Demand, node: int, slots: Sequence[int]) -> bool:
        """Whether ``demand`` fits on exactly these GPU slots of ``node``."""
        if len(slots) != demand.gpus or len(set(slots)) != len(slots):
            return False
        if demand.cpu_milli > self.cpu_free[node] or demand.memory_mib > self.mem_free[node]:
            return False
        ok = self.gpu_ok(demand, node)
        return all(0 <= s < len(ok) and ok[s] for s in slots)

    def gpu_ok(self, demand: Demand, node: int) -> np.ndarray:
        """Per GPU slot of ``node``: does one worker of ``demand`` fit there (eqs. 1 and 3)?"""
        need = demand.gpu_milli if demand.shared else GPU_MILLI
        peak = np.maximum(self.gpu_peak[node], demand.gpu_memory_peak_mib)
        return ((self.gpu_free[node] >= need)
                & (self.gpu_mem_free[node] >= demand.gpu_memory_mib + peak))

    def on_gpu(self, node: int, slot: int) -> list[Resident]:
        """Who holds a share of this GPU now."""
        return self.residents.get((node, slot), [])

    # -- changes --------------------------------------------------------------------------
    def place(self, demand: Demand, node: int, slots: Sequence[int], owner: str = "") -> None:
        self.cpu_free[node] -= demand.cpu_milli
        self.mem_free[node] -= demand.memory_mib
        milli = demand.gpu_milli if demand.shared else GPU_MILLI
        for s in slots:
            self.gpu_free[node, s] -= milli
            self.gpu_mem_free[node, s] -= demand.gpu_memory_mib
            self.gpu_peak[node, s] = max(self.gpu_peak[node, s], demand.gpu_memory_peak_mib)
            self.residents.setdefault((node, s), []).append((owner, demand))

    def release(self, demand: Demand, node: int, slots: Sequence[int], owner: str = "") -> None:
        self.cpu_free[node] += demand.cpu_milli
        self.mem_free[node] += demand.memory_mib
        milli = demand.gpu_milli if demand.shared else GPU_MILLI
        for s in slots:
            self.gpu_free[node, s] += milli
            self.gpu_mem_free[node, s] += demand.gpu_memory_mib
            left = self.residents.get((node, s), [])
            left.remove((owner, demand))
            if not left:
                self.residents.pop((node, s), None)
            self.gpu_peak[node, s] = max((d.gpu_memory_peak_mib for _, d in left), default=0)

    # -- cluster figures ------------------------------------------------------------------
    def busy_gpus(self) -> np.ndarray:
        """Per node, GPUs with any allocation (devices in use: they draw busy power)."""
        held = (self.gpu_free >= 0) & (self.gpu_free < GPU_MILLI)
        return held.sum(axis=1)

    def busy_gpus_of(self, node: int) -> int:
        free = self.gpu_free[node]
        return int(((free >= 0) & (free < GPU_MILLI)).sum())

    def allocated_milli(self) -> int:
        """Milli-GPU allocated over the whole cluster (for GPU utilisation)."""
        return self.capacity_milli() - int(self.gpu_free[self.gpu_free > 0].sum())

    def capacity_milli(self) -> int:
        return int(self.gpus.sum()) * GPU_MILLI
