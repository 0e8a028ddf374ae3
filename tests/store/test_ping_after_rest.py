"""A pooled connection is pinged before use only after resting in the pool (the store's
engines; SQLAlchemy's pool_pre_ping pinged before every transaction), and a connection
the server dropped while it rested is replaced without an error reaching the caller."""

from __future__ import annotations

import time

from andreas.store.engine import PING_AFTER_S, make_engine, ping_after_rest

from .conftest import admin_engine


def test_a_pooled_connection_is_pinged_only_after_resting(db_url, backend):
    engine = make_engine(db_url)
    if not backend.mariadb:            # SQLite files need no ping; the rule is the same
        ping_after_rest(engine)
    pings = []
    real = engine.dialect.do_ping
    engine.dialect.do_ping = lambda c: pings.append(1) or real(c)   # type: ignore[method-assign]

    def session_id() -> int:
        with engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT CONNECTION_ID()" if backend.mariadb else "SELECT 1").scalar()

    try:
        first = session_id()
        for _ in range(5):               # a burst: the connection was used a moment ago
            assert session_id() == first
        assert pings == []
        time.sleep(PING_AFTER_S + 0.2)
        assert session_id() == first and pings == [1]
        if backend.mariadb:              # dropped by the server while resting: replaced
            admin = admin_engine()
            try:
                with admin.begin() as conn:
                    conn.exec_driver_sql(f"KILL CONNECTION {int(first)}")
            finally:
                admin.dispose()
            time.sleep(PING_AFTER_S + 0.2)
            assert session_id() != first and len(pings) == 2
    finally:
        engine.dispose()

