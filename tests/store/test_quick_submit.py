"""The submission that needs no SQLAlchemy (``andreas.store.quick``) writes what the
SQLAlchemy path writes, on both backends, and hands everything else to that path."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from andreas.config import Settings
from andreas.errors import InputError
from andreas.service.submit import parse_submission, submit, submit_configured
from andreas.store import open_store, quick, tables
from andreas.store.errors import SchemaError

NOW = time.time()


def spec(name: str, **extra):
    return parse_submission(image="registry.example/ml/train:1", epochs="7", due="+2h",
                            weight="0.01", env=["LR=0.1", "TOKEN=a b"],
                            cmd="python train.py --x 'a b'", name=name, max_gpus="2",
                            grace_s="30", now_s=NOW, **extra)


def settings_for(url: str) -> Settings:
    return Settings(db_url=url, db_url_source="test")


def row(url: str, job_id: str) -> dict:
    store = open_store(url)
    try:
        with store.begin() as conn:
            found = conn.execute(sa.select(tables.jobs).where(tables.jobs.c.id == job_id)).one()
        return dict(found._mapping)
    finally:
        store.dispose()


def test_the_columns_written_are_every_column_with_a_python_default():
    # A new column with a default on the Python side (SQLAlchemy fills it, raw SQL would
    # not) must be added to quick.COLUMNS, or get a server default.
    with_default = {c.name for c in tables.jobs.c if c.default is not None}
    assert with_default <= set(quick.COLUMNS)
    assert set(quick.COLUMNS) <= {c.name for c in tables.jobs.c}


def test_the_quick_row_is_the_sqlalchemy_row(db_url):
    settings = settings_for(db_url)
    assert submit_configured(settings, spec("quick-a"), NOW) == "quick-a"
    store = open_store(db_url)
    try:
        submit(store, spec("slow-a"), NOW, default_grace_s=settings.executor.stop_grace_s)
    finally:
        store.dispose()
    fast, slow = row(db_url, "quick-a"), row(db_url, "slow-a")
    assert fast.pop("id") == "quick-a" and slow.pop("id") == "slow-a"
    assert fast == slow
    assert fast["command"] == ["python", "train.py", "--x", "a b"]
    assert fast["env"] == {"LR": "0.1", "TOKEN": "a b"} and fast["state"].value == "queued"


def test_a_taken_id_is_refused_ignoring_case_and_nothing_is_stored(db_url):
    settings = settings_for(db_url)
    submit_configured(settings, spec("Dup-B"), NOW)
    with pytest.raises(InputError, match="exists already as 'Dup-B'"):
        submit_configured(settings, spec("dup-b"), NOW)
    store = open_store(db_url)
    try:
        with store.begin() as conn:
            ids = conn.execute(sa.select(tables.jobs.c.id)
                               .where(sa.func.lower(tables.jobs.c.id) == "dup-b")).all()
    finally:
        store.dispose()
    assert ids == [("Dup-B",)]


def test_a_database_behind_the_head_takes_the_full_path_and_its_message(tmp_path):
    from andreas.store import migrate
    from andreas.store.engine import make_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url, create_dir=True)
    migrate.upgrade(engine, "0008")
    engine.dispose()
    assert quick.add_job(url, None, {}) is None
    with pytest.raises(SchemaError, match="andreas db upgrade"):
        submit_configured(settings_for(url), spec("old-c"), NOW)


@pytest.mark.parametrize("url, kind", [
    ("sqlite:////var/lib/andreas/a.db", "sqlite"),
    ("sqlite:///relative.db", "sqlite"),
    ("mysql+pymysql://alice:p%40ss@db.example.org:3307/andreas", "mysql"),
    ("mysql+pymysql://bob@/andreas?unix_socket=/run/mysqld/mysqld.sock", "mysql"),
])
def test_urls_the_quick_path_reads(url, kind):
    found = quick.target(url, None)
    assert found is not None and found.kind == kind
    if "alice" in url:
        assert found.connect == {"user": "alice", "password": "p@ss", "database": "andreas",
                                 "charset": "utf8mb4", "connect_timeout": 10,
                                 "autocommit": True, "host": "db.example.org",
                                 "port": 3307}


@pytest.mark.parametrize("url, tls_off", [
    ("mysql+pymysql://a@127.0.0.1:3306/andreas", True),
    ("mysql+pymysql://a@LocalHost/andreas", True),
    ("mysql+pymysql://a@[::1]:3306/andreas", True),
    ("mysql+pymysql://a@/andreas?unix_socket=/run/mysqld/mysqld.sock", True),
    ("mysql+pymysql://a@db.example.org/andreas", False),
])
def test_tls_is_off_only_where_it_protects_nothing(url, tls_off):
    """Loopback and unix sockets skip PyMySQL's per-connection CA load; a remote server
    keeps the driver's default, in the quick path and in SQLAlchemy's engine alike."""
    from andreas.store.engine import make_engine

    found = quick.target(url, None)
    assert found is not None and found.connect is not None
    assert found.connect.get("ssl_disabled", False) is tls_off
    engine, sent = make_engine(url), {}

    @sa.event.listens_for(engine, "do_connect")
    def capture(_dialect, _record, _args, params):
        sent.update(params)
        raise _NoConnect

    with pytest.raises(_NoConnect):
        engine.connect()
    assert sent.get("ssl_disabled", False) is tls_off


class _NoConnect(Exception):
    """Raised instead of connecting: the test reads the driver's arguments only."""


