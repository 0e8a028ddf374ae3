"""Opening the store: :func:`open_store` is how every component gets at the data.

It connects (with retries and back-off when asked, for daemons), refuses a database that
is not migrated to this version's head, and returns the :class:`~andreas.store.engine.Store`
that hands out sessions. Apart from ``engine.py`` so that the engine does not import the
migrations that import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from andreas.store.engine import Store, connect, make_engine

if TYPE_CHECKING:
    from andreas.config import Settings


def open_store(url: str | URL | None = None, *, settings: Settings | None = None,
               retries: int | None = None, backoff_s: float = 1.0,
               check_schema: bool = True,
               sleep: Callable[[float], None] = time.sleep) -> Store:
    """Connect to the configured (or given) database and check its schema revision.

    ``retries`` (default: the config's ``connect_retries`` when a daemon passes settings,
    else 0) retries an unreachable server with back-off. Raises StoreUnavailable or
    SchemaError (which names `andreas db upgrade`).
    """
    password_file = None
    if url is None:
        if settings is None:
            from andreas.config import load_settings

            settings = load_settings()
        url, password_file = settings.db_url, settings.db_password_file
    if retries is None:
        retries = settings.connect_retries if settings is not None else 0
    engine = make_engine(url, password_file=password_file)
    try:
        connect(engine, retries=retries, backoff_s=backoff_s, sleep=sleep)
        if check_schema:
            _require_head(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine=engine)


def _require_head(engine: Engine) -> None:
    """SchemaError unless the database is at the head revision: one query, and Alembic
    (about 0.1 s of imports) only to explain a database that is not."""
    from andreas.store.schema import schema_problem

    try:
        if schema_problem(engine) is None:
            return
    except DBAPIError:
        pass
    from andreas.store.migrate import require_head

    require_head(engine)
