"""Accounting of what happened: measured energy priced as it was used, and lateness.

The views, the reports and the simulator read these; the objectives the policies
minimise are ``costs.py``'s, on the same pricing rule (:func:`andreas.costs.kwh_cost`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from andreas.costs import kwh_cost
from andreas.limits import J_PER_KWH, MJ_PER_KWH  # noqa: F401 (the units accounts are in)
from andreas.model import Energy, Tariff




@dataclass(frozen=True, kw_only=True)
class Prices:
    """What turns measured IT energy into money (× PUE × price, or with a ``tariff`` ×
    price(t) · PUE(t) at the time it was used) and CO2 (× PUE × grid intensity; with a
    tariff its mean PUE); the same rule as :func:`energy_cost` and ``c_ng``
    (:func:`kwh_cost`). With a tariff, ``pue`` and ``price_per_kwh`` are its means."""

    pue: float
    price_per_kwh: float
    co2_g_per_kwh: float | None = None
    tariff: Tariff | None = None
    tariff_path: str | None = None      # where the tariff was read (shown in reports)

    @property
    def energy(self) -> Energy:
        return Energy(pue=self.pue, price_per_kwh=self.price_per_kwh, tariff=self.tariff)

    def cost(self, kwh: float, t0_s: float | None = None, t1_s: float | None = None) -> float:
        """``kwh`` drawn evenly over [t0, t1) (see :func:`kwh_cost`)."""
        return kwh_cost(kwh, self.energy, t0_s, t1_s)

    def bill(self, kwh: float, pieces: Iterable[tuple[float, float, float]]) -> float:
        """The bill for ``kwh`` measured as ``pieces`` (kWh, t0, t1), each drawn evenly over
        its interval (:func:`spread`): without a tariff ``cost(kwh)`` (the pieces are not
        read, so the figures stay exactly as they were), with one the sum of the pieces'
        costs at the time each was used."""
        if self.tariff is None:
            return self.cost(kwh)
        return math.fsum(self.cost(k, a, b) for k, a, b in pieces)

    def total(self, kwh: float, bills: Iterable[float]) -> float:
        """The bill for ``kwh`` made of parts already billed (``bills``, e.g. per node):
        without a tariff ``cost(kwh)`` as before, with one the sum of the parts' bills."""
        return self.cost(kwh) if self.tariff is None else math.fsum(bills)

    def co2_kg(self, kwh: float) -> float | None:
        return None if self.co2_g_per_kwh is None else kwh * self.pue * self.co2_g_per_kwh / 1e3


def spread(parts: Iterable[tuple[float, float, float]], start_s: float = -math.inf,
           end_s: float = math.inf) -> Iterator[tuple[float, float, float]]:
    """Measured energy as billing pieces: each part (mJ, a, b), energy drawn evenly over
    [a, b) (an instant when a == b), clipped to [start, end) and pro-rated, as (kWh, t0,
    t1) for :meth:`Prices.bill`; the same pro-rating as the reports' energy figures."""
    for mj, a, b in parts:
        if b > a:
            lo, hi = max(a, start_s), min(b, end_s)
            if hi > lo:
                yield mj * (hi - lo) / (b - a) / MJ_PER_KWH, lo, hi
        elif start_s <= b < end_s:
            yield mj / MJ_PER_KWH, b, b


def late_s(*, due_s: float, end_s: float | None, now_s: float, cancelled: bool,
           finished: bool, start_s: float = -math.inf, stop_s: float = math.inf) -> float:
    """Seconds a job has been late within [start_s, stop_s): up to its end, or up to now
    while it is alive. Zero for a job its user cancelled (withdrawn: no penalty for its
    due date) or a finished job whose end is unknown (nothing to charge it by)."""
    if cancelled or (finished and end_s is None):
        return 0.0
    until = end_s if end_s is not None else now_s
    return max(0.0, min(until, stop_s) - max(due_s, start_s))
