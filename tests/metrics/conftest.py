"""The private Prometheus server of ``scripts/test.sh`` (``scripts/prometheus-test-server.sh``).

A test that uses the ``prometheus`` fixture gets the marker ``prometheus`` (tests/conftest.py)
and FAILS, never skips, when the server is not there: ``scripts/test.sh`` provides it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

URL_ENV = "ANDREAS_TEST_PROMETHEUS_URL"
TARGETS_ENV = "ANDREAS_TEST_PROMETHEUS_TARGETS"


@dataclass
class Prometheus:
    """The server's HTTP API and the file_sd directory it scrapes targets from."""

    url: str
    targets_dir: Path
    label: str                    # every target of this test carries test=<label>

    def scrape(self, *addresses: str) -> Path:
        """Have the server scrape ``addresses`` (host:port) every second from now on."""
        path = self.targets_dir / f"{self.label}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": list(addresses), "labels": {"test": self.label}}]))
        tmp.rename(path)              # prometheus reads *.json: never a half-written file
        return path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expr: str, ok: Any, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """Query until ``ok(result)`` holds; the last result is in the failure message."""
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if ok(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr}: still {result} after {timeout_s:g} s")


def values(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    """A result vector as {value of ``label``: sample value}."""
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


@pytest.fixture
def prometheus(request: pytest.FixtureRequest) -> Iterator[Prometheus]:
    url, targets = os.environ.get(URL_ENV), os.environ.get(TARGETS_ENV)
    if not url or not targets:
        ci = " (CI=true: the test command must provide it)" if os.environ.get("CI") else ""
        pytest.fail(f"{URL_ENV} / {TARGETS_ENV} are not set{ci}: the metrics tests need a "
                    "real Prometheus server; run `bash scripts/test.sh`, which installs and "
                    "starts a private one and exports them", pytrace=False)
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=5):
            pass
    except OSError as e:
        pytest.fail(f"Prometheus at {url} does not answer ({e}); run `bash scripts/test.sh`",
                    pytrace=False)
    label = f"{request.node.name}-{os.getpid()}-{time.monotonic_ns()}"
    server = Prometheus(url=url, targets_dir=Path(targets), label=label)
    yield server
    (server.targets_dir / f"{label}.json").unlink(missing_ok=True)
