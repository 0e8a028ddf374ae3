"""README.md's MariaDB steps, as written, on the real server: the database created with
``CREATE DATABASE andreas CHARACTER SET utf8mb4`` (no collation: the server picks
``utf8mb4_general_ci``, not the tables' ``utf8mb4_unicode_ci``), the first upgrade as an
administrator, the accounts, one person's account; that person submits, sees the nodes
and cancels their own job with the ``andreas`` command."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from andreas.store import accounts, migrate
from andreas.store.engine import make_engine
from tests.jobs.conftest import run_cli

from .conftest import admin_engine, mariadb_admin_url
from .helpers import add_node


@pytest.fixture(scope="module")
def readme_db() -> Iterator[dict]:
    admin = admin_engine()
    name = f"r_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")   # README
        collation = conn.exec_driver_sql(
            "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA "
            f"WHERE SCHEMA_NAME = '{name}'").scalar_one()
    assert collation != "utf8mb4_unicode_ci"       # the case the README's command makes
    prefix = f"r{secrets.token_hex(3)}_"
    person = f"carol{secrets.token_hex(2)}"
    password = secrets.token_urlsafe(12)
    url = mariadb_admin_url().set(database=name)
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        migrate.upgrade(engine)                              # `andreas db upgrade`
        accounts.apply(engine, name, {r: secrets.token_urlsafe(12) for r in accounts.ROLES},
                       prefix, submitter=True)               # `andreas db create-users`
        accounts.add_user(engine, person, password=password, prefix=prefix)
        yield {"admin": url.render_as_string(hide_password=False), "engine": engine,
               "person": make_url(url).set(username=person, password=password)
               .render_as_string(hide_password=False)}
    finally:
        accounts.remove_user(engine, person)
        accounts.drop(engine, prefix)
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


def test_a_person_submits_sees_the_nodes_and_cancels_their_job(readme_db):
    from andreas.store import open_store

    admin = open_store(readme_db["admin"])
    try:
        add_node(admin, 2, "V100", name="gpu01")
    finally:
        admin.dispose()
    person = readme_db["person"]
    r = run_cli(person, "submit", "registry.example/ml/train:1", "--epochs", "3", "--due",
                "+2h", "--weight", "0.1", "--name", "carols-job", "-q")
    assert r.exit_code == 0, r.output
    r = run_cli(person, "nodes")
    assert r.exit_code == 0, r.output
    assert "gpu01" in r.output
    r = run_cli(person, "queue")
    assert r.exit_code == 0 and "carols-job" in r.output, r.output
    r = run_cli(person, "cancel", "carols-job")
    assert r.exit_code == 0, r.output
    assert "cancelled (was queued)" in r.output
