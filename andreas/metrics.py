"""The ``/metrics`` HTTP endpoint shared by the agent and the manager.

Each daemon builds a custom collector over its own state (``agents/exporter.py``,
``andreas/manager/exporter.py``); :func:`serve` puts it, with the process collector
(``process_cpu_seconds_total``, ``process_resident_memory_bytes``, ...), in a *private*
registry and serves it from a daemon thread. Importing this module imports
``prometheus_client`` (about 0.1 s and a few MB), so the daemons import it only when a
metrics port is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from andreas.errors import AndreasError

log = logging.getLogger(__name__)


class MetricsUnavailable(AndreasError):
    """The metrics port cannot be opened (in use, not permitted, bad address)."""


@dataclass(frozen=True, kw_only=True)
class MetricsServer:
    """A running endpoint; :meth:`close` stops it (idempotent)."""

    address: str
    port: int
    registry: CollectorRegistry
    server: Any
    thread: Any

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5.0)


def registry_of(collectors: Iterable[Collector], *, process: bool = True) -> CollectorRegistry:
    """A private registry with ``collectors`` (and this process's CPU and memory)."""
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    if process:
        ProcessCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The text exposition format, as a scrape gets it (tests, the benchmark)."""
    return generate_latest(registry)


def serve(collectors: Iterable[Collector], *, address: str, port: int,
          field: str = "metrics_port") -> MetricsServer:
    """Serve ``/metrics`` on ``address:port`` from a daemon thread. A port that cannot be
    opened is a one-line :class:`MetricsUnavailable` naming ``field``."""
    registry = registry_of(collectors)
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as e:
        raise MetricsUnavailable(f"{field} {port}: cannot listen on {address}:{port} "
                                 f"({e.strerror or e})") from None
    running = MetricsServer(address=address, port=server.server_port, registry=registry,
                            server=server, thread=thread)
    log.info("metrics at %s", running.url)
    return running
