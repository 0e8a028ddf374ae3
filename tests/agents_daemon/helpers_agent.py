"""Shared helpers of the agent daemon tests: a migrated SQLite store, GPU entries with
known values, and what the database holds."""

from __future__ import annotations

import sqlalchemy as sa

from agents.records import GpuInfo
from andreas.store.registry import NodeSpec
from andreas.store import migrate
from andreas.store.engine import make_engine

NODE = "node-t"
UUIDS = ("GPU-t-0", "GPU-t-1")


def sqlite_store(tmp_path, name: str = "agent.db") -> str:
    url = migrate.upgrade_url(f"sqlite:///{tmp_path / name}")
    return url


def spec(node: str = NODE, uuids: tuple[str, ...] = UUIDS) -> NodeSpec:
    gpus = tuple(GpuInfo(uuid=u, index=i, model="Tesla V100-PCIE-16GB", memory_mib=16384,
                         power_limit_w=250.0, has_energy_counter=True)
                 for i, u in enumerate(uuids))
    return NodeSpec(name=node, docker_endpoint=f"ssh://{node}", gpu_type="V100", gpus=gpus)


def power_of(i: int) -> float:
    """A power value that is exact in a FLOAT column (multiple of 0.25 W)."""
    return 40.0 + (i * 37 % 800) / 4.0


def gpu_entry(i: int, uuids: tuple[str, ...] = UUIDS, t0: float = 1.8e9) -> dict:
    uuid = uuids[i % len(uuids)]
    return {"kind": "gpu", "uuid": uuid, "t": t0 + i // len(uuids), "interval_s": 1.0,
            "power_w": power_of(i), "power_source": "instant", "energy_mj": int(power_of(i) * 1000),
            "energy_source": "counter", "utilization": 50.0, "memory_used_mib": 100,
            "pids": [], "counter_reset": False, "busy_gpus": 1}


def stored(url: str, node: str = NODE) -> tuple[int, float, int, int]:
    """(raw samples, sum of power, sum of energy, samples counted in the minute aggregates)
    of the node: every sample exactly once means the two counts agree and match."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            node_id = conn.execute(sa.text("SELECT id FROM nodes WHERE name = :n"),
                                   {"n": node}).scalar_one()
            n, p, e = conn.execute(sa.text(
                "SELECT COUNT(*), COALESCE(SUM(power_w), 0), COALESCE(SUM(energy_mj), 0) "
                "FROM power_samples WHERE node_id = :n"), {"n": node_id}).one()
            agg = conn.execute(sa.text(
                "SELECT COALESCE(SUM(samples), 0) FROM power_minutes WHERE node_id = :n"),
                {"n": node_id}).scalar_one()
    finally:
        engine.dispose()
    return int(n), float(p), int(e), int(agg)
