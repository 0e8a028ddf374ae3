"""The agent's injected collaborators as Protocols: what :class:`agents.daemon.Agent` needs
from its GPU source, host source and container tracker (the store writer is
:class:`agents.delivery.Writer`). The real classes (``GpuSampler``, ``HostSampler``,
``EpochTracker``, ``SlurmJobTracker``) and the tests' fakes fit them structurally."""

from __future__ import annotations

from typing import Any, Protocol

from agents.epochs import ContainerInfo
from agents.records import GpuGap, GpuInfo, GpuSample, HostSample


class GpuSource(Protocol):
    """The node's GPUs (:class:`agents.gpu.GpuSampler`): inventory, health and samples."""

    @property
    def inventory(self) -> list[GpuInfo]: ...

    @property
    def unhealthy(self) -> frozenset[str]: ...

    def start(self) -> list[GpuInfo]: ...

    def sample(self, now_mono: float, now_wall: float) -> list[GpuSample | GpuGap]: ...

    def counters(self) -> dict[str, int | None]: ...

    def close(self) -> None: ...


class HostSource(Protocol):
    """The node's host power (:class:`agents.host.HostSampler`)."""

    def sample(self, now_mono: float, now_wall: float,
               busy_fraction: float = 0.0) -> HostSample | None: ...


class Tracker(Protocol):
    """The jobs' containers and their epochs (:class:`agents.tracker.EpochTracker`,
    :class:`agents.slurm_jobs.SlurmJobTracker`)."""

    client: Any                       # the Docker SDK's client (untyped); Slurm: None

    def start(self) -> object: ...      # (the tracker itself; unused)

    def stop(self, timeout: float = 10.0) -> None: ...

    def followed(self) -> list[ContainerInfo]: ...
