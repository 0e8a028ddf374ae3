"""Retention on both backends: raw samples older than N days go, the 1-minute aggregates
stay, and energy totals are exactly the same before and after."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text

from andreas.cli import main
from andreas.store import (HostMinute, HostRow, HostSample, PowerMinute, PowerRow, PowerSample,
                           StoreError, downsample, gpu_energy_mj, insert_host_samples,
                           insert_power_samples, mean_node_power, rebuild_minutes)
from andreas.store.retention import cutoff_for
from andreas.store.samples import minute_of

from .helpers import add_node, assert_minutes_match_raw

pytestmark = pytest.mark.slow      # seconds each: out of the quick loop

DAY = 86400.0


def raw_rows(store, gpu_ids):
    with store.session() as s:
        return sorted(tuple(r) for r in s.execute(
            select(PowerSample.gpu_id, PowerSample.t, PowerSample.power_w, PowerSample.energy_mj)
            .where(PowerSample.gpu_id.in_(gpu_ids))))


def spread(gpu_ids, node_id, now, n, seed, days=10.0):
    """About n samples per GPU at random times over the last ``days`` days, in bursts so that
    several batches write partial rows of the same minutes."""
    rng = np.random.default_rng(seed)
    rows = []
    for gid in gpu_ids:
        times = np.unique(np.round(now - rng.uniform(0, days * DAY, n), 3))
        times = np.unique(np.concatenate([times, now - 3600 + np.arange(0, 300, 0.5)]))
        for t in times:
            rows.append(PowerRow(gid, float(t), node_id, int(rng.integers(0, len(gpu_ids) + 1)),
                                 float(rng.integers(100, 600)) / 2,
                                 int(rng.integers(0, 10**9)) if rng.random() > 0.1 else None,
                                 float(rng.integers(0, 100)), int(rng.integers(0, 16000))))
    rng.shuffle(rows)
    return rows


def partial_rows(store, gpu_ids, since, until):
    """(rows, distinct (GPU, minute, busy) keys) of the aggregates in [since, until)."""
    with store.session() as s:
        return s.execute(select(func.count(), func.count(func.distinct(
            PowerMinute.gpu_id * 1e12 + PowerMinute.minute_s * 10 + PowerMinute.busy_gpus)))
            .where(PowerMinute.gpu_id.in_(gpu_ids), PowerMinute.minute_s >= since,
                   PowerMinute.minute_s < until)).one()


def test_retention_deletes_old_raw_samples_and_keeps_energy_exact(store):
    now = 1.7e9 + 17.5
    _, node_id, gpu_ids = add_node(store, gpus=4)
    rows = spread(gpu_ids, node_id, now, 1500, seed=3)
    hosts = [HostRow(node_id, now - k * 397.0, k % 5, 20.0, 1000 + k, 120.0 + k % 7, 5000 + k)
             for k in range(2000)]
    for k in range(0, len(rows), 500):          # many batches: many partial rows per minute
        with store.session() as s:
            insert_power_samples(s, rows[k:k + 500])
    with store.session() as s:
        insert_host_samples(s, hosts)
    cutoff = cutoff_for(now, 7)
    total_energy = sum(r.energy_mj or 0 for r in rows)
    recent_before = [r for r in raw_rows(store, gpu_ids) if r[1] >= cutoff]
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == total_energy
        power_before = {g: mean_node_power(s, node_id, g, 0, now + 60) for g in range(5)}
    window = (minute_of(now - 2 * DAY), minute_of(now) - 60)
    n_rows, n_keys = partial_rows(store, gpu_ids, *window)
    assert n_rows > n_keys                     # the batches left partial rows to compact

    result = downsample(store, keep_days=7, now_s=now)

    assert result.cutoff_s == cutoff and cutoff % 60 == 0
    assert result.power_samples >= sum(r.t < cutoff for r in rows) > 0
    assert result.power_rows_merged >= n_rows - n_keys
    assert partial_rows(store, gpu_ids, *window) == (n_keys, n_keys)   # one row per minute
    assert raw_rows(store, gpu_ids) == recent_before                  # recent ones untouched
    assert_minutes_match_raw(store, gpu_ids, since=cutoff)
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == total_energy      # exact: integers
        assert s.execute(select(func.sum(PowerMinute.samples))
                         .where(PowerMinute.gpu_id.in_(gpu_ids))).scalar() == len(rows)
        for g in range(5):
            after = mean_node_power(s, node_id, g, 0, now + 60)
            assert after.samples == power_before[g].samples
            assert after.gpu_w == pytest.approx(power_before[g].gpu_w, rel=1e-9)
            assert after.host_w == pytest.approx(power_before[g].host_w, rel=1e-9)
        host = s.execute(select(func.sum(HostMinute.energy_mj), func.sum(HostMinute.samples))
                         .where(HostMinute.node_id == node_id)).one()
        assert tuple(int(v) for v in host) == (sum(h.energy_mj for h in hosts), len(hosts))
        left = s.execute(select(func.count()).select_from(HostSample)
                         .where(HostSample.node_id == node_id, HostSample.t < cutoff)).scalar()
        assert (left, result.host_samples >= sum(h.t < cutoff for h in hosts)) == (0, True)

    # Again: nothing more to delete for these GPUs. A late sample (a replayed spool) is
    # counted at once and its raw row goes at the next run.
    downsample(store, keep_days=7, now_s=now)
    assert raw_rows(store, gpu_ids) == recent_before
    late = PowerRow(gpu_ids[0], cutoff - 5 * DAY + 0.25, node_id, 1, 300.0, 12345)
    with store.session() as s:
        insert_power_samples(s, [late])
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == total_energy + 12345
    downsample(store, keep_days=7, now_s=now)
    assert raw_rows(store, gpu_ids) == recent_before
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == total_energy + 12345


def test_retention_while_agents_insert_loses_nothing(store):
    now = 1.8e9
    _, node_id, gpu_ids = add_node(store, gpus=2)
    written: list[int] = []
    errors: list[BaseException] = []

    def agent():
        try:
            rng = np.random.default_rng(7)
            for b in range(30):
                ts = now - rng.uniform(0, 9 * DAY, 60)          # late and recent mixed
                ts = np.concatenate([ts, now - 120 + rng.uniform(0, 120, 60)])
                rows = [PowerRow(gpu_ids[i % 2], float(t) + 1e-4 * b, node_id, 1, 100.0, int(e))
                        for i, (t, e) in enumerate(zip(ts, rng.integers(0, 10**6, 120),
                                                       strict=True))]
                with store.session() as s:
                    insert_power_samples(s, rows, skip_duplicates=True)
                written.extend(r.energy_mj for r in rows)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def retention():
        try:
            for _ in range(6):
                downsample(store, keep_days=7, now_s=now)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=agent), threading.Thread(target=retention)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    downsample(store, keep_days=7, now_s=now)
    cutoff = cutoff_for(now, 7)
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == sum(written)
        assert s.execute(select(func.count()).select_from(PowerSample).where(
            PowerSample.gpu_id.in_(gpu_ids), PowerSample.t < cutoff)).scalar() == 0
    assert_minutes_match_raw(store, gpu_ids, since=cutoff)


def test_rebuild_minutes_after_a_bulk_load(store, backend):
    _, node_id, gpu_ids = add_node(store, gpus=2)
    t0 = 60.0 * 40_000_000
    rows = [(gpu_ids[k % 2], t0 + k * 0.75, node_id, 2, 150.0 + k % 3, 100 + k, 50.0, 1000)
            for k in range(500)]
    mark = "?" if not backend.mariadb else "%s"
    with store.engine.begin() as conn:          # around insert_power_samples: no aggregates
        conn.exec_driver_sql("INSERT INTO power_samples (gpu_id, t, node_id, busy_gpus, power_w, "
                             "energy_mj, utilization, memory_used_mib) "
                             f"VALUES ({', '.join([mark] * 8)})", rows)
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == 0
    assert rebuild_minutes(store, t0, t0 + 500) > 0
    assert_minutes_match_raw(store, gpu_ids)
    rebuild_minutes(store, t0, t0 + 500)        # again: replaces, does not add
    assert_minutes_match_raw(store, gpu_ids)
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == sum(r[5] for r in rows)


def test_keep_days_must_be_positive(store):
    with pytest.raises(StoreError, match="keep_days must be > 0"):
        downsample(store, keep_days=0)


def test_cli_retention_runs_once(store, db_url):
    now = time.time()
    _, node_id, gpu_ids = add_node(store, gpus=1)
    rows = [PowerRow(gpu_ids[0], now - d * DAY, node_id, 1, 100.0, 1000) for d in (1, 3, 8, 9)]
    with store.session() as s:
        insert_power_samples(s, rows)
    env = {"ANDREAS_DB_URL": db_url, "ANDREAS_CONFIG": None}
    result = CliRunner().invoke(main, ["db", "retention", "--keep-days", "2"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("retention (2 days, raw samples before ")
    assert "GPU and" in result.output and "aggregates stay" in result.output
    assert [round((now - t) / DAY) for _, t, _, _ in raw_rows(store, gpu_ids)] == [1]
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == 4000
        assert s.execute(text("SELECT COUNT(*) FROM power_minutes WHERE gpu_id = :g"),
                         {"g": gpu_ids[0]}).scalar() == 4
    bad = CliRunner().invoke(main, ["db", "retention", "--keep-days", "0"], env=env)
    assert bad.exit_code == 2 and "--keep-days" in bad.output


def test_gaps_go_with_the_raw_samples_and_job_energy_after_its_own_retention(store):
    """gpu_gaps: the raw retention; job_energy: job_energy_days (None keeps it all);
    rows at or after a cut-off stay, on both backends (MariaDB deletes in chunks)."""
    from andreas.store import GapRow, GpuGap, JobEnergy, JobEnergyRow, insert_gpu_gaps
    from andreas.store import insert_job_energy
    from .helpers import add_job

    now = 1.7e9 + 17.5
    _, node_id, gpu_ids = add_node(store, gpus=2)
    job = add_job(store)
    gaps = [GapRow(g, now - d * DAY, "GPU is lost") for g in gpu_ids for d in (0.5, 6.9, 7.1, 30)]
    energy = [JobEnergyRow(job, 1, now - d * DAY, node_id, 60.0, 1, 1000, 10)
              for d in (1, 7.1, 89, 91, 400)]
    with store.session() as s:
        insert_gpu_gaps(s, gaps)
        insert_job_energy(s, energy)

    def left():
        with store.session() as s:
            return (sorted(round((now - t) / DAY, 1) for t in s.scalars(
                        select(GpuGap.t).where(GpuGap.gpu_id == gpu_ids[0]))),
                    sorted(round((now - t) / DAY, 1) for t in s.scalars(
                        select(JobEnergy.t).where(JobEnergy.job_id == job))))

    r = downsample(store, keep_days=7, now_s=now)
    assert (r.gpu_gaps, r.job_energy, r.job_energy_cutoff_s) == (4, 0, None)
    assert left() == ([0.5, 6.9], [1.0, 7.1, 89.0, 91.0, 400.0])
    r = downsample(store, keep_days=7, now_s=now, job_energy_days=90)
    assert (r.gpu_gaps, r.job_energy) == (0, 2)
    assert r.job_energy_cutoff_s == cutoff_for(now, 90)
    assert left() == ([0.5, 6.9], [1.0, 7.1, 89.0])
    with pytest.raises(StoreError, match="job_energy_days must be > 0"):
        downsample(store, keep_days=7, now_s=now, job_energy_days=0)


def test_job_energy_has_its_time_index(store):
    """The retention deletes job_energy by time: ix_job_energy_t (migration 0006)."""
    from sqlalchemy import inspect

    with store.engine.connect() as conn:
        indexes = {ix["name"]: ix["column_names"] for ix in inspect(conn).get_indexes(
            "job_energy")}
    assert indexes["ix_job_energy_t"] == ["t"]
