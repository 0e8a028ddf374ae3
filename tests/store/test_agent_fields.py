"""Revision 0002 on both backends: measurement sources, GPU health, gaps, job energy, and
inserts an agent can repeat without effect (a replayed spool)."""

from __future__ import annotations

import enum

import pytest
import sqlalchemy as sa

from andreas.errors import InputError
from andreas.store import (EnergySource, GapRow, Gpu, HostRow, JobEnergyRow, PowerRow,
                           PowerSource, insert_epoch_events, insert_gpu_gaps,
                           insert_host_samples, insert_job_energy, insert_power_samples,
                           migrate)
from andreas.store.engine import make_engine

from .helpers import add_job, add_node


class AgentEnergySource(enum.Enum):   # the agent's own enum with the store's values
    COUNTER = "counter"


def test_power_and_host_samples_keep_their_sources(store):
    _, node_id, gpu_ids = add_node(store, gpus=2)
    with store.session() as s:
        insert_power_samples(s, [
            PowerRow(gpu_ids[0], 1e7, node_id, 1, 250.0, 250_000, 90.0, 1000,
                     EnergySource.COUNTER, PowerSource.INSTANT, False),
            PowerRow(gpu_ids[1], 1e7, node_id, 1, 60.0, 60_000, 0.0, 10, "integrated",
                     "average", True),
            PowerRow(gpu_ids[0], 1e7 + 1, node_id, 1, 250.0, 250_000,
                     energy_source=AgentEnergySource.COUNTER),
            PowerRow(gpu_ids[1], 1e7 + 1, node_id, 1, 60.0),      # old callers: no sources
        ])
        insert_host_samples(s, [
            HostRow(node_id, 1e7, 1, 12.0, 2048, 120.0, 120_000, PowerSource.RAPL,
                    EnergySource.RAPL, 0.4, 61.5),
            HostRow(node_id, 1e7 + 1, 1, 12.0, 2048, 150.0, 150_000, "model", "model"),
        ])
    with store.session() as s:
        power = s.execute(sa.text(
            "SELECT gpu_id, t, energy_source, power_source, counter_reset FROM power_samples "
            "WHERE node_id = :n ORDER BY t, gpu_id"), {"n": node_id}).all()
        host = s.execute(sa.text(
            "SELECT power_source, energy_source, agent_cpu_percent, agent_rss_mib "
            "FROM host_samples WHERE node_id = :n ORDER BY t"), {"n": node_id}).all()
    assert [(r[2], r[3], bool(r[4])) for r in power] == [
        ("counter", "instant", False), ("integrated", "average", True),
        ("counter", None, False), (None, None, False)]
    assert [tuple(r) for r in host] == [("rapl", "rapl", 0.4, 61.5),
                                        ("model", "model", None, None)]


@pytest.mark.parametrize("row, message", [
    (dict(energy_source="guessed"), "energy_source must be one of counter, integrated"),
    (dict(power_source="peak"), "power_source must be one of average, instant"),
    (dict(counter_reset=1), "counter_reset must be true or false"),
])
def test_bad_sources_are_refused_with_the_field(store, row, message):
    _, node_id, gpu_ids = add_node(store, gpus=1)
    with pytest.raises(InputError, match=message), store.session() as s:
        insert_power_samples(s, [dict(gpu_id=gpu_ids[0], t=1.0, node_id=node_id, busy_gpus=0,
                                      power_w=1.0, **row)])


def test_the_database_refuses_an_unknown_source_too(store):
    _, node_id, gpu_ids = add_node(store, gpus=1)
    with pytest.raises(sa.exc.DBAPIError), store.session() as s:
        s.execute(sa.text("INSERT INTO power_samples (gpu_id, t, node_id, busy_gpus, power_w, "
                          "energy_source) VALUES (:g, 1, :n, 0, 1, 'bogus')"),
                  {"g": gpu_ids[0], "n": node_id})


def test_new_gpus_are_healthy_without_mig(store):
    _, _, gpu_ids = add_node(store, gpus=1)
    with store.session() as s:
        gpu = s.get(Gpu, gpu_ids[0])
        assert (gpu.healthy, gpu.mig_enabled) == (True, False)


