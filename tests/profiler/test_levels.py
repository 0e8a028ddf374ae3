"""``andreas profile`` with power levels (issue 30): after the GPU-count runs, one run of
one GPU per level below the default, labelled with its limit for the node agent; the
levels fitted from the agent's samples at each limit into ``app_levels``; a node that
cannot set limits, or ``--no-power-levels``, gets no level run. SQLite and MariaDB."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from andreas.job.names import LABEL_POWER_LIMIT, container_labels, job_labels
from andreas.profiler.run import ProfileRequest, profile_application
from andreas.store.models import AppLevel, AppModel, AppProfile, Gpu
from andreas.store.nodes import set_power_caps
from andreas.store.profiles import ProfileSource, app_levels
from andreas.store.samples import PowerRow, insert_power_samples
from tests.manager.helpers import add_node
from tests.profiler.fakes import ScriptedExecutor

NOW = 1_800_000_000.0
CAPS = {"settable": True, "min_w": 100.0, "max_w": 250.0, "default_w": 250.0}
LEVELS = (250.0, 200.0, 150.0, 125.0)
# per limit measured: epochs stretched by, GPU watts drawn (125 W is not measured: fitted)
AT = {250.0: (1.00, 220.0), 200.0: (1.05, 185.0), 150.0: (1.18, 145.0)}


def epoch_s(g: int, epoch: int) -> float:
    return 40.0 / g * (1.5 if epoch == 1 else 1.0)


def agent_samples(store, node_id: int):
    """What the node agent stores while a run goes: a sample a second of its GPUs at the
    run's limit, drawing what AT says for it."""
    def on_window(_node, request, t0: float, t1: float) -> None:
        limit = request.power_limit_w or 250.0
        if limit not in AT:
            return                   # a level the fake's table lacks: no sample
        with store.session() as s:
            ids = s.execute(select(Gpu.id).where(Gpu.node_id == node_id, Gpu.uuid.in_(
                request.gpu_uuids))).scalars().all()
            insert_power_samples(s, [PowerRow(i, t, node_id, len(ids), AT[limit][1],
                                              power_limit_w=limit)
                                     for i in ids for t in np.arange(t0 + 1.0, t1, 1.0)])
    return on_window


def profile(store, executor, levels=LEVELS, **kw):
    request = ProfileRequest(image="registry.example/new:1", app="newapp", epochs=3,
                             **{"nodes": ("p",), **kw})
    return profile_application(store, executor, request, clock=lambda: NOW,
                               rng=np.random.default_rng(1), sleep=lambda _s: None,
                               levels_of=lambda _s, _t: levels, samples_wait_s=1.0)


def test_each_level_is_run_at_its_limit_and_the_curve_stored(pstore):
    node_id = add_node(pstore, "p", gpus=2)
    with pstore.session() as s:
        set_power_caps(s, "p", CAPS)
    fake = ScriptedExecutor(epoch_s, at_limit=lambda w: AT.get(w or 250.0, (1.3, 0))[0],
                            on_window=agent_samples(pstore, node_id))
    [result] = profile(pstore, fake)
    assert [(len(r.gpu_uuids), r.power_limit_w) for r in fake.requests] == [
        (1, None), (2, None), (1, 200.0), (1, 150.0), (1, 125.0)]
    assert [r.status for r in result.level_runs] == ["ok", "ok", "ok"]
    with pstore.session() as s:
        rows = {r.limit_w: r for r in app_levels(s, ["newapp"])["newapp"]["V100"]}
    assert set(rows) == set(LEVELS)
    for limit, (factor, watts) in AT.items():
        assert rows[limit].time_factor == pytest.approx(factor)
        assert rows[limit].gpu_power_w == pytest.approx(watts)
        assert rows[limit].source == "profiler"
    # 125 W ran too, but the fake's AT has no draw for it: no sample, so it is fitted
    assert rows[125.0].source == "fit" and rows[125.0].time_factor > AT[150.0][0]
    assert rows[125.0].gpu_power_w < AT[150.0][1]
    assert [f.limit_w for f in result.levels] == list(LEVELS)
    with pstore.session() as s:                # every stored source reads back as one
        stored = {v for table in (AppProfile, AppModel, AppLevel)
                  for v in s.execute(select(table.source).distinct()).scalars()}
    assert {ProfileSource(v) for v in stored} == {ProfileSource.PROFILER, ProfileSource.FIT}


def test_no_level_runs_where_limits_cannot_be_set_or_are_not_wanted(pstore):
    node_id = add_node(pstore, "p", gpus=2)
    fake = ScriptedExecutor(epoch_s, on_window=agent_samples(pstore, node_id))
    for levels, wanted in (((), True), ((250.0,), True), (LEVELS, False)):
        before = len(fake.requests)
        [result] = profile(pstore, fake, levels=levels, power_levels=wanted)
        assert [r.power_limit_w for r in fake.requests[before:]] == [None, None]
        assert result.level_runs == () and result.levels == ()
    with pstore.session() as s:
        assert app_levels(s, ["newapp"]) == {}


def test_without_the_agents_samples_no_level_is_stored_and_nothing_fails(pstore, caplog):
    add_node(pstore, "p", gpus=1)
    fake = ScriptedExecutor(epoch_s, at_limit=lambda w: AT[w or 250.0][0])   # no agent
    [result] = profile(pstore, fake, levels=(250.0, 200.0))
    assert result.fit is not None and [r.status for r in result.level_runs] == ["ok"]
    assert result.levels == ()
    with pstore.session() as s:
        assert app_levels(s, ["newapp"]) == {}
    assert "no power measured at the default limit" in caplog.text


def test_the_limit_travels_as_a_container_label():
    labels = container_labels("profile-x", 1, ("GPU-a",), power_limit_w=175.0)
    assert labels[LABEL_POWER_LIMIT] == "175"
    assert job_labels(labels).power_limit_w == 175.0
    assert job_labels(container_labels("j", 1)).power_limit_w is None
    for bad in (0.0, -5.0, float("nan"), 1e9):
        with pytest.raises(ValueError, match="power_limit_w"):
            container_labels("j", 1, power_limit_w=bad)
    with pytest.raises(ValueError, match=LABEL_POWER_LIMIT):
        job_labels({**container_labels("j", 1), LABEL_POWER_LIMIT: "lots"})
