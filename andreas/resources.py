"""The one multi-resource model: what a node has free, what a job asks, what fits where.

Every GPU is 1000 milli-GPU (``GPU_MILLI``); a whole-GPU job takes all of each GPU it
gets, a GPU-sharing task (``Demand.gpu_milli < 1000``) takes a slice of one GPU that
other slices may share. CPU milli-cores, memory and GPU memory are per node (GPU memory
per GPU); a node capacity of 0 is not modelled and never binds. The feasibility check,
the simulator and the packing policies all place through a ``Ledger``, so "fits" means
one thing everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from andreas.model import GPU_MILLI, Demand, Job, Node

UNLIMITED = np.inf


def demand_of(job: Job, gpus: int | None = None) -> Demand:
    """The job's demand; an elastic ANDREAS job asks for ``gpus`` whole GPUs and nothing else."""
    if job.demand is not None:
        return job.demand
    return Demand(gpus=gpus or 1)


@dataclass(frozen=True, kw_only=True)
class Shortfall:
    """Why a demand does not fit a node: the first resource that is short, with figures."""

    resource: str
    need: float
    free: float

    def __str__(self) -> str:
        return f"{self.resource}: needs {self.need:g}, {self.free:g} free"


class Ledger:
    """Free resources of every node (mutable); ``fit`` / ``place`` / ``release`` are the only
    ways to change them, so no caller can double-book a GPU slice."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        n = len(self.nodes)
        width = max((node.gpus for node in self.nodes), default=0)
        self.gpus = np.array([node.gpus for node in self.nodes], dtype=np.int64)
        # free milli-GPU per GPU slot; slots a node does not have are -1 (never fit)
        self.gpu_free = np.full((n, max(width, 1)), -1, dtype=np.int64)
        for i, node in enumerate(self.nodes):
            self.gpu_free[i, : node.gpus] = GPU_MILLI

        def cap(key: str) -> np.ndarray:
            return np.array([getattr(node, key) or UNLIMITED for node in self.nodes],
                            dtype=float)

        self.cpu_free = cap("cpu_milli")
        self.mem_free = cap("memory_mib")
        self.gpu_mem_free = np.repeat(cap("gpu_memory_mib")[:, None], max(width, 1), axis=1)
        self.gpu_mem_free[self.gpu_free < 0] = -1

    # -- queries --------------------------------------------------------------------------
    def shortfall(self, demand: Demand, node: int) -> Shortfall | None:
        """None if ``demand`` fits ``node`` now, else the first resource that is short."""
        if demand.cpu_milli > self.cpu_free[node]:
            return Shortfall(resource="cpu_milli", need=demand.cpu_milli,
                             free=self.cpu_free[node])
        if demand.memory_mib > self.mem_free[node]:
            return Shortfall(resource="memory_mib", need=demand.memory_mib,
                             free=self.mem_free[node])
        ok = self._gpu_ok(demand, node)
        if int(ok.sum()) < demand.gpus:
            what = "milli-GPU on one GPU" if demand.shared else "whole free GPUs"
            free = (int(self.gpu_free[node].max()) if demand.shared
                    else int((self.gpu_free[node] == GPU_MILLI).sum()))
            need = demand.gpu_milli if demand.shared else demand.gpus
            return Shortfall(resource=what, need=need, free=free)
        return None

    def fit(self, demand: Demand, node: int) -> tuple[int, ...] | None:
        """The GPU slots ``demand`` would take on ``node``, or None if it does not fit.

        A slice goes to the fullest GPU that still holds it (best fit, so whole GPUs stay
        free for whole-GPU jobs); whole GPUs are the lowest-numbered free ones.
        """
        if demand.cpu_milli > self.cpu_free[node] or demand.memory_mib > self.mem_free[node]:
            return None
        ok = self._gpu_ok(demand, node)
        if demand.shared:
            if not ok.any():
                return None
            free = np.where(ok, self.gpu_free[node], GPU_MILLI + 1)
            return (int(np.argmin(free)),)
        slots = np.flatnonzero(ok)
        if len(slots) < demand.gpus:
            return None
        return tuple(int(s) for s in slots[: demand.gpus])

    def fits_on(self, demand: Demand, node: int, slots: Sequence[int]) -> bool:
        """Whether ``demand`` fits on exactly these GPU slots of ``node``."""
        if len(slots) != demand.gpus or len(set(slots)) != len(slots):
            return False
        if demand.cpu_milli > self.cpu_free[node] or demand.memory_mib > self.mem_free[node]:
            return False
        ok = self._gpu_ok(demand, node)
        return all(0 <= s < len(ok) and ok[s] for s in slots)

    def _gpu_ok(self, demand: Demand, node: int) -> np.ndarray:
        need = demand.gpu_milli if demand.shared else GPU_MILLI
        return ((self.gpu_free[node] >= need)
                & (self.gpu_mem_free[node] >= demand.gpu_memory_mib))

    # -- changes --------------------------------------------------------------------------
    def place(self, demand: Demand, node: int, slots: Sequence[int]) -> None:
        self._add(demand, node, slots, -1)

    def release(self, demand: Demand, node: int, slots: Sequence[int]) -> None:
        self._add(demand, node, slots, +1)

    def _add(self, demand: Demand, node: int, slots: Sequence[int], sign: int) -> None:
        milli = demand.gpu_milli if demand.shared else GPU_MILLI
        self.cpu_free[node] += sign * demand.cpu_milli
        self.mem_free[node] += sign * demand.memory_mib
        for s in slots:
            self.gpu_free[node, s] += sign * milli
            self.gpu_mem_free[node, s] += sign * demand.gpu_memory_mib

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
        return int(self.gpus.sum()) * GPU_MILLI - int(self.gpu_free[self.gpu_free > 0].sum())

    def capacity_milli(self) -> int:
        return int(self.gpus.sum()) * GPU_MILLI
