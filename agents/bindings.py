"""Which NVML bindings the agent imported: NVIDIA's ``nvidia-ml-py`` or something else.

The unofficial ``pynvml`` distributions install a module of the same name whose field
values and errors differ; the agent says so at start instead of sampling wrong numbers.
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

OFFICIAL_DISTRIBUTION = "nvidia-ml-py"
UNOFFICIAL_DISTRIBUTION = "pynvml"


@dataclass(frozen=True, kw_only=True)
class BindingsCheck:
    """Which NVML bindings are loaded, and whether they are NVIDIA's official ones."""

    fake: bool
    official: bool
    module_path: str | None
    distribution: str | None
    version: str | None
    has_field_values: bool
    problems: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.fake:
            return "FAKE NVML (--fake-gpus): simulated GPUs, nothing real is measured"
        where = self.module_path or "unknown path"
        dist = (f"{self.distribution} {self.version}" if self.distribution
                else "no installed distribution")
        verdict = "official" if self.official and not self.problems else "NOT OK"
        return f"pynvml from {dist} at {where} ({verdict})"


def _owning_distributions(module_file: str, top_level: str) -> list[tuple[str, str]]:
    """Installed distributions (name, version) whose RECORD lists ``module_file``."""
    target = Path(module_file).resolve()
    owners: list[tuple[str, str]] = []
    names = md.packages_distributions().get(top_level, [])
    for name in dict.fromkeys(names):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for f in dist.files or ():
            if Path(str(dist.locate_file(f))).resolve() == target:
                owners.append((dist.metadata["Name"] or name, dist.version))
                break
    return owners


def check_bindings(nvml: object, *,
                   owners: Callable[[str, str], list[tuple[str, str]]] = _owning_distributions
                   ) -> BindingsCheck:
    """Tell NVIDIA's ``nvidia-ml-py`` from the unofficial ``pynvml`` distribution.

    Both install a module imported as ``pynvml``; the official one is a single
    ``pynvml.py`` owned by the ``nvidia-ml-py`` distribution and has
    ``nvmlDeviceGetFieldValues``. The unofficial package (before 12.0 it shipped its own
    copy of the bindings as ``pynvml/__init__.py``) lags behind the driver and lacks
    fields, so it is reported as a problem. ``owners(module_file, top_level)`` is
    injectable for tests.
    """
    has_fields = callable(getattr(nvml, "nvmlDeviceGetFieldValues", None))
    if getattr(nvml, "IS_FAKE", False):
        return BindingsCheck(fake=True, official=False, module_path=None, distribution=None,
                             version=None, has_field_values=has_fields)
    module_file = getattr(nvml, "__file__", None)
    top = (getattr(nvml, "__name__", "pynvml") or "pynvml").split(".")[0]
    found = owners(module_file, top) if module_file else []
    problems: list[str] = []
    names = [n.lower() for n, _ in found]
    if OFFICIAL_DISTRIBUTION in names:
        dist, version = found[names.index(OFFICIAL_DISTRIBUTION)]
    elif found:
        dist, version = found[0]
    else:
        dist, version = None, None
    official = (dist is not None and dist.lower() == OFFICIAL_DISTRIBUTION
                and module_file is not None and Path(module_file).name == "pynvml.py")
    if dist is not None and dist.lower() == UNOFFICIAL_DISTRIBUTION:
        problems.append(
            f"the loaded pynvml ({module_file}) comes from the unofficial '{dist}' "
            f"distribution {version}, not NVIDIA's '{OFFICIAL_DISTRIBUTION}': its bindings "
            f"can lag behind the driver; run 'pip uninstall {dist}' and "
            f"'pip install --force-reinstall {OFFICIAL_DISTRIBUTION}'")
    elif dist is None:
        problems.append(f"the loaded pynvml ({module_file or 'no file'}) belongs to no installed "
                        f"distribution (a stray copy on sys.path?); install "
                        f"'{OFFICIAL_DISTRIBUTION}'")
    elif not official:
        problems.append(f"the loaded pynvml ({module_file}) is not the single pynvml.py that "
                        f"'{OFFICIAL_DISTRIBUTION}' installs")
    if not has_fields:
        problems.append("these bindings lack nvmlDeviceGetFieldValues: no instant power, "
                        "power integration falls back to the 1-s average")
    return BindingsCheck(fake=False, official=official and not problems, module_path=module_file,
                         distribution=dist, version=version, has_field_values=has_fields,
                         problems=tuple(problems))


class NvmlModule(Protocol):
    """The pynvml subset the sampler uses; the real module and ``FakeNvml`` both fit.

    Units are NVML's: power in mW, energy in mJ, memory in bytes, utilization in percent.
    """

    NVMLError: type[Exception]

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetName(self, handle: Any) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: Sequence[Any]) -> Any: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]: ...
