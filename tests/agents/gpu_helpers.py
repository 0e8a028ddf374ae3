"""Shared test helpers for the GPU sampler tests: an injected clock and tick loops."""

from __future__ import annotations

from collections.abc import Iterable

from agents.gpu import GpuSampler
from agents.nvml_fake import FakeNvml, make_fake_nvml
from agents.records import GpuGap, GpuSample

WALL0 = 1_700_000_000.0  # wall clock = WALL0 + monotonic clock in these tests


class Clock:
    """A monotonic clock the test advances by hand: the fake and the sampler share it."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fake(spec: str, clock: Clock, **kwargs) -> FakeNvml:
    return make_fake_nvml(spec, node="n1", clock=clock, wall_clock=lambda: WALL0 + clock.t,
                          **kwargs)


def started(nvml: FakeNvml, **kwargs) -> GpuSampler:
    sampler = GpuSampler(nvml, **kwargs)
    sampler.start()
    return sampler


def run(sampler: GpuSampler, clock: Clock, times: Iterable[float]
        ) -> list[GpuSample | GpuGap]:
    """Tick the sampler at each time (advancing the shared clock first)."""
    out: list[GpuSample | GpuGap] = []
    for t in times:
        clock.t = t
        out.extend(sampler.sample(t, WALL0 + t))
    return out


def samples(items: Iterable[object], uuid: str | None = None) -> list[GpuSample]:
    return [x for x in items if isinstance(x, GpuSample) and (uuid is None or x.uuid == uuid)]


def gaps(items: Iterable[object], uuid: str | None = None) -> list[GpuGap]:
    return [x for x in items if isinstance(x, GpuGap) and (uuid is None or x.uuid == uuid)]


def energy_j(items: Iterable[object], uuid: str) -> float:
    return sum(s.energy_mj for s in samples(items, uuid) if s.energy_mj is not None) / 1000.0
