"""Store -> snapshot: nodes, jobs, progress, and the sources of power and epoch times."""

from __future__ import annotations

import statistics

import pytest
from sqlalchemy import select

from andreas.manager.estimates import Estimator, NodeHardware
from andreas.manager.snapshot import build_snapshot
from andreas.manager.state import load_state
from andreas.model import Config
from andreas.profiles import load_profiles
from andreas.store import (AppModel, AppProfile, Gpu, HostRow, JobAttempt, JobState, NodeState,
                           PowerRow,
                           insert_epoch_events, insert_host_samples, insert_power_samples,
                           transition)
from tests.manager.helpers import add_job, add_node, job, settings

NOW = 1_000_000.0
PROFILES = load_profiles()


def build(store, *, unreachable=(), **manager):
    cfg = settings(**manager).manager
    with store.session() as s:
        return build_snapshot(s, load_state(s), Estimator(cfg), cfg, NOW,
                              unreachable=unreachable)


def gpu_ids(store, node_id):
    with store.session() as s:
        return list(s.scalars(select(Gpu.id).where(Gpu.node_id == node_id).order_by(Gpu.index)))


def measure(store, node_id, busy, gpu_w, host_w, n, t0=None):
    t0 = NOW - 3600 + 600 * busy if t0 is None else t0
    ids = gpu_ids(store, node_id)
    with store.session() as s:
        insert_power_samples(s, [PowerRow(g, t0 + k, node_id, busy, gpu_w)
                                 for g in ids for k in range(n)])
        if host_w is not None:
            insert_host_samples(s, [HostRow(node_id, t0 + k, busy, 10.0, 1000, host_w)
                                    for k in range(n)])


def test_nodes_schedulable_capacity_and_profile_power(mstore):
    add_node(mstore, "up", gpus=4, unhealthy=(3,))
    add_node(mstore, "drain", gpus=2, state=NodeState.DRAINING)
    add_node(mstore, "prof", gpus=2, profiling=True)
    add_node(mstore, "gone", gpus=2)
    build_ = build(mstore, unreachable=("gone",))
    (node,) = build_.snapshot.nodes
    assert node.name == "up" and node.gpus == 3                 # one GPU unhealthy
    assert node.power_w == PROFILES.node_power_w("V100", 4)[:4]
    curve = build_.curves["up"]
    assert curve.source == "profiles" and curve.samples == 0


def test_measured_power_replaces_profiles_per_g_with_enough_samples(mstore):
    node_id = add_node(mstore, "n", gpus=2)
    measure(mstore, node_id, 0, 40.0, 200.0, 5)       # enough (min_power_samples = 3)
    measure(mstore, node_id, 1, 150.0, None, 5)       # no host meter: profiles' host power
    measure(mstore, node_id, 2, 240.0, 400.0, 1)      # too few samples
    curve = build(mstore).curves["n"]
    host = PROFILES.host("V100")
    assert curve.power_w[0] == pytest.approx(2 * 40.0 + 200.0)
    assert curve.power_w[1] == pytest.approx(2 * 150.0 + host.idle_w
                                             + (host.busy_w - host.idle_w) / 2)
    assert curve.power_w[2] == PROFILES.node_power_w("V100", 2)[2]
    assert curve.sources == ("measured", "measured", "profiles") and curve.source == "mixed"
    assert curve.samples_per_g == (10, 10, 0)
    old = Estimator(settings().manager).power_curves(
        mstore.engine.connect(), [NodeHardware(id=node_id, name="n", gpu_type="V100", gpus=2)],
        NOW + 2 * 86400)
    assert old["n"].source == "profiles"                # outside the 24 h window


def test_unknown_gpu_type_gets_a_default_curve(mstore):
    add_node(mstore, "x", gpus=2, gpu_type="H100-imaginary")
    curve = build(mstore).curves["x"]
    assert curve.source == "default" and curve.power_w[2] > curve.power_w[0] > 0


