"""How a sample's power and energy were obtained: the agent says so on every sample and
the store keeps it (a CHECK-constrained column), so an estimate is never mistaken for a
reading. Stdlib only: the agent imports it without the store's SQLAlchemy models."""

from __future__ import annotations

import enum


class EnergySource(enum.Enum):
    """How a sample's ``energy_mj`` was obtained."""

    COUNTER = "counter"        # difference of NVML's total-energy counter
    INTEGRATED = "integrated"  # trapezoid of instant power over a monotonic interval
    RAPL = "rapl"              # /sys/class/powercap package domains (host)
    MODEL = "model"            # profiles/ power model: an estimate (host)


class PowerSource(enum.Enum):
    """Which reading a sample's power comes from."""

    INSTANT = "instant"        # NVML instant-power field
    AVERAGE = "average"        # nvmlDeviceGetPowerUsage (a 1-s average on Ampere and newer)
    RAPL = "rapl"              # /sys/class/powercap package domains (host)
    MODEL = "model"            # profiles/ power model: an estimate (host)