def test_a_url_asking_for_tls_keeps_it_on_loopback():
    assert quick.tls_args("127.0.0.1", {"ssl_ca": "/etc/ca.pem"}) == {}


@pytest.mark.parametrize("url", [
    "sqlite://", "sqlite:///:memory:", "sqlite:///file:x.db?mode=ro",
    "mysql+pymysql://a@db/andreas?ssl_ca=/etc/ca.pem", "postgresql://a@db/x",
    "mysql+pymysql://a@db/", "mysql+pymysql://a@db:notaport/andreas",
])
def test_urls_it_leaves_to_sqlalchemy(url):
    assert quick.target(url, None) is None


def test_submit_imports_no_sqlalchemy(tmp_path):
    """The point of the quick path: `andreas submit` stays clear of SQLAlchemy, numpy and
    rich (python -X importtime shows what a command imports)."""
    from andreas.store import migrate

    url = migrate.upgrade_url(f"sqlite:///{tmp_path / 'a.db'}")
    code = ("import sys\n"
            "from andreas.cli import main\n"
            "try:\n"
            "    main(['submit', 'busybox', '--epochs', '1', '--due', '+1h', '--weight', "
            "'0.1', '-q'], prog_name='andreas')\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "heavy = sorted(m for m in ('sqlalchemy', 'numpy', 'rich', 'yaml', 'alembic') "
            "if m in sys.modules)\n"
            "print('heavy:', heavy)\n")
    (tmp_path / "andreas.toml").write_text("")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"ANDREAS_DB_URL": url, "PATH": "/usr/bin:/bin",
                              "ANDREAS_CONFIG": str(tmp_path / "andreas.toml")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "heavy: []", out.stdout + out.stderr


def test_without_tls_pymysql_comes_without_ssl_and_with_it_on_first_use():
    """A connection with TLS off never uses ``ssl``: PyMySQL is imported without it; the
    module is imported when something asks PyMySQL for it, and is the one module of that
    name (nothing else sees a stand-in)."""
    code = ("import sys\n"
            "from andreas.store import quick\n"
            "pymysql = quick.import_pymysql(tls=False)\n"
            "print('_ssl' in sys.modules, 'ssl' in sys.modules, pymysql.connections.SSL_ENABLED)\n"
            "context = pymysql.connections.ssl.SSLContext\n"
            "import ssl\n"
            "print(context is ssl.SSLContext, type(sys.modules['ssl']).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True", "True", "module"]
