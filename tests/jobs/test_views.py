"""queue / show / nodes / cancel on SQLite and MariaDB, over one seeded cluster whose
expected figures are computed by hand below."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from sqlalchemy import select, update

from andreas.config import ManagerSettings
from andreas.store.models import Decision, Gpu, Job, JobAttempt, JobState, Node, NodeState
from andreas.store.samples import (GapRow, HostRow, JobEnergyRow, PowerRow, insert_epoch_events,
                                   insert_gpu_gaps, insert_host_samples, insert_job_energy,
                                   insert_power_samples)
from andreas.service import views
from tests.jobs.conftest import NOW, run_cli
from tests.store.helpers import add_job, add_node, unique

SETTINGS = ManagerSettings()                   # PUE 1.33, 0.172 per kWh
KWH_COST = 1.33 * 0.172


def _attempt(s, job, n, node_id, gpus, **kw):
    s.add(JobAttempt(job_id=job, attempt=n, node_id=node_id, gpu_ids=gpus, **kw))


@pytest.fixture(scope="module")
def world(store):
    """Node A (4 V100, GPU 3 unhealthy) runs `run` on GPUs 0,1; node B (2 T4, GPU 0 MIG,
    profiling) has `stop` preempting on GPU 1; plus preempted, queued, completed and
    cancelled jobs, two decisions (the older one must be ignored), energy and samples."""
    a_name, a_id, a_gpus = add_node(store, gpus=4, gpu_type="V100")
    b_name, b_id, b_gpus = add_node(store, gpus=2, gpu_type="T4")
    ids = SimpleNamespace(a=a_name, b=b_name, a_id=a_id)
    for key, state, due, extra in (
            ("run", JobState.RUNNING, NOW - 100, dict(weight=0.01, epochs_done=3)),
            ("pre", JobState.PREEMPTED, NOW + 7200, {}),
            ("wait", JobState.QUEUED, NOW + 3600, {}),
            ("stop", JobState.PREEMPTING, NOW + 10000, {}),
            ("done", JobState.COMPLETED, NOW - 2000, dict(weight=0.02, epochs_done=10)),
            ("gone", JobState.CANCELLED, NOW - 5000,
             dict(state_changed_s=NOW - 500, reason="cancelled by ann"))):
        setattr(ids, key, add_job(store, id=unique(key), state=state, due_s=due,
                                  submit_s=NOW - 10000, **extra))
    with store.session() as s:
        s.execute(update(Gpu).where(Gpu.id == a_gpus[3]).values(healthy=False))
        s.execute(update(Gpu).where(Gpu.id == b_gpus[0]).values(mig_enabled=True))
        s.execute(update(Node).where(Node.id == b_id).values(profiling=True))
        s.execute(update(Node).where(Node.id == a_id).values(state=NodeState.UP,
                                                              last_heartbeat_s=NOW - 15))
        old = Decision(t=NOW - 6000, trigger="submit", policy="rg", objective=1.0,
                       objective_name="f_obj", seconds=0.1,
                       plan={"assignments": [{"job": ids.run, "node": a_name, "gpus": 2,
                                              "expected_end_s": 1.0, "predicted_cost": 99.0}]})
        new = Decision(t=NOW - 60, trigger="period", policy="rg", objective=2.0,
                       objective_name="f_obj", seconds=0.2,
                       plan={"assignments": [
                           {"job": ids.run, "node": a_name, "gpus": 2,
                            "expected_end_s": NOW + 3600, "predicted_cost": 2.5},
                           {"job": ids.pre, "node": a_name, "gpus": "x",
                            "expected_end_s": "soon", "predicted_cost": None},
                           "garbage", {"nojob": 1}], "postponed": [ids.wait]})
        s.add_all([old, new])
        s.flush()
        ids.d1, ids.d2 = old.id, new.id
        _attempt(s, ids.run, 1, a_id, [0, 1], container_id="c-run-1", start_s=NOW - 5000,
                 decision_id=old.id)
        _attempt(s, ids.pre, 1, a_id, [2], container_id="c-pre-1", start_s=NOW - 4000,
                 end_s=NOW - 3000, exit_code=143, reason="preempted", decision_id=987654,
                 stop_decision_id=new.id, stop_requested_s=NOW - 3100)
        _attempt(s, ids.stop, 1, b_id, [1], container_id="c-stop-1", start_s=NOW - 900,
                 stop_requested_s=NOW - 30)
        _attempt(s, ids.done, 1, a_id, [3], container_id="c-done-1", start_s=NOW - 9000,
                 end_s=NOW - 1000, exit_code=0)
        insert_job_energy(s, [
            JobEnergyRow(ids.run, 1, NOW - 600, a_id, 60.0, 2, 3_000_000_000, 1_000_000_000),
            JobEnergyRow(ids.run, 1, NOW - 540, a_id, 60.0, 2, 600_000_000, 800_000_000),
            JobEnergyRow(ids.done, 1, NOW - 1000, a_id, 60.0, 1, 3_600_000_000, None)])
        insert_epoch_events(s, [
            dict(job_id=ids.run, attempt=1, epoch=e, start_s=NOW - 4000 + 200 * e,
                 end_s=NOW - 4000 + 200 * e + d, node_id=a_id, gpu_type="V100", gpus=2)
            for e, d in ((1, 100.0), (2, 110.0), (3, 120.0))])
        insert_power_samples(s, [
            PowerRow(a_gpus[0], NOW - 100, a_id, 2, 50.0),
            PowerRow(a_gpus[0], NOW - 30, a_id, 2, 200.0),
            PowerRow(a_gpus[0], NOW - 10, a_id, 2, 210.0),
            PowerRow(a_gpus[1], NOW - 5, a_id, 2, 250.0),
            PowerRow(a_gpus[2], NOW - 90, a_id, 2, 300.0)])          # too old: not "now"
        insert_host_samples(s, [HostRow(a_id, NOW - 20, 2, 10.0, 1000, 100.0),
                                HostRow(a_id, NOW - 2, 2, 10.0, 1000, None)])
        insert_gpu_gaps(s, [GapRow(b_gpus[1], NOW - 10, "lost"),
                            GapRow(a_gpus[2], NOW - 500, "old gap")])
    return ids


def mine(rows, world):
    names = {world.run, world.pre, world.wait, world.stop, world.done, world.gone}
    return [r for r in rows if r.id in names]


def test_queue_rows(store, world):
    rows = {r.id: r for r in mine(views.queue(store, SETTINGS, NOW), world)}
    assert set(rows) == {world.run, world.pre, world.wait, world.stop}
    run = rows[world.run]
    assert (run.state, run.node, run.gpus, run.epochs_done, run.epochs) == (
        "running", world.a, 2, 3, 10)
    assert (run.finish_s, run.finish_actual) == (NOW + 3600, False)
    assert run.energy_kwh == pytest.approx(1.5)
    assert run.cost_so_far == pytest.approx(1.5 * KWH_COST + 0.01 * 100)
    assert run.cost_to_go == 2.5
    pre = rows[world.pre]                      # malformed plan entry: no guesses
    assert (pre.node, pre.gpus, pre.finish_s, pre.energy_kwh, pre.cost_so_far,
            pre.cost_to_go) == (None, None, None, None, None, None)
    wait = rows[world.wait]                    # never ran: nothing used yet
    assert (wait.energy_kwh, wait.cost_so_far, wait.finish_s) == (0.0, 0.0, None)
    assert (rows[world.stop].node, rows[world.stop].gpus) == (world.b, 1)
    order = [r.id for r in mine(views.queue(store, SETTINGS, NOW), world)]
    assert order == [world.run, world.wait, world.pre, world.stop]      # by due date


def test_queue_all_includes_finished_last(store, world):
    rows = mine(views.queue(store, SETTINGS, NOW, include_finished=True), world)
    assert [r.id for r in rows][-2:] == [world.gone, world.done]   # latest finish first
    done, gone = rows[-1], rows[-2]
    assert (done.finish_s, done.finish_actual, done.state) == (NOW - 1000, True, "completed")
    assert done.cost_so_far == pytest.approx(1.0 * KWH_COST + 0.02 * 1000)
    assert done.cost_to_go is None
    assert (gone.finish_s, gone.cost_so_far) == (NOW - 500, 0.0)   # cancelled: no penalty


def test_show_job(store, world):
    d = views.show(store, SETTINGS, world.run, NOW)
    assert (d.id, d.state, d.epochs_done, d.epochs, d.weight) == (world.run, "running", 3, 10,
                                                                  0.01)
    assert d.command == ("python", "train.py") and d.env == {"LR": "0.1"}
    assert d.plan.decision_id == world.d2 and d.plan.node == world.a and d.plan.gpus == 2
    assert d.finish_s == NOW + 3600 and not d.finish_actual
    assert d.costs.tardiness_cost == pytest.approx(1.0)
    assert d.costs.energy_cost == pytest.approx(1.5 * KWH_COST)
    (a,) = d.attempts
    assert (a.attempt, a.node, a.gpus, a.container_id, a.end_s) == (1, world.a, (0, 1),
                                                                     "c-run-1", None)
    assert a.energy_kwh == pytest.approx(1.5)
    assert a.started_by == views.DecisionRef(id=world.d1, t=NOW - 6000, trigger="submit",
                                             policy="rg")
    assert a.stopped_by is None
    (e,) = d.epoch_stats
    assert (e.node, e.gpu_type, e.gpus, e.epochs, e.last_epoch) == (world.a, "V100", 2, 3, 3)
    assert (e.mean_s, e.min_s, e.max_s) == pytest.approx((110.0, 100.0, 120.0))


def test_show_stopped_attempt_and_unknown_decision(store, world):
    d = views.show(store, SETTINGS, world.pre, NOW)
    (a,) = d.attempts
    assert (a.exit_code, a.reason, a.end_s, a.stop_requested_s) == (143, "preempted",
                                                                   NOW - 3000, NOW - 3100)
    assert a.started_by == views.DecisionRef(id=987654)            # row gone: id only
    assert a.stopped_by.id == world.d2 and a.stopped_by.trigger == "period"
    assert a.energy_kwh is None and d.epoch_stats == ()
    finished = views.show(store, SETTINGS, world.done, NOW)
    assert finished.plan is None and finished.finish_s == NOW - 1000 and finished.finish_actual


def test_nodes_rows(store, world):
    rows = {r.name: r for r in views.nodes(store, NOW)}
    a, b = rows[world.a], rows[world.b]
    assert (a.state, a.gpu_type, a.gpu_count, a.busy, a.free) == ("up", "V100", 4, 2, 1)
    assert a.jobs == (world.run,)
    assert (a.gpu_power_w, a.host_power_w, a.power_w) == (460.0, 100.0, 560.0)
    assert a.heartbeat_age_s == 15.0 and a.unhealthy_gpus == (3,) and not a.profiling
    assert (b.busy, b.free, b.jobs) == (1, 0, (world.stop,))
    assert (b.power_w, b.heartbeat_age_s) == (None, None)
    assert b.unhealthy_gpus == (1,) and b.mig_gpus == (0,) and b.profiling


def test_cli_queue_show_nodes(db_url, world):
    r = run_cli(db_url, "queue", "--json")
    assert r.exit_code == 0, r.output
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    assert rows[world.run]["cost_to_go"] == 2.5 and world.done not in rows
    r = run_cli(db_url, "queue", "--all", "--json")
    assert {row["id"] for row in json.loads(r.stdout)} >= {world.done, world.gone}

    table = run_cli(db_url, "queue")
    assert table.exit_code == 0
    line = next(ln for ln in table.stdout.splitlines() if world.run in ln)
    for cell in ("running", world.a, "3/10", "in 1h (late)", "2027-01-15 07:58Z", "1.34",
                 "2.50"):
        assert cell in line

    show = run_cli(db_url, "show", world.pre)
    assert show.exit_code == 0, show.output
    for text in (f"decision #{world.d2}: 2027-01-15 07:59Z period, policy rg",
                 "decision #987654: (no longer stored)", "143", "preempted", "c-pre-1"):
        assert text in show.stdout
    as_json = json.loads(run_cli(db_url, "show", world.run, "--json").stdout)
    assert as_json["attempts"][0]["gpus"] == [0, 1] and as_json["costs"]["to_go"] == 2.5
    assert as_json["attempts"][0]["started_by"]["id"] == world.d1

    nodes = run_cli(db_url, "nodes")
    assert nodes.exit_code == 0
    line = next(ln for ln in nodes.stdout.splitlines() if world.a in ln)
    for cell in ("4x V100", "2/1", world.run, "560", "15s ago", " 3 "):
        assert cell in line
    node_json = {n["name"]: n for n in json.loads(run_cli(db_url, "nodes", "--json").stdout)}
    assert node_json[world.b]["mig_gpus"] == [0] and node_json[world.b]["profiling"] is True


def test_cli_unknown_job(db_url, world):
    for args in (("show", "no-such-job"), ("cancel", "no-such-job")):
        r = run_cli(db_url, *args)
        assert r.exit_code == 2
        assert r.stderr == "andreas: error: job no-such-job: no such job (see `andreas queue " \
                           "--all`)\n"


@pytest.mark.parametrize("state", [JobState.QUEUED, JobState.RUNNING, JobState.PREEMPTING,
                                   JobState.PREEMPTED])
def test_cancel_moves_to_cancelled_with_reason(db_url, store, state):
    job = add_job(store, id=unique("cx"), state=state)
    r = run_cli(db_url, "cancel", job, "--reason", "wrong  data\nset")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"job {job}: cancelled (was {state.value})")
    assert ("manager stops its container" in r.stdout) == (
        state in (JobState.RUNNING, JobState.PREEMPTING))
    with store.session() as s:
        row = s.execute(select(Job.state, Job.reason, Job.state_changed_s)
                        .where(Job.id == job)).one()
    assert (row.state, row.reason, row.state_changed_s) == (JobState.CANCELLED,
                                                            "wrong data set", NOW)


def test_cancel_default_reason_and_case(db_url, store):
    job = add_job(store, id=unique("Cy"))
    r = run_cli(db_url, "cancel", job.lower())
    assert r.exit_code == 0, r.output
    with store.session() as s:
        reason = s.execute(select(Job.reason).where(Job.id == job)).scalar_one()
    assert reason.startswith("cancelled by ")


@pytest.mark.parametrize("state", [JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED])
def test_cancel_finished_job_is_a_clear_error(db_url, store, state):
    job = add_job(store, id=unique("cz"), state=state, reason="kept")
    r = run_cli(db_url, "cancel", job)
    assert r.exit_code == 2
    assert r.stderr == f"andreas: error: job {job}: already {state.value}; nothing to cancel\n"
    with store.session() as s:
        row = s.execute(select(Job.state, Job.reason).where(Job.id == job)).one()
    assert (row.state, row.reason) == (state, "kept")


def test_cancel_reason_too_long(db_url, store):
    job = add_job(store, id=unique("cr"))
    r = run_cli(db_url, "cancel", job, "--reason", "x" * 300)
    assert r.exit_code == 2 and "at most 255 characters, got 300" in r.stderr
    with store.session() as s:
        assert s.execute(select(Job.state).where(Job.id == job)).scalar_one() is JobState.QUEUED


def test_empty_views(backend):
    from andreas.store import migrate, open_store

    url = migrate.upgrade_url(backend.fresh_url())
    assert "no jobs waiting or running" in run_cli(url, "queue").stdout
    assert "no nodes registered" in run_cli(url, "nodes").stdout
    empty = open_store(url)
    try:
        assert views.queue(empty, SETTINGS, NOW, include_finished=True) == []
        assert views.nodes(empty, NOW) == []
    finally:
        empty.dispose()


def test_costs_with_a_tariff_bill_each_energy_window_when_it_was_used(store, world):
    """``[manager] tariff``: queue and show bill job energy at price(t) x PUE(t). NOW is
    08:00 UTC; the rate of hour h is (0.10 + 0.01 h) x (1 + 0.01 h)."""
    from andreas.formats.tariff import TariffFile

    prices = tuple(0.10 + 0.01 * h for h in range(24))
    pues = tuple(1.0 + 0.01 * h for h in range(24))
    tariffed = ManagerSettings(tariff="/etc/andreas/tariff.csv",
                               tariff_file=TariffFile(price_per_kwh=prices, pue=pues))
    rate = [p * q for p, q in zip(prices, pues)]
    job_id = add_job(store, id=unique("tariff"), state=JobState.COMPLETED, due_s=NOW + 1e6,
                     submit_s=NOW - 10000, weight=0.0)
    with store.session() as s:
        _attempt(s, job_id, 1, world.a_id, [0], container_id="c-tariff-1",
                 start_s=NOW - 3700, end_s=NOW - 3500, exit_code=0)
        # 1 kWh over 06:59:30 .. 07:00:30 UTC: half at hour 6's rate, half at hour 7's
        insert_job_energy(s, [JobEnergyRow(job_id, 1, NOW - 3570, world.a_id, 60.0, 1,
                                           3_600_000_000, None)])
    d = views.show(store, tariffed, job_id, NOW)
    assert d.costs.energy_kwh == pytest.approx(1.0)
    assert d.costs.energy_cost == pytest.approx(0.5 * rate[6] + 0.5 * rate[7], rel=1e-12)
    rows = {r.id: r for r in views.queue(store, tariffed, NOW, include_finished=True)}
    assert rows[job_id].cost_so_far == pytest.approx(0.5 * rate[6] + 0.5 * rate[7])
    # `run` used its 1.5 kWh between 07:49 and 07:51: hour 7, plus 100 s late x 0.01
    assert rows[world.run].cost_so_far == pytest.approx(1.5 * rate[7] + 0.01 * 100)
    # without the tariff: the constant PUE x price, as before
    assert views.show(store, SETTINGS, job_id, NOW).costs.energy_cost == pytest.approx(
        KWH_COST)
