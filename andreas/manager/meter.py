"""What the manager's metrics exporter reads of the manager's own doings.

Stdlib only, always on (a few additions per tick and decision), so the manager runs the
same whether or not ``prometheus_client`` is imported: :mod:`andreas.manager.exporter`
reads a :meth:`ManagerMeter.view` at scrape time. What the store knows (jobs and nodes
by state) is read from the store by the exporter, not kept here.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from andreas.manager.plandoc import NodeForecast, read_node_forecasts

# Decisions take milliseconds (greedy, small clusters) to a minute (MILP, large ones).
DECISION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                      60.0)


@dataclass(frozen=True, kw_only=True)
class ManagerView:
    """One consistent copy (taken under the meter's lock)."""

    ticks: int
    tick_errors: int
    decisions: Mapping[str, int]                 # outcome (ok, error) -> count
    decision_buckets: tuple[int, ...]            # per bucket of DECISION_BUCKETS_S, then +Inf
    decision_sum_s: float
    objective: float | None                      # the latest decision's, None: none / NaN
    objective_name: str
    policy: str
    decision_t: float | None
    forecasts: Mapping[str, NodeForecast]        # the current target's nodes
    pue: float | None
    price_per_kwh: float | None


class ManagerMeter:
    """Counters updated by :class:`andreas.manager.manager.Manager`; any thread reads."""

    def __init__(self, policy: str) -> None:
        self._lock = threading.Lock()
        self._policy = policy
        self._ticks = 0
        self._tick_errors = 0
        self._decisions = {"ok": 0, "error": 0}
        self._buckets = [0] * (len(DECISION_BUCKETS_S) + 1)
        self._sum_s = 0.0
        self._objective: float | None = None
        self._objective_name = ""
        self._decision_t: float | None = None
        self._forecasts: Mapping[str, NodeForecast] = {}
        self._pue: float | None = None
        self._price: float | None = None

    def tick(self, *, failed: bool) -> None:
        with self._lock:
            self._ticks += 1
            self._tick_errors += bool(failed)

    def decision_failed(self) -> None:
        with self._lock:
            self._decisions["error"] += 1

    def decision(self, *, seconds: float, objective: float, objective_name: str, t: float,
                 doc: Mapping[str, Any]) -> None:
        """A stored decision: its policy time, objective and plan document."""
        with self._lock:
            self._decisions["ok"] += 1
            self._buckets[bisect.bisect_left(DECISION_BUCKETS_S, seconds)] += 1
            self._sum_s += seconds
            self._objective = objective if math.isfinite(objective) else None
            self._objective_name = objective_name
            self._decision_t = t
        self.target(doc)

    def target(self, doc: Mapping[str, Any] | None) -> None:
        """The plan the manager follows now (also the previous manager's, at start)."""
        forecasts = read_node_forecasts(doc)
        energy = doc.get("energy") if isinstance(doc, Mapping) else None
        pue = energy.get("pue") if isinstance(energy, Mapping) else None
        price = energy.get("price_per_kwh") if isinstance(energy, Mapping) else None
        with self._lock:
            self._forecasts = forecasts
            self._pue = float(pue) if isinstance(pue, (int, float)) else None
            self._price = float(price) if isinstance(price, (int, float)) else None

    def view(self) -> ManagerView:
        with self._lock:
            return ManagerView(
                ticks=self._ticks, tick_errors=self._tick_errors,
                decisions=dict(self._decisions), decision_buckets=tuple(self._buckets),
                decision_sum_s=self._sum_s, objective=self._objective,
                objective_name=self._objective_name, policy=self._policy,
                decision_t=self._decision_t, forecasts=self._forecasts, pue=self._pue,
                price_per_kwh=self._price)
