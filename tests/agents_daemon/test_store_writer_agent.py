"""The agent's side of the store: errors sorted by what to do, registration by UUID,
idempotent writes, the node state never taken from an operator."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, ProgrammingError

from agents.entries import to_entry
from agents.records import GpuGap, GpuSample
from agents.store_writer import DeliveryError, StoreWriter, classify
from andreas.store.registry import RegistrationRefused, agent_engine, register
from andreas.errors import InputError
from andreas.sources import EnergySource, PowerSource
from andreas.store.engine import make_engine
from andreas.store.faults import FaultKind

from .helpers_agent import UUIDS, gpu_entry, spec, sqlite_store


class Orig(Exception):
    pass


def db_error(cls, code, message="x"):
    return cls("INSERT ...", {}, Orig(code, message))


@pytest.mark.parametrize("error, kind", [
    (db_error(OperationalError, 2003, "Can't connect"), "transient"),
    (db_error(OperationalError, 2013, "Lost connection"), "transient"),
    (db_error(OperationalError, 1205, "Lock wait timeout"), "transient"),
    (db_error(InterfaceError, 0, ""), "transient"),
    (OperationalError("INSERT", {}, Orig("database is locked")), "transient"),
    (ConnectionResetError(), "transient"),
    (db_error(OperationalError, 1045, "Access denied"), "refused"),
    (db_error(ProgrammingError, 1142, "INSERT command denied"), "refused"),
    (db_error(ProgrammingError, 1146, "Table doesn't exist"), "refused"),
    (db_error(IntegrityError, 1452, "foreign key"), "data"),
    (InputError("sample: power_w must be finite"), "data"),
    (RegistrationRefused("node n: not registered"), "refused"),
])
def test_errors_are_sorted_by_what_to_do(error, kind):
    assert classify(error) is FaultKind(kind)


def url_and_engine(tmp_path):
    url = sqlite_store(tmp_path)
    return url, make_engine(url)


def test_registration_by_uuid_is_idempotent_and_follows_index_changes(tmp_path):
    _, engine = url_and_engine(tmp_path)
    s = spec()
    with engine.begin() as conn:
        first = register(conn, s)
    with engine.begin() as conn:
        again = register(conn, s)
    assert again.changed == () and again.gpu_ids == first.gpu_ids
    swapped = replace(s, gpus=tuple(replace(g, index=1 - g.index) for g in s.gpus))
    with engine.begin() as conn:                     # NVML indices permuted: same rows
        assert register(conn, swapped).gpu_ids == first.gpu_ids
    with engine.connect() as conn:
        assert dict(conn.execute(sa.text("SELECT uuid, gpu_index FROM gpus")).all()) == {
            UUIDS[0]: 1, UUIDS[1]: 0}
    replaced = replace(s, gpus=(s.gpus[0], replace(s.gpus[1], uuid="GPU-new")))
    with engine.begin() as conn:                     # a GPU swapped for another one
        reg = register(conn, replaced)
    assert set(reg.gpu_ids) == {UUIDS[0], "GPU-new"}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT gpu_index, healthy FROM gpus WHERE uuid = :u"),
                            {"u": UUIDS[1]}).one()[1] in (0, False)
    with engine.begin() as conn, pytest.raises(RegistrationRefused,
                                               match="andreas-agent --register"):
        register(conn, replace(s, name="unknown-node"), write=False)
    engine.dispose()


def test_writes_are_idempotent_and_convert_every_kind(tmp_path):
    url, engine = url_and_engine(tmp_path)
    writer = StoreWriter(agent_engine(url), spec=spec, self_register=True)
    no_power = to_entry(GpuSample(uuid=UUIDS[0], t=5.0, interval_s=2.0, power_w=None,
                                  power_source=None, energy_mj=100_000,
                                  energy_source=EnergySource.COUNTER), busy_gpus=0)
    nothing = to_entry(GpuSample(uuid=UUIDS[1], t=5.0, interval_s=1.0, power_w=None,
                                 power_source=PowerSource.INSTANT, energy_mj=None,
                                 energy_source=None), busy_gpus=0)
    gap = to_entry(GpuGap(uuid=UUIDS[1], t=6.0, reason="GPU is lost"))
    batch = [gpu_entry(0), gpu_entry(1), no_power, nothing, gap]
    writer.write(batch, heartbeat_t=123.0)
    writer.write(batch, heartbeat_t=124.0)          # sent twice: stored once
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT t, power_w, power_source FROM power_samples "
                                    "ORDER BY t")).all()
        assert tuple(rows[0]) == (5.0, 50.0, None)    # the mean of 100 J over 2 s
        assert len(rows) == 3
        assert conn.execute(sa.text("SELECT t, reason FROM gpu_gaps ORDER BY t")).all() == [
            (5.0, "no power or energy reading"), (6.0, "GPU is lost")]
        assert conn.execute(sa.text("SELECT last_heartbeat_s, state FROM nodes")).one() == \
            (124.0, "up")
    with pytest.raises(DeliveryError) as err:
        writer.write([gpu_entry(0, uuids=("GPU-elsewhere",))])
    assert err.value.kind == "data" and "not in this node's registered inventory" in \
        str(err.value)
    writer.close()
    engine.dispose()


def test_node_state_up_at_start_down_at_stop_draining_stays(tmp_path):
    url, engine = url_and_engine(tmp_path)
    writer = StoreWriter(agent_engine(url), spec=spec, self_register=True)
    writer.write([])
    state = lambda: engine.connect().execute(sa.text("SELECT state FROM nodes")).scalar()  # noqa
    assert state() == "up"
    writer.mark_down()
    assert state() == "down"
    writer._registration = None
    writer.write([])
    assert state() == "up"
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE nodes SET state = 'draining'")
    writer._registration = None
    writer.write([])
    writer.mark_down()
    assert state() == "draining"
    writer.close()
    engine.dispose()


def test_an_unmigrated_database_is_refused_naming_the_upgrade(tmp_path):
    (tmp_path / "empty.db").touch()
    writer = StoreWriter(agent_engine(f"sqlite:///{tmp_path / 'empty.db'}"), spec=spec)
    with pytest.raises(DeliveryError) as err:
        writer.write([gpu_entry(0)])
    assert err.value.kind == "refused" and "andreas db upgrade" in str(err.value)
    writer.close()


def test_an_agent_that_may_not_register_says_how(tmp_path):
    url, engine = url_and_engine(tmp_path)
    writer = StoreWriter(agent_engine(url), spec=spec, self_register=False)
    with pytest.raises(DeliveryError) as err:
        writer.write([gpu_entry(0)])
    assert err.value.kind == "refused" and "andreas-agent --register" in str(err.value)
    writer.close()
    engine.dispose()


def test_the_agents_head_revision_is_alembics():
    from andreas.store.migrate import script_directory
    from andreas.store.schema import head_revision

    assert head_revision() == script_directory().get_current_head()


def test_a_database_behind_is_refused_naming_the_upgrade(tmp_path):
    url, engine = url_and_engine(tmp_path)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0001'")
    writer = StoreWriter(agent_engine(url), spec=spec)
    with pytest.raises(DeliveryError) as err:
        writer.write([gpu_entry(0)])
    assert err.value.kind == "refused" and "at revision 0001" in str(err.value)
    writer.close()
    engine.dispose()
