"""``systemd/grafana-dashboard.json`` parses, and every metric it queries is one the agent's
or the manager's exporter really defines (rendered from the collectors, so a renamed
metric breaks this test, not an operator's dashboard)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agents.attribution import JobShare
from agents.delivery import DeliveryStats
from agents.meter import Meter
from andreas.manager.exporter import ManagerCollector
from andreas.manager.meter import ManagerMeter
from andreas.metrics import registry_of, render

from .test_collectors import DOC, FakeDelivery, FakeSpool, agent_collector, gpu, host

DASHBOARD = Path(__file__).resolve().parents[2] / "systemd" / "grafana-dashboard.json"
METRIC = re.compile(r"\b((?:andreas|process)_[a-z_]+)\b")


def exported_names() -> set[str]:
    """Every sample name the two exporters produce with all their families filled."""
    meter = Meter()
    share = JobShare(job_id="j", attempt=1, gpu_uuids=("GPU-x-0",), gpu_energy_mj=1,
                     host_energy_mj=1)
    meter.observe(1.0, [gpu("GPU-x-0", 1.0, 50.0, 50_000)], host(1.0, 100.0, 100_000), [share])
    manager = ManagerMeter("rg")
    manager.decision(seconds=0.1, objective=1.0, objective_name="f_obj", t=1.0, doc=DOC)
    collectors = [agent_collector(meter, delivery=FakeDelivery(DeliveryStats(stored_t=1.0)),
                                  spool=FakeSpool()),
                  ManagerCollector(meter=manager, counts=lambda: ({"queued": 1}, {"up": 1}))]
    text = render(registry_of(collectors)).decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line and not line.startswith("#")}


def queries(doc: dict) -> list[str]:
    out = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    out += [v["definition"] for v in doc["templating"]["list"] if "definition" in v]
    return out


def test_every_queried_metric_is_exported():
    doc = json.loads(DASHBOARD.read_text())
    exprs = queries(doc)
    assert len(exprs) >= 10
    used = {m for e in exprs for m in METRIC.findall(e)}
    missing = used - exported_names()
    assert not missing, f"the dashboard queries metrics no exporter defines: {sorted(missing)}"
    # what the issue asks the dashboard to show
    for wanted in ("andreas_gpu_power_watts", "andreas_gpu_energy_joules_total",
                   "andreas_jobs", "andreas_decision_seconds_bucket",
                   "andreas_tick_errors_total"):
        assert wanted in used, wanted


def test_panels_are_well_formed():
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for p in doc["panels"]:
        assert p["datasource"]["uid"] == "${datasource}"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and all(t["expr"].strip() for t in p["targets"])
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24
