"""The manager's Prometheus metrics, built at scrape time.

A custom collector with its inputs through the constructor: the manager's
:class:`andreas.manager.meter.ManagerMeter` (ticks, decisions, the current plan's
forecast) and a function that reads jobs and nodes by state from the store (two
``GROUP BY`` queries per scrape; when the database does not answer, those two families
are left out and ``andreas_metrics_store_errors_total`` counts it, so the scrape itself
never fails). Imported only when ``metrics_port`` is set; see docs/METRICS.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from andreas.manager.meter import DECISION_BUCKETS_S, ManagerView

log = logging.getLogger("andreas.manager")


class ManagerCollector(Collector):
    """``meter``: the manager's counters (``view()``); ``counts``: () -> (jobs by state,
    nodes by state), each a mapping of state name to count."""

    def __init__(self, *, meter: Any,
                 counts: Callable[[], tuple[dict[str, int], dict[str, int]]]) -> None:
        self.meter = meter
        self.counts = counts
        self.store_errors = 0

    def collect(self) -> Iterator[Metric]:
        try:
            jobs, nodes = self.counts()
        except Exception as e:  # noqa: BLE001 - a scrape must answer while the database is away
            self.store_errors += 1
            if self.store_errors == 1 or self.store_errors % 100 == 0:
                log.warning("metrics: cannot read jobs and nodes from the store (%d time(s)): "
                            "%s", self.store_errors, e)
        else:
            yield _by_state("andreas_jobs", "Jobs by state (the store's view).", jobs)
            yield _by_state("andreas_nodes", "Nodes by state (the store's view).", nodes)
        errors = CounterMetricFamily("andreas_metrics_store_errors", "Scrapes that could not "
                                     "read jobs and nodes from the store.")
        errors.add_metric([], float(self.store_errors))
        yield errors
        yield from _meter_metrics(self.meter.view())


def _by_state(name: str, doc: str, counts: dict[str, int]) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=["state"])
    for state, n in sorted(counts.items()):
        family.add_metric([state], float(n))
    return family


def _meter_metrics(v: ManagerView) -> Iterator[Metric]:
    ticks = CounterMetricFamily("andreas_ticks", "Reconciliation ticks run.")
    ticks.add_metric([], float(v.ticks))
    errors = CounterMetricFamily("andreas_tick_errors", "Ticks that failed (logged; retried "
                                 "with back-off).")
    errors.add_metric([], float(v.tick_errors))
    decisions = CounterMetricFamily("andreas_decisions", "Reschedulings by outcome: ok (a "
                                    "decision stored), error (policy error, infeasible plan, "
                                    "failure; the old plan is kept).", labels=["outcome"])
    for outcome, n in sorted(v.decisions.items()):
        decisions.add_metric([outcome], float(n))
    seconds = HistogramMetricFamily("andreas_decision_seconds", "Time the policy took per "
                                    "stored decision (snapshot and store writes excluded).",
                                    labels=["policy"])
    cumulative, running = [], 0
    for bound, n in zip((*map(_le, DECISION_BUCKETS_S), "+Inf"), v.decision_buckets):
        running += n
        cumulative.append((bound, float(running)))
    seconds.add_metric([v.policy], cumulative, v.decision_sum_s)
    yield from (ticks, errors, decisions, seconds)

    objective = GaugeMetricFamily("andreas_decision_objective", "The latest decision's "
                                  "objective value (objective: its name, e.g. f_obj).",
                                  labels=["policy", "objective"])
    if v.objective is not None:
        objective.add_metric([v.policy, v.objective_name], v.objective)
    last = GaugeMetricFamily("andreas_decision_timestamp_seconds", "When the latest "
                             "decision was made (Unix time).")
    if v.decision_t is not None:
        last.add_metric([], v.decision_t)
    power = GaugeMetricFamily("andreas_plan_node_power_watts", "Power the current plan "
                              "expects of the node with its planned busy GPUs.",
                              labels=["node"])
    cost = GaugeMetricFamily("andreas_plan_node_cost_per_hour", "Cost per hour the current "
                             "plan predicts for the node (power x PUE x price); compare "
                             "with the agents' measured energy rate (docs/METRICS.md).",
                             labels=["node"])
    for name, f in sorted(v.forecasts.items()):
        if f.power_w is not None:
            power.add_metric([name], f.power_w)
        if f.cost_per_hour is not None:
            cost.add_metric([name], f.cost_per_hour)
    yield from (objective, last, power, cost)
    if v.pue is not None and v.price_per_kwh is not None:
        pue = GaugeMetricFamily("andreas_energy_pue", "PUE of the current plan.")
        pue.add_metric([], v.pue)
        price = GaugeMetricFamily("andreas_energy_price_per_kwh", "Electricity price of the "
                                  "current plan (configured currency per kWh).")
        price.add_metric([], v.price_per_kwh)
        yield from (pue, price)


def _le(bound: float) -> str:
    return repr(float(bound))


def store_counts(store: Any) -> Callable[[], tuple[dict[str, int], dict[str, int]]]:
    """Jobs and nodes by state, read from ``store`` in one short session."""
    from andreas.store.jobs import count_by_state as jobs_by_state
    from andreas.store.nodes import count_by_state as nodes_by_state

    def read() -> tuple[dict[str, int], dict[str, int]]:
        with store.session() as s:
            jobs = {k.value: n for k, n in jobs_by_state(s).items()}
            nodes = {k.value: n for k, n in nodes_by_state(s).items()}
        return jobs, nodes

    return read


def manager_collector(manager: Any) -> ManagerCollector:
    """The collector of a running :class:`andreas.manager.manager.Manager`."""
    return ManagerCollector(meter=manager.meter, counts=store_counts(manager.store))
