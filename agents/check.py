"""What ``andreas-agent --check`` prints about GPUs and host power: one finding per line.

Why a separate module: the operator's first question on a new node is "what can the
agent see?", and the answer must come from the same samplers the daemon runs (not from a
second probing path that could disagree). These functions only format; the CLI prints.
"""

from __future__ import annotations

from agents.gpu import GpuSampler, NvmlUnavailable
from agents.host import HostSampler


def gpu_report(sampler: GpuSampler) -> list[str]:
    """NVML bindings, then one line per GPU: UUID, index, model, memory, power limit,
    energy counter, power field used for integration, MIG. Starts the sampler if needed;
    an NVML that cannot start is a line, not an exception."""
    try:
        sampler.start()
    except NvmlUnavailable as e:
        lines = [f"GPUs: none readable: {e}"]
        if sampler.bindings is not None:
            lines.insert(0, f"NVML bindings: {sampler.bindings.summary()}")
        return lines
    lines: list[str] = []
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


def host_report(host_sampler: HostSampler) -> list[str]:
    """RAPL readable (which package domains) or the model fallback (estimated) and why."""
    rapl = host_sampler.rapl
    if rapl is not None:
        names = ", ".join(f"{d.name} ({d.path.name})" for d in rapl.domains)
        return [f"Host power: RAPL readable under {host_sampler.powercap_root}: {names} "
                "(CPU packages only; sub-domains and psys not added)"]
    lines = [f"Host power: RAPL not usable: {host_sampler.rapl_problem}"]
    model = host_sampler.fallback_model
    if model is not None:
        lines.append(f"  using the model from {model.label}: idle {model.idle_w:g} W, "
                     f"busy {model.busy_w:g} W (ESTIMATED, marked 'model' in the data)")
    else:
        lines.append("  no host power model configured: host power is not recorded")
    return lines
