"""Bad URLs, wrong credentials, a server that is down, retries with back-off."""

from __future__ import annotations


import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from tests.ports import free_port
from andreas.cli import main
from andreas.errors import InputError
from andreas.store import StoreUnavailable, open_store
from andreas.store.engine import connect, make_engine, parse_url

from .conftest import mariadb_admin_url

SECRET = "Very-Secret-42"




@pytest.mark.parametrize("url, message", [
    ("not a url", "is not valid"),
    (f"garbage:{SECRET}@", "is not valid"),
    (f"postgresql://u:{SECRET}@db/andreas", "unsupported backend 'postgresql'"),
    (f"mysql+mysqldb://u:{SECRET}@db/andreas", "unsupported backend 'mysql\\+mysqldb'"),
    (f"mysql+pymysql://u:{SECRET}@db", "names no database"),
    (f"mysql+pymysql://u:{SECRET}@/andreas", "names no host"),
    (f"mysql+pymysql://u:{SECRET}@x@db/andreas", "contains '@'"),
    (f"sqlite://u:{SECRET}@host/x.db", "SQLite URL has no host or user"),
])
def test_invalid_url_is_an_input_error_with_the_password_masked(url, message):
    with pytest.raises(InputError, match=message) as err:
        open_store(url)
    text = str(err.value)
    assert SECRET not in text and "database URL '" in text
    result = CliRunner().invoke(main, ["db", "current"], env={"ANDREAS_DB_URL": url,
                                                              "ANDREAS_CONFIG": None})
    assert result.exit_code == 2
    assert result.output.startswith("andreas: error: database URL ")
    assert SECRET not in result.output and result.output.count("\n") == 1


def test_mysql_and_mariadb_schemes_mean_pymysql():
    assert parse_url("mysql://u@h/d").drivername == "mysql+pymysql"
    assert parse_url("mariadb://u@h/d").drivername == "mariadb+pymysql"
    assert parse_url("mysql+pymysql://u@h/d").query["charset"] == "utf8mb4"
    assert parse_url("mysql+pymysql://u@/d?unix_socket=/run/m.sock").database == "d"


def test_server_down_is_a_clear_message_and_retried_with_back_off():
    url = f"mysql+pymysql://andreas:{SECRET}@127.0.0.1:{free_port()}/andreas"
    slept: list[float] = []
    with pytest.raises(StoreUnavailable) as err:
        open_store(url, retries=5, backoff_s=1.0, sleep=slept.append)
    assert slept == [1.0, 2.0, 4.0, 8.0, 16.0]
    text = str(err.value)
    assert "(2003)" in text and "is the server running" in text
    assert SECRET not in text and "andreas:***@127.0.0.1" in text
    result = CliRunner().invoke(main, ["db", "check"], env={"ANDREAS_DB_URL": url,
                                                            "ANDREAS_CONFIG": None})
    assert result.exit_code == 2 and result.output.startswith("andreas: error: cannot use "
                                                              "database ")
    assert SECRET not in result.output


def test_back_off_is_capped_and_a_server_that_comes_back_is_used(backend, db_url, monkeypatch):
    engine = make_engine(db_url)
    real_connect = engine.connect
    failures = iter(range(6))

    def flaky():
        if next(failures, None) is not None:
            raise sa.exc.OperationalError("SELECT 1", {}, _Orig(2003, "Can't connect"))
        return real_connect()

    monkeypatch.setattr(engine, "connect", flaky)
    slept: list[float] = []
    try:
        connect(engine, retries=10, backoff_s=4.0, max_backoff_s=20.0, sleep=slept.append)
    finally:
        engine.dispose()
    assert slept == [4.0, 8.0, 16.0, 20.0, 20.0, 20.0]


class _Orig(Exception):
    pass


def test_wrong_credentials_fail_at_once_without_the_password(backend, tmp_path):
    if not backend.mariadb:   # SQLite has no login; its analogue is a file it cannot use
        bad = tmp_path / "not-a-db.db"
        bad.write_bytes(b"this is not an SQLite database" * 100)
        with pytest.raises(StoreUnavailable, match="file is not a database"):
            open_store(f"sqlite:///{bad}", retries=3, sleep=pytest.fail)
        return
    url = mariadb_admin_url().set(password=SECRET)
    slept: list[float] = []
    with pytest.raises(StoreUnavailable) as err:
        open_store(url.render_as_string(hide_password=False), retries=3, sleep=slept.append)
    assert slept == []                                   # a refused login is not retried
    text = str(err.value)
    assert "(1045)" in text and "wrong user or password" in text and SECRET not in text


def test_unknown_database(backend, tmp_path):
    if not backend.mariadb:
        with pytest.raises(StoreUnavailable, match="create it with `andreas db upgrade`"):
            open_store(f"sqlite:///{tmp_path / 'none.db'}")
        return
    url = mariadb_admin_url().set(database="no_such_db_x")
    with pytest.raises(StoreUnavailable, match=r"\(1049\).*create the database first"):
        open_store(url.render_as_string(hide_password=False))


def test_password_from_a_file(backend, db_url, tmp_path):
    if not backend.mariadb:
        with pytest.raises(InputError, match="cannot read"):
            parse_url("mysql+pymysql://u@h/d", password_file=str(tmp_path / "missing"))
        return
    url = make_url(db_url)
    secret = tmp_path / "db-password"
    secret.write_text(url.password + "\n")
    bare = url.set(password=None).render_as_string(hide_password=False)
    env = {"ANDREAS_DB_URL": bare, "ANDREAS_DB_PASSWORD_FILE": str(secret),
           "ANDREAS_CONFIG": None}
    result = CliRunner().invoke(main, ["db", "check"], env=env)
    assert result.exit_code == 0, result.output
    assert url.password not in result.output
    env["ANDREAS_DB_PASSWORD_FILE"] = str(tmp_path / "missing")
    result = CliRunner().invoke(main, ["db", "check"], env=env)
    assert result.exit_code == 2 and "database password file" in result.output


def test_the_pools_reset_failure_is_one_line_without_a_traceback(caplog):
    """A connection the server dropped cannot be reset: SQLAlchemy's pool logs that with a
    traceback, which the store keeps to one line (an outage is reported once, briefly)."""
    import logging

    import andreas.store.engine  # noqa: F401  (installs the filter)

    pool_log = logging.getLogger("sqlalchemy.pool.impl.QueuePool")
    with caplog.at_level(logging.ERROR, logger="sqlalchemy.pool.impl.QueuePool"):
        try:
            raise ConnectionError("(2013, 'Lost connection to MySQL server during query')")
        except ConnectionError:
            pool_log.error("Exception during reset or similar", exc_info=True)
    [record] = caplog.records
    assert record.getMessage() == ("Exception during reset or similar: (2013, 'Lost "
                                   "connection to MySQL server during query')")
    assert record.exc_info is None and "Traceback" not in caplog.text
