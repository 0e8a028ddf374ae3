"""The agent's Prometheus metrics, built at scrape time from the running daemon.

A custom collector (in the manner of ``prometheus_client``'s process collector): its
inputs come through the constructor, and each scrape reads the current state once: the
:class:`agents.meter.Meter` totals, the inventory the sampling thread published, the
sampler's and delivery's counters and the spool's size. Nothing is updated on the hot
path for the exporter's sake, and the registry is private (never the library's global
one). Imported only when ``metrics_port`` is set; the metrics are listed in
docs/METRICS.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agents.delivery import DeliveryMode
from agents.meter import MeterView

if TYPE_CHECKING:
    from agents.daemon import Agent, AgentStats
    from agents.delivery import Delivery
    from agents.fence import Fence
    from agents.meter import Meter
    from agents.records import GpuInfo
    from agents.spool import Spool

MJ_PER_J = 1000.0


class AgentCollector(Collector):
    """The metrics of one agent.

    ``meter``: the totals (``view()``); ``inventory``: the GPUs the agent samples (objects
    with ``uuid``, ``index``, ``model``); ``unhealthy``: UUIDs that could not be read;
    ``stats``: the sampling loop's counters (``ticks``, ``overruns``, ``tick_errors``);
    ``delivery`` / ``spool``: None before the daemon started them; ``wall``: the clock
    the lag is measured on; ``started_wall``: the lag's origin before anything was stored.
    """

    def __init__(self, *, node: str, meter: Meter, inventory: Callable[[], Sequence[GpuInfo]],
                 unhealthy: Callable[[], frozenset[str]], stats: AgentStats,
                 delivery: Callable[[], Delivery | None], spool: Callable[[], Spool | None],
                 wall: Callable[[], float], started_wall: float,
                 fence: Callable[[], Fence | None] = lambda: None) -> None:
        self.node = node
        self.meter = meter
        self.inventory = inventory
        self.unhealthy = unhealthy
        self.stats = stats
        self.delivery = delivery
        self.spool = spool
        self.wall = wall
        self.started_wall = started_wall
        self.fence = fence

    def collect(self) -> Iterator[Metric]:
        view: MeterView = self.meter.view()
        yield from self._gpu_metrics(view)
        yield from self._host_metrics(view)
        yield from self._sampler_metrics(view)
        yield from self._spool_metrics()
        yield from self._delivery_metrics()
        yield from self._fence_metrics()

    def _gpu_metrics(self, view: MeterView) -> Iterator[Metric]:
        """Per GPU: identity, health, power, energy, gaps and the power limit in force."""
        node = self.node
        gpus = {g.uuid: g for g in self.inventory()}
        unhealthy = self.unhealthy()
        labels = ["node", "gpu"]

        info = GaugeMetricFamily("andreas_gpu_info", "GPUs the agent samples (value 1).",
                                 labels=["node", "gpu", "uuid", "model"])
        up = GaugeMetricFamily("andreas_gpu_up", "1 when the GPU answered at the last "
                               "attempt, 0 when it is lost (gaps are recorded).", labels=labels)
        for g in gpus.values():
            info.add_metric([node, str(g.index), g.uuid, g.model], 1.0)
            up.add_metric([node, str(g.index)], 0.0 if g.uuid in unhealthy else 1.0)
        power = GaugeMetricFamily("andreas_gpu_power_watts", "GPU power at the last sample "
                                  "(NVML instant power, else its 1-s average).", labels=labels)
        energy = CounterMetricFamily("andreas_gpu_energy_joules", "GPU energy since the agent "
                                     "started (NVML energy counter where the GPU has one).",
                                     labels=labels)
        gaps = CounterMetricFamily("andreas_gpu_gaps", "Intervals the GPU could not be read.",
                                   labels=labels)
        limit = GaugeMetricFamily("andreas_gpu_power_limit_watts", "The GPU's power limit "
                                  "in force, as andreas-powerd read it back (docs/"
                                  "power-limits.md).", labels=labels)
        for seen in view.gpus:
            gpu = gpus.get(seen.uuid)
            index = str(gpu.index) if gpu is not None else seen.uuid
            if seen.power_w is not None:
                power.add_metric([node, index], seen.power_w)
            energy.add_metric([node, index], seen.energy_mj / MJ_PER_J)
            gaps.add_metric([node, index], float(seen.gaps))
            if seen.power_limit_w is not None:
                limit.add_metric([node, index], seen.power_limit_w)
        yield from (info, up, power, energy, gaps, limit)

    def _host_metrics(self, view: MeterView) -> Iterator[Metric]:
        """The host's power and energy, and the energy attributed to each job."""
        node = self.node
        host_power = GaugeMetricFamily("andreas_host_power_watts", "Host (CPU package and "
                                       "DRAM, RAPL; else the host power model) power at the "
                                       "last sample.", labels=["node"])
        if view.host_power_w is not None:
            host_power.add_metric([node], view.host_power_w)
        host_energy = CounterMetricFamily("andreas_host_energy_joules", "Host energy since the "
                                          "agent started.", labels=["node"])
        host_energy.add_metric([node], view.host_energy_mj / MJ_PER_J)
        jobs = CounterMetricFamily("andreas_job_energy_joules", "Energy attributed to the job "
                                   "on this node since the agent started (its GPUs plus its "
                                   "share of host energy). The label is job_id: Prometheus "
                                   "owns 'job' (the scrape job).", labels=["node", "job_id"])
        for job, mj in view.jobs:
            jobs.add_metric([node, job], mj / MJ_PER_J)
        yield from (host_power, host_energy, jobs)

    def _sampler_metrics(self, view: MeterView) -> Iterator[Metric]:
        """The sampling loop's ticks, failures and overruns, and its last tick."""
        node = self.node
        stats = self.stats
        ticks = CounterMetricFamily("andreas_sampler_ticks", "Sampling intervals run.",
                                    labels=["node"])
        ticks.add_metric([node], float(stats.ticks))
        errors = CounterMetricFamily("andreas_sampler_errors", "Sampling intervals that failed "
                                     "(kind=tick) or started more than one interval late "
                                     "(kind=overrun).", labels=["node", "kind"])
        errors.add_metric([node, "tick"], float(stats.tick_errors))
        errors.add_metric([node, "overrun"], float(stats.overruns))
        last = GaugeMetricFamily("andreas_sampler_last_tick_timestamp_seconds",
                                 "When the last sampling interval ended (Unix time).",
                                 labels=["node"])
        if view.last_tick_wall is not None:
            last.add_metric([node], view.last_tick_wall)
        yield from (ticks, errors, last)

    def _spool_metrics(self) -> Iterator[Metric]:
        """The local spool's size and limit (none before the daemon started it)."""
        spool = self.spool()
        if spool is None:
            return
        node = self.node
        size = GaugeMetricFamily("andreas_spool_bytes", "Bytes in the local spool "
                                 "(records waiting for the database).", labels=["node"])
        size.add_metric([node], float(spool.bytes))
        limit = GaugeMetricFamily("andreas_spool_max_bytes", "The spool's limit; new "
                                  "records are refused (lost) above it.", labels=["node"])
        limit.add_metric([node], float(spool.max_bytes))
        pending = GaugeMetricFamily("andreas_spool_records", "Records in the spool not "
                                    "yet stored.", labels=["node"])
        pending.add_metric([node], float(spool.pending))
        yield from (size, limit, pending)

    def _delivery_metrics(self) -> Iterator[Metric]:
        """How far the database lags and what became of the records (none before the
        daemon started delivering)."""
        delivery = self.delivery()
        if delivery is None:
            return
        node = self.node
        s = delivery.stats
        lag = GaugeMetricFamily("andreas_delivery_lag_seconds", "Now minus the time of "
                                "the newest record stored in the database (since the "
                                "agent started while nothing is stored).", labels=["node"])
        stored = s.stored_t if s.stored_t is not None else self.started_wall
        lag.add_metric([node], max(0.0, self.wall() - stored))
        records = CounterMetricFamily("andreas_delivery_records", "Records by outcome: "
                                      "written directly, spooled, replayed from the "
                                      "spool, rejected by the database as data, refused "
                                      "by a full spool (lost).",
                                      labels=["node", "outcome"])
        for outcome in ("written", "spooled", "replayed", "rejected", "refused"):
            records.add_metric([node, outcome], float(getattr(s, outcome)))
        spooling = GaugeMetricFamily("andreas_delivery_spooling", "1 while the database "
                                     "is unreachable and records go to the spool.",
                                     labels=["node"])
        spooling.add_metric([node], 1.0 if s.mode is DeliveryMode.SPOOL else 0.0)
        yield from (lag, records, spooling)

    def _fence_metrics(self) -> Iterator[Metric]:
        """What the fence stopped here (none without a fence)."""
        fence = self.fence()
        if fence is None:
            return
        node = self.node
        f = fence.stats
        stops = CounterMetricFamily("andreas_fence_containers", "andreas containers the "
                                    "fence stopped here: SIGTERM sent (action=sigterm), "
                                    "then SIGKILL after their grace (action=sigkill).",
                                    labels=["node", "action"])
        stops.add_metric([node, "sigterm"], float(f.stopped))
        stops.add_metric([node, "sigkill"], float(f.killed))
        fenced = CounterMetricFamily("andreas_fence_self_fenced", "Times the store stayed "
                                     "unreachable for fence_after_s and every andreas "
                                     "container here was stopped.", labels=["node"])
        fenced.add_metric([node], float(f.self_fenced))
        yield from (stops, fenced)


def agent_collector(agent: Agent) -> AgentCollector:
    """The collector of a started :class:`agents.daemon.Agent`."""
    return AgentCollector(
        node=agent.cfg.node_name, meter=agent.meter,
        inventory=lambda: getattr(agent.published_spec(), "gpus", ()),
        unhealthy=lambda: getattr(agent.published_spec(), "unhealthy", frozenset()),
        stats=agent.stats, delivery=lambda: agent.delivery, spool=lambda: agent.spool,
        wall=agent.wall, started_wall=agent.started_wall, fence=lambda: agent.fence)