def test_jobs_progress_and_running_config(mstore):
    node_id = add_node(mstore, "n", gpus=4)
    add_job(mstore, "q", max_gpus=2, application="vgg19")
    add_job(mstore, "r", epochs=10)
    with mstore.session() as s:
        s.add(JobAttempt(job_id="r", attempt=1, node_id=node_id, gpu_ids=[0, 1], start_s=NOW))
        s.flush()
        transition(s, "r", JobState.RUNNING)
        insert_epoch_events(s, [dict(job_id="r", attempt=1, epoch=e, start_s=NOW + e,
                                     end_s=NOW + e + 0.5, node_id=node_id, gpu_type="V100",
                                     gpus=2) for e in (1, 2, 3)])
    snap = build(mstore).snapshot
    jobs = {j.id: j for j in snap.jobs}
    assert jobs["q"].running is None and len(jobs["q"].epoch_time_s["V100"]) == 2
    assert jobs["q"].epoch_time_s["V100"] == PROFILES.epoch_times("vgg19", "V100", 2)
    assert jobs["r"].epoch_time_s["V100"][1] == 0.5     # measured: 3 epochs on 2 V100
    assert jobs["r"].running == Config(node="n", gpus=2, gpu_ids=(0, 1)) and jobs["r"].epochs_done == 3
    assert len(jobs["r"].epoch_time_s["V100"]) == 4
    assert job(mstore, "r").epochs_done == 3            # written back


def test_running_job_carries_its_partial_epoch(mstore):
    """The work a stop would throw away: the time since its last checkpoint, over its
    epoch time, on top of the whole epochs (what the policies' move costs charge)."""
    node_id = add_node(mstore, "n", gpus=2)
    add_job(mstore, "r", epochs=10)
    with mstore.session() as s:
        s.add(JobAttempt(job_id="r", attempt=1, node_id=node_id, gpu_ids=[0, 1],
                         start_s=NOW - 40))
        s.flush()
        transition(s, "r", JobState.RUNNING)
        insert_epoch_events(s, [dict(job_id="r", attempt=1, epoch=e,
                                     start_s=NOW - 42.5 + 10 * e, end_s=NOW - 32.5 + 10 * e,
                                     node_id=node_id, gpu_type="V100", gpus=2)
                                for e in (1, 2, 3)])
    snap = build(mstore, restart_overhead_s=10.0).snapshot
    r = snap.jobs[0]
    assert r.epoch_time_s["V100"][1] == 10.0
    assert r.epochs_done == pytest.approx(3.25)        # 2.5 s into a 10-s epoch
    assert job(mstore, "r").epochs_done == 3            # the store keeps whole epochs
    assert r.time_s("V100", 2, snap.params, continuing=False) == \
        pytest.approx(7 * 10.0 + 10.0)                  # epoch 4 again, plus the overhead


