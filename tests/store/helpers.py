"""The one set of row helpers of the tests (store, manager, jobs, reports, profiler): rows
with unique names by default, so tests can share a database."""

from __future__ import annotations

import itertools
import os

import pytest
import sqlalchemy as sa

from andreas.store import Gpu, Job, Node, NodeState, Store

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{os.getpid()}-{next(_names)}"


def add_node(store: Store, gpus: int = 8, gpu_type: str = "V100",
             energy_counter: bool = True, *, name: str | None = None,
             state: NodeState = NodeState.DOWN, profiling: bool = False, fake: bool = False,
             unhealthy: tuple[int, ...] = (), power_limit_w: float = 300.0
             ) -> tuple[str, int, list[int]]:
    """A node with ``gpus`` GPUs, ``down`` until its agent starts as a registered node is
    (``fake``: the fake NVML's UUIDs; ``unhealthy``: indexes of GPUs marked unhealthy);
    returns (name, node id, GPU ids by index)."""
    name = name or unique("node")
    prefix = "GPU-fake-" if fake else "GPU-"
    with store.session() as s:
        node = Node(name=name, docker_endpoint=f"ssh://{name}", gpu_type=gpu_type,
                    gpu_count=gpus, state=state, profiling=profiling)
        node.gpus = [Gpu(index=i, uuid=f"{prefix}{name}-{i}", model=gpu_type, memory_mib=16384,
                         power_limit_w=power_limit_w, has_energy_counter=energy_counter,
                         healthy=i not in unhealthy)
                     for i in range(gpus)]
        s.add(node)
        s.flush()
        return name, node.id, [g.id for g in node.gpus]


def add_job(store: Store, **spec) -> str:
    """A job row (``id`` or a unique one); any column may be given."""
    job_id = spec.pop("id", None) or unique("job")
    values = dict(image="registry.example/train:1", command=["python", "train.py"],
                  env={"LR": "0.1"}, epochs=10, submit_s=0.0, due_s=3600.0, weight=1.0,
                  application="resnet50")
    values.update(spec)
    with store.session() as s:
        s.add(Job(id=job_id, **values))
    return job_id


def assert_minutes_match_raw(store, gpu_ids, since: float = -1e300):
    """The aggregates hold exactly the raw samples: per (GPU, minute, busy count), the
    sample count, energy and power sums agree (for minutes from ``since`` on)."""
    ids = ", ".join(map(str, gpu_ids))
    with store.session() as s:
        raw = s.execute(sa.text(
            "SELECT gpu_id, floor(t / 60) * 60, busy_gpus, COUNT(*), "
            f"COALESCE(SUM(energy_mj), 0), SUM(power_w) FROM power_samples WHERE gpu_id IN ({ids}) "
            "AND t >= :since GROUP BY gpu_id, floor(t / 60) * 60, busy_gpus"), {"since": since}
        ).all()
        agg = s.execute(sa.text(
            "SELECT gpu_id, minute_s, busy_gpus, SUM(samples), SUM(energy_mj), "
            f"SUM(power_sum_w) FROM power_minutes WHERE gpu_id IN ({ids}) AND minute_s >= :since "
            "GROUP BY gpu_id, minute_s, busy_gpus"), {"since": since}).all()
    as_map = lambda rows: {(int(g), float(m), int(b)): (int(n), int(e), float(p))  # noqa: E731
                           for g, m, b, n, e, p in rows}
    raw, agg = as_map(raw), as_map(agg)
    assert raw.keys() == agg.keys()
    for key in raw:
        assert raw[key][:2] == agg[key][:2], key
        assert raw[key][2] == pytest.approx(agg[key][2], rel=1e-9), key
