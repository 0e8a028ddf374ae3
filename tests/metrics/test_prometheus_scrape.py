"""A real Prometheus scrapes a real agent (fake GPUs) and a real manager (dry run, SQLite)
and answers through its HTTP API with what they measured and decided."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ports import free_port
from andreas.profiles import load_profiles
from andreas.store import migrate

from .conftest import Prometheus, values

ROOT = Path(__file__).resolve().parents[2]




def sqlite_store(path: Path) -> str:
    url = migrate.upgrade_url(f"sqlite:///{path}")
    return url


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("ANDREAS_")}
    out["PYTHONPATH"] = str(ROOT)
    out.update(extra)
    return out


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    port = free_port()
    url = sqlite_store(tmp_path / "agent.db")
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nnode_name = "prom-node"\ndocker_url = ""\ninterval_s = 0.25\n'
                   f'min_energy_interval_s = 0.25\n[store]\nurl = "{url}"\n'
                   f'[spool]\npath = "{tmp_path / "spool"}"\n')
    proc = subprocess.Popen([sys.executable, "-c", "from agents.cli import main; main()",
                             "--config", str(cfg), "--fake-gpus", "2xV100",
                             "--metrics-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    yield proc, port
    err = stop(proc)
    assert proc.returncode == 0, err


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int, str]]:
    port = free_port()
    url = sqlite_store(tmp_path / "manager.db")
    cfg = tmp_path / "andreas.toml"
    cfg.write_text(f"[manager]\npoll_s = 0.2\nmetrics_port = {port}\n")
    e = env(ANDREAS_DB_URL=url, ANDREAS_CONFIG=str(cfg))
    for n in range(3):
        done = subprocess.run([sys.executable, "-m", "andreas", "submit", "example/train:1",
                               "--epochs", "5", "--due", f"+{n + 1}h", "--weight", "0.01"],
                              capture_output=True, text=True, env=e)
        assert done.returncode == 0, done.stderr
    proc = subprocess.Popen([sys.executable, "-m", "andreas", "manager", "run", "--dry-run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    yield proc, port, url
    err = stop(proc)
    assert proc.returncode == 0, err


def test_prometheus_scrapes_the_agent_and_the_manager(prometheus: Prometheus, agent, manager):
    agent_proc, agent_port = agent
    manager_proc, manager_port, _ = manager
    prometheus.scrape(f"127.0.0.1:{agent_port}", f"127.0.0.1:{manager_port}")
    sel = f'test="{prometheus.label}"'

    up = prometheus.wait_for(f"up{{{sel}}}", lambda r: len(r) == 2 and all(
        v == 1.0 for v in values(r, "instance").values()), timeout_s=120)
    assert set(values(up, "instance")) == {f"127.0.0.1:{agent_port}",
                                           f"127.0.0.1:{manager_port}"}

    # The agent: one power series per fake GPU, idle V100s at their profile's idle power.
    power = values(prometheus.query(f"andreas_gpu_power_watts{{{sel}}}"), "gpu")
    assert set(power) == {"0", "1"}
    idle_w = load_profiles().gpus["V100"].idle_w
    assert all(w == pytest.approx(idle_w, rel=0.2) for w in power.values()), power
    # Energy counters grow, at the rate the power says (J/s = W; irate: the last two
    # scrapes, no extrapolation over a range longer than the series).
    rate = prometheus.wait_for(f"irate(andreas_gpu_energy_joules_total{{{sel}}}[5s])",
                               lambda r: len(r) == 2)
    assert all(w == pytest.approx(idle_w, rel=0.25) for w in values(rate, "gpu").values()), \
        (rate, prometheus.query(f"andreas_gpu_energy_joules_total{{{sel}}}[10s]"))
    host = prometheus.query(f"andreas_host_power_watts{{{sel}}}")
    assert len(host) == 1 and float(host[0]["value"][1]) > 0
    assert values(prometheus.query(f"andreas_sampler_errors_total{{{sel}}}"), "kind") == {
        "tick": 0.0, "overrun": 0.0}
    lag = prometheus.query(f"andreas_delivery_lag_seconds{{{sel}}}")
    assert 0 <= float(lag[0]["value"][1]) < 10      # SQLite is there: delivered at once
    assert float(prometheus.query(f"andreas_spool_bytes{{{sel}}}")[0]["value"][1]) == 0

    # The manager: the three submitted jobs wait (its store has no node), one decision at
    # least, no failed tick.
    jobs = values(prometheus.wait_for(f"andreas_jobs{{{sel}}}", lambda r: len(r) >= 7), "state")
    assert jobs["queued"] == 3 and sum(jobs.values()) == 3
    nodes = values(prometheus.query(f"andreas_nodes{{{sel}}}"), "state")
    assert {"up", "draining", "down"} <= set(nodes) and sum(nodes.values()) == 0
    count = prometheus.wait_for(f"andreas_decision_seconds_count{{{sel}}}",
                                lambda r: r and float(r[0]["value"][1]) >= 1)
    assert float(count[0]["value"][1]) >= 1 and count[0]["metric"]["policy"] == "rg"
    assert float(prometheus.query(f"andreas_tick_errors_total{{{sel}}}")[0]["value"][1]) == 0
    ticks = prometheus.wait_for(f"andreas_ticks_total{{{sel}}}",
                                lambda r: r and float(r[0]["value"][1]) >= 3)
    assert float(ticks[0]["value"][1]) >= 3
    assert agent_proc.poll() is None and manager_proc.poll() is None
