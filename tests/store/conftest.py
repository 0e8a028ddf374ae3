"""Fixtures of the store's contract suite: every test runs on SQLite and on a real MariaDB.

MariaDB comes from ``ANDREAS_TEST_MARIADB_URL`` (an administrator's URL), which
``scripts/test.sh`` exports after starting a private server. Without it, or with the
server unreachable, the MariaDB half FAILS (never skips): a skipped backend would hide
that the contract was not checked.

Each test module gets its own fresh database per backend, migrated with Alembic.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from andreas.store import Store, migrate, open_store

MARIADB_ENV = "ANDREAS_TEST_MARIADB_URL"
BACKENDS = ("sqlite", "mariadb")


def mariadb_admin_url() -> URL:
    raw = os.environ.get(MARIADB_ENV)
    if not raw:
        ci = " (CI=true: the test command must provide it)" if os.environ.get("CI") else ""
        pytest.fail(f"{MARIADB_ENV} is not set{ci}: the store tests run against a real "
                    "MariaDB too; run `bash scripts/test.sh`, which installs and starts a "
                    "private server and exports it", pytrace=False)
    return make_url(raw)


def admin_engine(raw_url: str | None = None) -> sa.Engine:
    """The administrator's engine on the test MariaDB (or on the server at ``raw_url``)."""
    url = mariadb_admin_url() if raw_url is None else make_url(raw_url)
    engine = sa.create_engine(url, pool_pre_ping=True)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except sa.exc.DBAPIError as e:
        engine.dispose()
        pytest.fail(f"MariaDB at {url.render_as_string(hide_password=True)} is unreachable: "
                    f"{e.orig}; run `bash scripts/test.sh`", pytrace=False)
    return engine


@dataclass
class Backend:
    """One backend of the suite; ``fresh_url()`` makes another empty database."""

    name: str
    tmp: Path
    admin: sa.Engine | None = None
    made: list[str] = field(default_factory=list)
    _n: itertools.count = field(default_factory=itertools.count)

    @property
    def mariadb(self) -> bool:
        return self.name == "mariadb"

    def fresh_url(self) -> str:
        if not self.mariadb:
            return f"sqlite:///{self.tmp / f'db{next(self._n)}.db'}"
        name = f"t_{uuid.uuid4().hex[:12]}"
        with self.admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 "
                                 "COLLATE utf8mb4_unicode_ci")
        self.made.append(name)
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def close(self) -> None:
        if self.admin is not None:
            with self.admin.begin() as conn:
                for name in self.made:
                    conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
            self.admin.dispose()


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request, tmp_path_factory) -> Iterator[Backend]:
    tmp = tmp_path_factory.mktemp(request.param)
    b = Backend(request.param, tmp, admin_engine() if request.param == "mariadb" else None)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def db_url(backend: Backend) -> str:
    """A migrated database shared by one module's tests (they use distinct names)."""
    url = migrate.upgrade_url(backend.fresh_url())
    return url


@pytest.fixture(scope="module")
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    try:
        yield s
    finally:
        s.dispose()


def emptied(store: Store) -> Store:
    """The store with every table emptied (children first): one module database serves
    many tests, each of which starts from nothing."""
    from andreas.store import Base

    with store.session() as s:
        for table in reversed(Base.metadata.sorted_tables):
            s.execute(table.delete())
    return store
