"""What ``andreas-agent --check`` prints about GPUs and host power: one finding per line.

Why a separate module: the operator's first question on a new node is "what can the
agent see?", and the answer must come from the same samplers the daemon runs (not from a
second probing path that could disagree). These functions only format; the CLI prints.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from agents.gpu import GpuSampler, NvmlUnavailable
from agents.host import HostSampler

# The account systemd/andreas-agent.service runs the agent as (scripts/install-agent.sh).
SERVICE_USER = "andreas-agent"


def gpu_report(sampler: GpuSampler) -> list[str]:
    """NVML bindings, then one line per GPU: UUID, index, model, memory, power limit,
    energy counter, power field used for integration, MIG. Starts the sampler if needed;
    an NVML that cannot start is a line, not an exception."""
    try:
        sampler.start()
    except NvmlUnavailable as e:
        lines: list[str] = [f"GPUs: none readable: {e}"]
        if sampler.bindings is not None:
            lines.insert(0, f"NVML bindings: {sampler.bindings.summary()}")
        return lines
    lines = []
    if sampler.bindings is not None:
        lines.append(f"NVML bindings: {sampler.bindings.summary()}")
        lines.extend(f"  PROBLEM: {p}" for p in sampler.bindings.problems)
    inventory = sampler.inventory
    refused = [g for g in inventory if g.mig_enabled]
    lines.append(f"GPUs: {len(inventory)} found, {len(inventory) - len(refused)} sampled"
                 + (f", {len(refused)} refused (MIG)" if refused else ""))
    for g in inventory:
        limit = f"{g.power_limit_w:.0f} W" if g.power_limit_w is not None else "unknown"
        if g.mig_enabled:
            power = "not sampled"
        elif sampler.has_instant_power(g.uuid):
            power = "instant field"
        else:
            power = "1-s average (nvmlDeviceGetPowerUsage)"
        energy = ("yes (nvmlDeviceGetTotalEnergyConsumption)" if g.has_energy_counter
                  else "no (energy integrated from power)")
        mig = ("ENABLED: refused, NVML has no per-instance power" if g.mig_enabled else "off")
        lines.append(f"  {g.uuid}  index {g.index}  {g.model}  {g.memory_mib} MiB  "
                     f"power limit {limit}  energy counter: {energy}  power: {power}  MIG: {mig}")
    for uuid in sorted(sampler.unhealthy):
        lines.append(f"  {uuid}: UNHEALTHY")
    return lines


def host_report(host_sampler: HostSampler, *, service_user: str = SERVICE_USER,
                euid: Callable[[], int] = os.geteuid) -> list[str]:
    """RAPL readable (which package domains) or the model fallback (estimated) and why.

    Run as root (``sudo andreas-agent --check``), RAPL is readable whatever its file
    modes, but the service runs as ``service_user``: then what that user will see is
    said too (``energy_uj`` is root-only on current kernels)."""
    rapl = host_sampler.rapl
    if rapl is not None:
        names = ", ".join(f"{d.name} ({d.path.name})" for d in rapl.domains)
        lines = [f"Host power: RAPL readable under {host_sampler.powercap_root}: {names} "
                 "(CPU packages only; sub-domains and psys not added)"]
        if euid() == 0 and service_user != "root":
            files = [d.path / "energy_uj" for d in rapl.domains]
            if not _readable_by(service_user, files):
                lines[0] = lines[0].replace("RAPL readable", "RAPL readable by root", 1)
                lines.append(
                    f"  but NOT by the service user {service_user} (energy_uj is "
                    f"{_mode(files[0])}): the agent service will record the host power model "
                    "instead (estimated); to measure, let that user read it, e.g. a "
                    "systemd-tmpfiles line 'z /sys/class/powercap/intel-rapl:*/energy_uj "
                    f"0440 root {service_user}'")
        return lines
    lines = [f"Host power: RAPL not usable: {host_sampler.rapl_problem}"]
    model = host_sampler.fallback_model
    if model is not None:
        lines.append(f"  using the model from {model.label}: idle {model.idle_w:g} W, "
                     f"busy {model.busy_w:g} W (ESTIMATED, marked 'model' in the data)")
    else:
        lines.append("  no host power model configured: host power is not recorded")
    return lines


def _readable_by(user: str, paths: Iterable[Path]) -> bool:
    """Whether ``user`` (by name; a missing account is only "others") may read every
    file, by its mode bits: owner, group (primary or supplementary) or others."""
    try:
        entry = pwd.getpwnam(user)
        uid, gids = entry.pw_uid, {entry.pw_gid} | {g.gr_gid for g in grp.getgrall()
                                                   if user in g.gr_mem}
    except KeyError:
        uid, gids = -1, set()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_uid == uid:
            bit = stat.S_IRUSR
        elif st.st_gid in gids:
            bit = stat.S_IRGRP
        else:
            bit = stat.S_IROTH
        if not st.st_mode & bit:
            return False
    return True


def _mode(path: Path) -> str:
    try:
        st = os.stat(path)
    except OSError as e:
        return f"unreadable: {e.strerror}"
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return f"mode {stat.filemode(st.st_mode)} {owner}:{group}"