def test_gaps_and_job_energy_can_be_replayed(store):
    _, node_id, gpu_ids = add_node(store, gpus=2)
    job = add_job(store)
    gaps = [GapRow(gpu_ids[0], 2e7 + k, "GPU is lost") for k in range(3)]
    energy = [JobEnergyRow(job, 1, 2e7 + 60 * k, node_id, 60.0, 2, 30_000_000 + k, 6_000_000)
              for k in range(3)]
    with store.session() as s:
        assert insert_gpu_gaps(s, gaps) == 3
        assert insert_job_energy(s, energy[:2]) == 2
    with store.session() as s:
        assert insert_gpu_gaps(s, gaps + [GapRow(gpu_ids[1], 2e7, "x" * 300)],
                               skip_duplicates=True) == 1
        assert insert_job_energy(s, energy, skip_duplicates=True) == 1
    with pytest.raises(sa.exc.IntegrityError), store.session() as s:
        insert_job_energy(s, energy[:1])
    with store.session() as s:
        assert s.execute(sa.text("SELECT COUNT(*), SUM(gpu_energy_mj) FROM job_energy "
                                 "WHERE job_id = :j"), {"j": job}).one() == (3, 90_000_003)
        reasons = s.execute(sa.text("SELECT reason FROM gpu_gaps WHERE gpu_id = :g"),
                            {"g": gpu_ids[1]}).scalars().all()
        assert reasons == ["x" * 255]


def test_skipping_duplicates_never_hides_another_error(store):
    """INSERT IGNORE on MariaDB would silently drop a row whose job does not exist."""
    _, node_id, _ = add_node(store, gpus=1)
    with pytest.raises(sa.exc.IntegrityError), store.session() as s:
        insert_job_energy(s, [JobEnergyRow("no-such-job", 1, 1.0, node_id, 1.0, 1, 5, 5)],
                          skip_duplicates=True)
    with pytest.raises(sa.exc.IntegrityError), store.session() as s:
        insert_epoch_events(s, [dict(job_id="no-such-job", attempt=1, epoch=1, start_s=0.0,
                                     end_s=1.0, node_id=node_id, gpu_type="V100", gpus=1)],
                            skip_duplicates=True)
    with pytest.raises(sa.exc.IntegrityError), store.session() as s:
        insert_gpu_gaps(s, [GapRow(10**8, 1.0, "lost")], skip_duplicates=True)


def test_epoch_events_can_be_replayed(store):
    _, node_id, _ = add_node(store, gpus=1)
    job = add_job(store)
    events = [dict(job_id=job, attempt=1, epoch=e, start_s=10.0 * e, end_s=10.0 * e + 9,
                   node_id=node_id, gpu_type="V100", gpus=1) for e in range(1, 4)]
    with store.session() as s:
        assert insert_epoch_events(s, events[:2], skip_duplicates=True) == 2
    with store.session() as s:
        assert insert_epoch_events(s, events, skip_duplicates=True) == 1
    with pytest.raises(InputError, match="unknown field"), store.session() as s:
        insert_epoch_events(s, [dict(events[0], colour="red")], skip_duplicates=True)
    with store.session() as s:
        assert s.execute(sa.text("SELECT COUNT(*) FROM epoch_events WHERE job_id = :j"),
                         {"j": job}).scalar() == 3


def test_upgrade_from_0001_keeps_rows_and_fills_defaults(backend):
    url = backend.fresh_url()
    engine = make_engine(url, create_dir=True)
    try:
        assert migrate.upgrade(engine, "0001") == (None, "0001")
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO nodes (id, name, docker_endpoint, gpu_type, "
                                 "gpu_count, state) VALUES (1, 'n', 'ssh://n', 'V100', 1, 'up')")
            conn.exec_driver_sql("INSERT INTO gpus (id, node_id, gpu_index, uuid, model, "
                                 "memory_mib, has_energy_counter) VALUES (1, 1, 0, 'GPU-1', "
                                 "'V100', 16384, 1)")
            conn.exec_driver_sql("INSERT INTO power_samples (gpu_id, t, node_id, busy_gpus, "
                                 "power_w, energy_mj) VALUES (1, 5, 1, 0, 40, 40000)")
            conn.exec_driver_sql("INSERT INTO host_samples (node_id, t, busy_gpus, "
                                 "cpu_utilization, memory_used_mib) VALUES (1, 5, 0, 3, 100)")
        assert migrate.upgrade(engine) == ("0001", migrate.head_revision())
        with engine.connect() as conn:
            assert tuple(conn.exec_driver_sql(
                "SELECT healthy, mig_enabled FROM gpus").one()) in ((1, 0), (True, False))
            row = conn.exec_driver_sql("SELECT energy_mj, energy_source, power_source, "
                                       "counter_reset FROM power_samples").one()
            assert (row[0], row[1], row[2], bool(row[3])) == (40000, None, None, False)
            assert tuple(conn.exec_driver_sql(
                "SELECT power_source, agent_rss_mib FROM host_samples").one()) == (None, None)
    finally:
        engine.dispose()