def test_epoch_time_sources_in_order(mstore):
    node_id = add_node(mstore, "n", gpus=4)
    add_node(mstore, "t", gpus=1, gpu_type="T4")
    add_job(mstore, "old", application="resnet50")
    add_job(mstore, "new", application="mystery")
    durations = [100.0 + k for k in range(25)]          # 25 epochs on 1 V100
    with mstore.session() as s:
        insert_epoch_events(s, [dict(job_id="old", attempt=1, epoch=k + 1, start_s=NOW + 1000 * k,
                                     end_s=NOW + 1000 * k + d, node_id=node_id,
                                     gpu_type="V100", gpus=1)
                                for k, d in enumerate(durations)])
        insert_epoch_events(s, [dict(job_id="old", attempt=2, epoch=k + 1, start_s=NOW + k,
                                     end_s=NOW + k + 50.0, node_id=node_id, gpu_type="V100",
                                     gpus=3) for k in range(2)])      # only 2: not enough
        s.add(AppProfile(application="resnet50", gpu_type="V100", gpus=2, epoch_time_s=77.0,
                         source="profiler", samples=4, updated_s=NOW))
        s.add(AppModel(application="resnet50", gpu_type="V100", model="amdahl", t1_s=120.0,
                       serial_fraction=0.5, mape=None, samples=3, gpu_counts=[1, 2],
                       source="profiler", updated_s=NOW))
    b = build(mstore)
    est = b.epochs[("resnet50", "V100")]
    assert est[0].source == "measured" and est[0].samples == 20
    assert est[0].seconds == statistics.median(durations[-20:])
    assert (est[1].source, est[1].seconds) == ("profiler", 77.0)
    assert est[2].source == "model" and est[2].seconds == pytest.approx(120 * (0.5 + 0.5 / 3))
    assert b.epochs[("resnet50", "T4")][0].source == "profiles"
    mystery = b.epochs[("mystery", "V100")]
    assert {e.source for e in mystery} == {"unprofiled"}
    assert [e.seconds for e in mystery] == [3600.0] * 4


def test_application_without_a_type_in_profiles_cannot_run_there(mstore):
    add_node(mstore, "n", gpus=1, gpu_type="H100-imaginary")
    add_job(mstore, "j", application="resnet50")
    b = build(mstore)
    assert b.snapshot.jobs == () and b.unrunnable == ("j",)


def test_measured_epochs_are_refreshed_incrementally(mstore):
    node_id = add_node(mstore, "n", gpus=1)
    add_job(mstore, "j")
    cfg = settings().manager
    estimator = Estimator(cfg)

    def events(durations, first):
        with mstore.session() as s:
            insert_epoch_events(s, [dict(job_id="j", attempt=1, epoch=first + k,
                                         start_s=NOW + 1000 * (first + k),
                                         end_s=NOW + 1000 * (first + k) + d, node_id=node_id,
                                         gpu_type="V100", gpus=1)
                                    for k, d in enumerate(durations)])

    def estimate():
        with mstore.session() as s:
            return build_snapshot(s, load_state(s), estimator, cfg, NOW).epochs[
                ("resnet50", "V100")][0]

    events([10.0, 10.0], 1)
    assert estimate().source == "profiles"             # 2 epochs: not enough
    events([30.0] * 25, 3)
    e = estimate()
    assert (e.source, e.seconds, e.samples) == ("measured", 30.0, 20)
    events([50.0] * 11, 28)                            # the 20 newest: 11 x 50, 9 x 30
    assert estimate().seconds == 50.0
    fresh = Estimator(cfg)
    with mstore.session() as s:
        assert fresh.epoch_tables(s, ["resnet50"], {"V100": 1})[
            ("resnet50", "V100")][0].seconds == 50.0


def test_counts_without_data_are_fitted_from_the_known_counts_of_the_type(mstore):
    """An application profiled on 1 V100 only (no model row): 2 and 4 V100s are predicted by
    Amdahl's law with the prior serial fraction, tagged as a model, not guessed as 3600 s."""
    from andreas.profiler.fit import DEFAULT_PRIOR_SERIAL

    add_node(mstore, "n", gpus=4)
    add_job(mstore, "j", application="fresh-app")
    with mstore.session() as s:
        s.add(AppProfile(application="fresh-app", gpu_type="V100", gpus=1, epoch_time_s=10.0,
                         source="profiler", samples=3, updated_s=NOW))
    est = build(mstore).epochs[("fresh-app", "V100")]
    assert (est[0].source, est[0].seconds) == ("profiler", 10.0)
    s_ = DEFAULT_PRIOR_SERIAL
    for g in (2, 3, 4):
        assert est[g - 1].source.startswith("model")
        assert est[g - 1].seconds == pytest.approx(10.0 * (s_ + (1 - s_) / g))
        assert est[g - 1].confidence is not None and est[g - 1].confidence < 0.5
