"""Shared test helpers for the host sampler tests: a fake psutil and a powercap tree."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

MIB = 1024 * 1024
VM = namedtuple("VM", "total available")
MAX_UJ = 262_143_328_850


class FakeProcess:
    def __init__(self) -> None:
        self.calls: list[object] = []

    def cpu_percent(self, interval=None):
        self.calls.append(interval)
        return 0.5

    def memory_info(self):
        return namedtuple("Mem", "rss")(40 * MIB)


class FakePsutil:
    """The psutil calls the host sampler makes; records the interval argument."""

    def __init__(self) -> None:
        self.cpu_calls: list[object] = []
        self.process = FakeProcess()

    def cpu_percent(self, interval=None):
        self.cpu_calls.append(interval)
        return 37.5

    def virtual_memory(self):
        return VM(total=64_000 * MIB, available=48_000 * MIB)

    def Process(self):
        return self.process


def make_domain(root: Path, dirname: str, name: str, energy_uj: int, max_uj: int = MAX_UJ) -> Path:
    d = root / dirname
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def set_energy(d: Path, energy_uj: int) -> None:
    (d / "energy_uj").write_text(f"{energy_uj}\n")
