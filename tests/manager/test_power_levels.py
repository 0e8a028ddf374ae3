"""GPU power limits in the manager (issue 30): automatic profiling measures each level in a
short run at that limit and fits the curve; plans carry the limit, attempts record it, a
changed level is written in place; a node that cannot set limits is planned at the
default. SQLite and MariaDB."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from andreas.config import ProfilerSettings
from andreas.manager.profiling import Profiling
from andreas.store import insert_epoch_events
from andreas.store.decisions import latest_decision
from andreas.store.models import Gpu, JobState
from andreas.store.nodes import set_power_caps
from andreas.store.profiles import app_levels
from andreas.store.samples import PowerRow, insert_power_samples
from tests.manager.helpers import add_job, add_node, attempts, make, state_of

APP = "brand-new-app"
CAPS = {"settable": True, "min_w": 100.0, "max_w": 250.0, "default_w": 250.0}
# epoch seconds (after a warm-up epoch) and GPU watts the fake run measures at each limit
AT = {250.0: (10.0, 220.0), 225.0: (10.2, 205.0), 200.0: (10.5, 185.0),
      175.0: (11.0, 166.0), 150.0: (11.8, 145.0)}


def _run(store, clock, job_id, attempt, node_id, gpus, limit, first, index=0):
    """The agent's rows of one run: 3 epochs and a power sample every second."""
    seconds, watts = AT[limit if limit is not None else 250.0]
    t0 = clock()
    durations = [3 * seconds, seconds, seconds]
    with store.session() as s:
        insert_epoch_events(s, [dict(job_id=job_id, attempt=attempt, epoch=first + k,
                                     start_s=t0 + sum(durations[:k]),
                                     end_s=t0 + sum(durations[:k + 1]), node_id=node_id,
                                     gpu_type="V100", gpus=gpus) for k in range(3)])
        gpu = s.execute(select(Gpu.id).where(Gpu.node_id == node_id, Gpu.index == index)
                        ).scalar_one()
        insert_power_samples(s, [PowerRow(gpu, t0 + k, node_id, 1, watts,
                                          power_limit_w=limit if limit else 250.0)
                                 for k in range(1, int(sum(durations)))])
    clock.advance(sum(durations) + 5)


def test_profiling_measures_each_power_level_and_fits_the_curve(mstore):
    p1 = add_node(mstore, "p1", gpus=2, profiling=True)
    add_node(mstore, "n1", gpus=2)
    with mstore.session() as s:
        set_power_caps(s, "p1", CAPS)
        set_power_caps(s, "n1", CAPS)
    add_job(mstore, "a", application=APP, epochs=40, submit_s=0.0, due_s=1e9, weight=1e-6)
    m, ex, clock = make(mstore, policy="rg")
    m.profiling = Profiling(ProfilerSettings(epochs=3), m.estimator)
    m.tick()
    first = 1
    seen = []
    for _ in range(8):                      # 2 GPU counts, then 4 levels below 250 W
        a = attempts(mstore, "a")[-1]
        if not a.profiling or a.end_s is not None:
            break
        seen.append((len(a.gpu_ids), a.power_limit_w))
        _run(mstore, clock, "a", a.attempt, p1, len(a.gpu_ids), a.power_limit_w, first,
             index=a.gpu_ids[0])
        first += 3
        for _ in range(4):
            m.tick()
    assert seen == [(1, None), (2, None), (1, 225.0), (1, 200.0), (1, 175.0), (1, 150.0)]
    with mstore.session() as s:
        rows = app_levels(s, [APP])[APP]["V100"]
    got = {r.limit_w: (r.time_factor, r.gpu_power_w, r.source) for r in rows}
    assert set(got) == {250.0, 225.0, 200.0, 175.0, 150.0}
    for limit, (seconds, watts) in AT.items():
        factor, power, source = got[limit]
        assert factor == pytest.approx(seconds / 10.0) and power == pytest.approx(watts)
        assert source == "profiler"
    # planned now: with a far due date, below the default, and the attempt records it
    assert state_of(mstore, "a") is JobState.RUNNING
    last = attempts(mstore, "a")[-1]
    with mstore.session() as s:
        doc = latest_decision(s).plan
    (entry,) = [x for x in doc["assignments"] if x["job"] == "a"]
    assert entry["power_limit_w"] < 250.0 and last.power_limit_w == entry["power_limit_w"]
    assert not last.profiling


def test_a_node_that_cannot_set_limits_is_planned_at_the_default(mstore):
    add_node(mstore, "n1", gpus=2)
    with mstore.session() as s:
        set_power_caps(s, "n1", {"settable": False, "why": "privileged daemon not reachable"})
    add_job(mstore, "z", application="resnet50-imagenet", epochs=5, due_s=1e9, weight=1e-6)
    m, ex, clock = make(mstore, policy="rg")
    m.tick()
    with mstore.session() as s:
        doc = latest_decision(s).plan
    (entry,) = [x for x in doc["assignments"] if x["job"] == "z"]
    assert "power_limit_w" not in entry
    assert attempts(mstore, "z")[-1].power_limit_w is None


def test_a_changed_level_is_written_in_place_and_the_job_keeps_running(mstore):
    add_node(mstore, "n1", gpus=2)
    with mstore.session() as s:
        set_power_caps(s, "n1", CAPS)
    add_job(mstore, "r", application="resnet50-imagenet", epochs=5, due_s=1e9, weight=1e-6)
    m, ex, clock = make(mstore, policy="rg", power_levels=False)
    m.tick()
    (a,) = attempts(mstore, "r")
    assert a.power_limit_w is None and state_of(mstore, "r") is JobState.RUNNING
    m2, _, _ = make(mstore, policy="rg", clock=clock, executor=ex)     # levels on
    m2.tick()
    m2.reschedule("period")
    m2.tick()
    (a,) = attempts(mstore, "r")                     # the same attempt: no restart
    assert a.end_s is None and a.power_limit_w is not None and a.power_limit_w < 250.0


def test_a_profile_level_outside_the_nodes_range_is_one_line_and_not_planned(caplog):
    import logging

    from andreas.manager.levels import node_limits
    from andreas.model import Node
    from andreas.profiles import load_profiles

    node = Node(name="n9", gpu_type="V100", gpus=2, power_w=(270.0, 505.0, 740.0))
    caps = {"settable": True, "min_w": 160.0, "max_w": 250.0, "default_w": 250.0}
    with caplog.at_level(logging.WARNING, logger="andreas.manager.levels"):
        first = node_limits(node, caps, load_profiles())
        again = node_limits(node, caps, load_profiles())
    assert first == again and first.levels_w == (250.0, 225.0, 200.0, 175.0)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "node n9: power level 150 W" in lines[0]
    assert "outside the GPU's range [160, 250] W" in lines[0]
    assert node_limits(node, {"settable": False, "why": "x"}, load_profiles()) is None
