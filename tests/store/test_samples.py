"""Sample ingest and the power queries on both backends."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import event, select

from andreas.errors import InputError
from andreas.store import (EpochEvent, HostRow, PowerRow, gpu_energy_mj,
                           insert_epoch_events, insert_host_samples,
                           insert_power_samples, mean_node_power, mean_power_table)
from andreas.store.samples import minute_of, power_queries

from .helpers import add_job, add_node, assert_minutes_match_raw


class StatementCounter:
    def __init__(self, engine: sa.Engine):
        self.engine, self.many, self.single = engine, 0, 0

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._count)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._count)

    def _count(self, conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT"):
            if executemany:
                self.many += 1
            else:
                self.single += 1


def synthetic(gpu_ids: list[int], node_id: int, seconds: int, seed: int, t0: float = 1e6 + 7.25):
    """1 Hz samples of every GPU; the busy count changes every 50 s; powers are multiples of
    0.5 W (exact in the FLOAT column)."""
    rng = np.random.default_rng(seed)
    busy = np.repeat(rng.integers(0, len(gpu_ids) + 1, size=seconds // 50 + 1), 50)[:seconds]
    rows = []
    for k in range(seconds):
        for i, gid in enumerate(gpu_ids):
            power = float(rng.integers(100, 600)) / 2 + (100.0 if i < busy[k] else 0.0)
            rows.append(PowerRow(gid, t0 + k, node_id, int(busy[k]), power,
                                 int(rng.integers(0, 400_000)), float(rng.integers(0, 100)),
                                 int(rng.integers(0, 16000))))
    return rows


def expected_power(rows, node_id, g, start, end):
    per_gpu: dict[int, list[float]] = {}
    for r in rows:
        if r.node_id == node_id and r.busy_gpus == g and start <= minute_of(r.t) < end:
            per_gpu.setdefault(r.gpu_id, []).append(r.power_w)
    if not per_gpu:
        return None, 0
    return sum(np.mean(v) for v in per_gpu.values()), sum(len(v) for v in per_gpu.values())


@pytest.mark.slow
def test_batched_insert_and_mean_power_match_a_direct_computation(store):
    _, node_id, gpu_ids = add_node(store, gpus=4)
    rows = synthetic(gpu_ids, node_id, seconds=1500, seed=1)
    with StatementCounter(store.engine) as counter, store.session() as s:
        assert insert_power_samples(s, rows, batch_size=1000) == len(rows)
    # one statement for the raw rows and one for their 1-minute aggregates, per batch
    assert (counter.many, counter.single) == (2 * math.ceil(len(rows) / 1000), 0)
    assert_minutes_match_raw(store, gpu_ids)
    m0 = minute_of(rows[0].t)
    for g in range(5):
        for start, end in ((m0, m0 + 1560), (m0 + 120, m0 + 900), (m0 + 130, m0 + 901),
                           (0, 1e12)):
            want, n = expected_power(rows, node_id, g, start, end)
            with store.session() as s:
                got = mean_node_power(s, node_id, g, start, end)
            if want is None:
                assert got is None
                continue
            assert got.samples == n
            assert got.gpu_w == pytest.approx(want, rel=1e-9)
            assert got.host_w is None and got.total_w == got.gpu_w


def test_mean_power_by_name_table_and_host_power(store):
    name, node_id, gpu_ids = add_node(store, gpus=2)
    rows = [PowerRow(gpu_ids[i % 2], 5e6 + i // 2, node_id, 2, 200.0 + 100 * (i % 2))
            for i in range(200)]
    hosts = [HostRow(node_id, 5e6 + k, 2, 35.0, 64000, 150.0 + (k % 2) * 50, 175_000)
             for k in range(100)]
    with store.session() as s:
        insert_power_samples(s, rows)
        assert insert_host_samples(s, hosts) == 100
    with store.session() as s:
        p = mean_node_power(s, name, 2, 5e6 - 60, 5e6 + 100)     # 5e6 is 20 s into a minute
        table = mean_power_table(s, 5e6 - 60, 5e6 + 100)
    assert (p.gpu_w, p.host_w, p.total_w, p.samples, p.gpus_seen) == (500.0, 175.0, 675.0,
                                                                       200, 2)
    assert table[(node_id, 2)] == p


def test_no_samples_and_unknown_node(store):
    name, node_id, _ = add_node(store, gpus=1)
    with store.session() as s:
        assert mean_node_power(s, name, 1, 0, 1e12) is None
        with pytest.raises(InputError, match="node ghost: no such node"):
            mean_node_power(s, "ghost", 1, 0, 1e12)


@pytest.mark.parametrize("which, index", [(0, "ix_power_minutes_node_busy"),
                                          (1, "ix_host_minutes_node_busy")])
def test_mean_power_queries_are_index_only_range_scans(store, backend, which, index):
    _, node_id, _ = add_node(store, gpus=1)
    query = power_queries(0.0, 1e12, node_id, 1)[which]
    with store.engine.connect() as conn:
        sql = str(query.compile(conn, compile_kwargs={"literal_binds": True}))
        if backend.mariadb:
            plan = conn.exec_driver_sql(f"EXPLAIN {sql}").mappings().all()
            assert plan[0]["key"] == index, plan
            assert "Using index" in plan[0]["Extra"], plan
        else:
            plan = " ".join(r[-1] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
            assert f"COVERING INDEX {index}" in plan, plan


@pytest.mark.parametrize("bad, message", [
    ({"gpu_id": 10**9}, "is not a known GPU"),
    ({"node_id": -1}, "is on node_id"),
    ({"busy_gpus": 3}, "busy_gpus must be 0..2"),
    ({"busy_gpus": -1}, "busy_gpus must be 0..2"),
    ({"power_w": float("nan")}, "power_w must be a finite number >= 0"),
    ({"power_w": -5.0}, "power_w must be a finite number >= 0"),
    ({"t": float("inf")}, "t must be a finite number"),
    ({"energy_mj": -1}, "energy_mj must be a whole number"),
    ({"energy_mj": 1.5}, "energy_mj must be a whole number"),
])
def test_bad_rows_fail_the_whole_batch(store, bad, message):
    _, node_id, gpu_ids = add_node(store, gpus=2)
    good = [PowerRow(gpu_ids[0], 7e6 + k, node_id, 1, 100.0, 10) for k in range(5)]
    row = good[0]._replace(**{"t": 8e6, **bad})
    with pytest.raises(InputError, match=message), store.session() as s:
        insert_power_samples(s, good + [row])
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == 0   # nothing of the batch landed


def test_rows_as_mappings_and_sequences(store):
    _, node_id, gpu_ids = add_node(store, gpus=1)
    with store.session() as s:
        n = insert_power_samples(s, [
            {"gpu_id": gpu_ids[0], "t": 1.0, "node_id": node_id, "busy_gpus": 0, "power_w": 50.0},
            (gpu_ids[0], 2.0, node_id, 1, 250.0, 500),
        ])
    assert n == 2
    with pytest.raises(InputError, match="PowerRow"), store.session() as s:
        insert_power_samples(s, [{"gpu": 1}])


def test_duplicate_sample_is_an_error_unless_skipped(store):
    _, node_id, gpu_ids = add_node(store, gpus=1)
    rows = [PowerRow(gpu_ids[0], 9e6 + k, node_id, 1, 100.0, 7) for k in range(10)]
    rows[3] = rows[3]._replace(energy_mj=None)
    with store.session() as s:
        insert_power_samples(s, rows)
    with pytest.raises(sa.exc.IntegrityError), store.session() as s:
        insert_power_samples(s, rows[5:] + [rows[-1]._replace(t=9e6 + 10)])
    with store.session() as s:      # a replayed spool: the 5 old rows skipped, 2 new written
        written = insert_power_samples(s, rows[5:] + [rows[-1]._replace(t=9e6 + 10),
                                                      rows[-1]._replace(t=9e6 + 11)],
                                       skip_duplicates=True)
    assert written == 2
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == 7 * 11
        assert insert_power_samples(s, rows[:2] + rows[:2], skip_duplicates=True) == 0
    assert_minutes_match_raw(store, gpu_ids)


def test_host_sample_checks(store):
    _, node_id, _ = add_node(store, gpus=2)
    with pytest.raises(InputError, match="is not a known node"), store.session() as s:
        insert_host_samples(s, [HostRow(10**9, 1.0, 0, 1.0, 10)])
    with pytest.raises(InputError, match="busy_gpus must be 0..2"), store.session() as s:
        insert_host_samples(s, [HostRow(node_id, 1.0, 5, 1.0, 10)])
    with pytest.raises(InputError, match="host_power_w"), store.session() as s:
        insert_host_samples(s, [HostRow(node_id, 1.0, 0, 1.0, 10, -3.0)])


def test_epoch_events(store):
    _, node_id, _ = add_node(store, gpus=2)
    job = add_job(store)
    events = [dict(job_id=job, attempt=1, epoch=e, start_s=100.0 * e, end_s=100.0 * e + 90,
                   node_id=node_id, gpu_type="V100", gpus=2) for e in range(1, 4)]
    with store.session() as s:
        assert insert_epoch_events(s, events) == 3
    with store.session() as s:
        got = s.execute(select(EpochEvent.epoch, EpochEvent.end_s - EpochEvent.start_s)
                        .where(EpochEvent.job_id == job).order_by(EpochEvent.epoch)).all()
    assert [tuple(r) for r in got] == [(1, 90.0), (2, 90.0), (3, 90.0)]
    with pytest.raises(sa.exc.IntegrityError), store.session() as s:
        insert_epoch_events(s, events[:1])
    with pytest.raises(InputError, match="end_s is before start_s"), store.session() as s:
        insert_epoch_events(s, [dict(events[0], epoch=9, end_s=0.0)])


def test_energy_by_window_and_gpu(store):
    _, node_id, gpu_ids = add_node(store, gpus=2)
    t0 = 60.0 * 333_334                       # a minute start; 1 Hz for 3 minutes
    rows = [PowerRow(gpu_ids[i % 2], t0 + i // 2, node_id, 2, 100.0, 1000 + (i % 2))
            for i in range(360)]
    with store.session() as s:
        insert_power_samples(s, rows, batch_size=7)
    with store.session() as s:
        assert gpu_energy_mj(s, gpu_ids=gpu_ids) == 180 * 1000 + 180 * 1001
        assert gpu_energy_mj(s, gpu_ids=gpu_ids[1:]) == 180 * 1001
        assert gpu_energy_mj(s, t0 + 60, t0 + 120, gpu_ids) == 60 * 2001    # minute 2
        assert gpu_energy_mj(s, t0 + 1, t0 + 120, gpu_ids) == 60 * 2001     # by minute start
    assert_minutes_match_raw(store, gpu_ids)
