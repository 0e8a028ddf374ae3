"""Schema and migrations on both backends: upgrade, re-upgrade, refusals, the CLI."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner

from andreas.cli import main
from andreas.store import Base, SchemaError, open_store
from andreas.store.engine import make_engine
from andreas.store.migrate import downgrade, head_revision, status, upgrade

TABLES = {"nodes", "gpus", "power_samples", "host_samples", "power_minutes", "host_minutes",
          "gpu_gaps", "job_energy", "app_models", "manager_lease", "agent_gaps",
          "jobs", "job_attempts", "epoch_events", "decisions", "app_profiles", "app_levels",
          "agent_accounts",
          "alembic_version"}


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def cli(url: str, *args: str):
    return CliRunner().invoke(main, ["db", *args], env={"ANDREAS_DB_URL": url,
                                                        "ANDREAS_CONFIG": None})


def test_upgrade_creates_every_table_and_matches_the_models(backend):
    url = backend.fresh_url()
    engine = make_engine(url, create_dir=True)
    try:
        assert upgrade(engine) == (None, head_revision())
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                    Base.metadata)
        assert diff == [], f"models and migrations differ: {diff}"
    finally:
        engine.dispose()
    assert tables(url) == TABLES


def test_upgrade_twice_is_a_no_op(backend):
    url = backend.fresh_url()
    engine = make_engine(url, create_dir=True)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO app_profiles (application, gpu_type, gpus, "
                                 "epoch_time_s, source, samples, updated_s) "
                                 "VALUES ('a', 'V100', 1, 60, 'profiles', 0, 0)")
        head = head_revision()
        assert upgrade(engine) == (head, head)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM app_profiles").scalar() == 1
    finally:
        engine.dispose()


def test_concurrent_upgrades_leave_one_schema(backend):
    url = backend.fresh_url()
    results, errors = [], []

    def run():
        engine = make_engine(url, create_dir=True)
        try:
            results.append(upgrade(engine))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    head = head_revision()
    assert sorted(results, key=str) == sorted([(None, head)] + [(head, head)] * 2, key=str)


def test_current_reports_head(backend, db_url):
    engine = make_engine(db_url)
    try:
        st = status(engine)
    finally:
        engine.dispose()
    assert (st.revision, st.state) == (head_revision(), "head")
    result = cli(db_url, "current")
    assert result.exit_code == 0, result.output
    assert f"revision: {head_revision()}; head: {head_revision()}; state: head" in result.output
    assert "from ANDREAS_DB_URL" in result.output


def test_unmigrated_database_is_refused_naming_the_command(backend):
    url = backend.fresh_url()
    make_engine(url, create_dir=True).dispose()
    if not backend.mariadb:
        open(url.removeprefix("sqlite:///"), "ab").close()   # an empty SQLite file
    with pytest.raises(SchemaError, match=r"not migrated.*run `andreas db upgrade`"):
        open_store(url)
    result = cli(url, "check")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "andreas: error: " in result.output and "andreas db upgrade" in result.output
    result = cli(url, "current")
    assert result.exit_code == 0 and "state: none" in result.output


def test_missing_sqlite_file_names_the_command(tmp_path):
    result = cli(f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}", "check")
    assert result.exit_code == 2
    assert "does not exist; create it with `andreas db upgrade`" in result.output
    assert not (tmp_path / "nowhere").exists()


def test_upgrade_refuses_tables_it_did_not_create(backend):
    url = backend.fresh_url()
    engine = make_engine(url, create_dir=True)
    try:
        Base.metadata.create_all(engine)
        with pytest.raises(SchemaError, match="not created by `andreas db upgrade`"):
            upgrade(engine)
    finally:
        engine.dispose()


def test_unknown_revision_is_refused(backend):
    url = backend.fresh_url()
    engine = make_engine(url, create_dir=True)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'ffff9999'")
        with pytest.raises(SchemaError, match="revision ffff9999, which this andreas does not "
                                              "know"):
            open_store(url)
        with pytest.raises(SchemaError, match="does not know"):
            upgrade(engine)
    finally:
        engine.dispose()


def test_downgrade_is_refused_and_changes_nothing(backend, db_url):
    engine = make_engine(db_url)
    try:
        with pytest.raises(SchemaError, match=r"downgrade .* refused: andreas migrations are "
                                              r"forward-only"):
            downgrade(engine, "base")
        downgrade(engine, head_revision())   # to where it is: nothing to do
    finally:
        engine.dispose()
    result = cli(db_url, "downgrade", "base")
    assert result.exit_code == 2
    assert "forward-only" in result.output and "restore a backup" in result.output
    assert tables(db_url) == TABLES
    result = cli(db_url, "downgrade", head_revision())
    assert result.exit_code == 0 and "nothing to do" in result.output


def test_cli_upgrade_twice(backend):
    url = backend.fresh_url()
    first = cli(url, "upgrade")
    assert first.exit_code == 0, first.output
    assert f"upgraded from empty to {head_revision()}" in first.output
    second = cli(url, "upgrade")
    assert second.exit_code == 0, second.output
    assert "nothing to do" in second.output
    assert cli(url, "check").exit_code == 0


def test_cli_masks_the_password(backend, db_url):
    result = cli(db_url, "current")
    assert result.exit_code == 0
    password = sa.engine.make_url(db_url).password
    if password:
        assert password not in result.output and "***" in result.output


def test_upgrade_sql_renders_ddl_without_a_database():
    result = CliRunner().invoke(main, ["db", "upgrade", "--sql"], env={
        "ANDREAS_DB_URL": "mysql+pymysql://nobody:pw@127.0.0.1:1/andreas", "ANDREAS_CONFIG": None})
    assert result.exit_code == 0, result.output
    assert "CREATE TABLE power_samples" in result.output
    assert "ENGINE=InnoDB" in result.output
    assert "nobody:pw" not in result.output


def test_upgrade_from_0004_keeps_rows_that_reference_rebuilt_tables(backend):
    """0005 rebuilds jobs' state check and 0007 nodes' (SQLite: the tables are rebuilt):
    a database in use, with attempts, epochs and GPUs pointing at them, upgrades with
    every row and every reference intact (foreign keys are enforced on SQLite)."""
    url = backend.fresh_url()
    engine = make_engine(url, create_dir=True)
    try:
        upgrade(engine, "0004")
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO nodes (id, name, docker_endpoint, gpu_type, gpu_count, state, "
                "profiling) VALUES (1, 'n1', 'unix:///x', 'V100', 1, 'up', 0)"))
            conn.execute(sa.text(
                "INSERT INTO gpus (id, node_id, gpu_index, uuid, model, memory_mib, "
                "has_energy_counter) "
                "VALUES (1, 1, 0, 'GPU-1', 'V100', 16384, 0)"))
            conn.execute(sa.text(
                "INSERT INTO jobs (id, image, command, env, epochs, epochs_done, submit_s, "
                "due_s, weight, application, grace_s, state, failures) VALUES ('j1', 'img', "
                "'[]', '{}', 5, 1, 0, 100, 1, 'app', 60, 'running', 0)"))
            conn.execute(sa.text(
                "INSERT INTO job_attempts (job_id, attempt, node_id, gpu_ids, start_s) "
                "VALUES ('j1', 1, 1, '[0]', 1.0)"))
            conn.execute(sa.text(
                "INSERT INTO epoch_events (job_id, attempt, epoch, start_s, end_s, node_id, "
                "gpu_type, gpus) VALUES ('j1', 1, 1, 1.0, 2.0, 1, 'V100', 1)"))
        assert upgrade(engine)[1] == head_revision()
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT state FROM jobs")).scalar_one() == "running"
            assert conn.execute(sa.text("SELECT COUNT(*) FROM job_attempts")).scalar_one() == 1
            assert conn.execute(sa.text("SELECT COUNT(*) FROM gpus")).scalar_one() == 1
            assert conn.execute(sa.text("SELECT COUNT(*) FROM epoch_events")).scalar_one() == 1
            if backend.name == "sqlite":
                assert conn.execute(sa.text("PRAGMA foreign_key_check")).all() == []
        with engine.begin() as conn:     # the new states are allowed now
            conn.execute(sa.text("UPDATE jobs SET state = 'profiling'"))
            conn.execute(sa.text("UPDATE nodes SET state = 'off'"))
    finally:
        engine.dispose()
