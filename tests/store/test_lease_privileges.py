"""The manager lease against the real MariaDB accounts: only the manager's account takes
it; a submitter can neither take nor block it, with the lease row or with the server's
named locks (which any account may take, and which the manager no longer uses)."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from andreas.manager.lock import Lease, LockHeld, acquire
from andreas.store import accounts, migrate
from andreas.store.engine import error_code, make_engine

from .conftest import Backend, admin_engine

DENIED = {1044, 1142, 1143, 1227}


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> Iterator[dict[str, sa.Engine]]:
    backend = Backend("mariadb", tmp_path_factory.mktemp("lease"), admin_engine())
    prefix = f"l{secrets.token_hex(3)}_"
    person = f"mallory{secrets.token_hex(2)}"
    passwords = {role: secrets.token_urlsafe(12) for role in (*accounts.ROLES, "person")}
    admin_url = make_url(backend.fresh_url())
    admin = make_engine(admin_url)
    out: dict[str, sa.Engine] = {}
    try:
        migrate.upgrade(admin)
        accounts.apply(admin, admin_url.database, {r: passwords[r] for r in accounts.ROLES},
                       prefix, submitter=True)
        accounts.add_user(admin, person, password=passwords["person"], prefix=prefix)
        for role in accounts.ROLES:
            out[role] = make_engine(admin_url.set(username=f"{prefix}{role}",
                                                  password=passwords[role]))
        out["submitter"] = make_engine(admin_url.set(username=person,
                                                     password=passwords["person"]))
        out["admin"] = admin
        yield out
    finally:
        for e in out.values():
            e.dispose()
        accounts.remove_user(admin, person)
        accounts.drop(admin, prefix)
        admin.dispose()
        backend.close()


def refused(engine: sa.Engine, sql: str) -> None:
    with pytest.raises(sa.exc.DBAPIError) as err, engine.begin() as conn:
        conn.execute(sa.text(sql))
    assert error_code(err.value) in DENIED, f"{sql}: {err.value.orig}"


def test_only_the_manager_account_may_write_the_lease(engines):
    for role in ("submitter", "agent", "reporter"):
        for sql in ("UPDATE manager_lease SET token = token + 1, expires_s = 2e9",
                    "INSERT INTO manager_lease (id, holder, token, expires_s, renewed_s) "
                    "VALUES (2, 'x', 1, 2e9, 0)",
                    "DELETE FROM manager_lease"):
            refused(engines[role], sql)
    for role in ("submitter", "agent"):
        refused(engines[role], "SELECT * FROM manager_lease")
        refused(engines[role], "SELECT * FROM manager_lease FOR UPDATE")
    with engines["reporter"].connect() as conn:        # who manages is no secret to it
        assert conn.execute(sa.text("SELECT COUNT(*) FROM manager_lease")).scalar() == 1


def test_a_submitter_cannot_block_or_take_the_lease(engines):
    holding = engines["submitter"].connect()
    try:                   # the named lock a submitter could hold to stop every manager
        assert holding.execute(sa.text("SELECT GET_LOCK('andreas_manager', 0)")).scalar() == 1
        manager = Lease(engines["manager"], ttl_s=30)
        assert acquire(manager, "exit")                        # not blocked
        second = Lease(engines["manager"], ttl_s=30)
        with pytest.raises(LockHeld, match="another manager holds the manager lease"):
            acquire(second, "exit")
        person = Lease(engines["submitter"], ttl_s=30)
        with pytest.raises(LockHeld, match="this database account may not take the "
                                           "manager lease"):
            acquire(person, "wait", stop=threading.Event())     # one line, no endless wait
        manager.check()                                          # still the holder
        manager.release()
    finally:
        holding.close()
