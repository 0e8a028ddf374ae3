"""Database URLs, engines and sessions: one URL selects SQLite or MariaDB (PyMySQL).

Accepted URLs: ``sqlite:///relative.db``, ``sqlite:////absolute/path.db`` and
``mysql+pymysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`` (``mariadb+pymysql``,
``mysql://`` and ``mariadb://`` mean the same; ``?unix_socket=/path`` for a socket).
A password may also come from a file (``password_file`` in the config,
``ANDREAS_DB_PASSWORD_FILE``), so it appears neither in the URL nor on a command line.

:class:`Store` hands out sessions; :func:`andreas.store.opener.open_store` is how every
component gets one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InvalidatePoolError

from andreas.infra.backoff import Backoff
from andreas.config import mask_url
from andreas.errors import InputError, error_line
from andreas.store.credentials import read_password_file
from andreas.store.errors import StoreUnavailable, describe_error, error_code, first_line

if TYPE_CHECKING:     # the ORM is imported when a session is asked for (the agent never needs it)
    from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

_DRIVERS = {"sqlite": "sqlite", "sqlite+pysqlite": "sqlite",
            "mysql": "mysql+pymysql", "mysql+pymysql": "mysql+pymysql",
            "mariadb": "mariadb+pymysql", "mariadb+pymysql": "mariadb+pymysql"}
# MySQL/MariaDB client error codes worth retrying at start: can't connect, server gone or
# lost during the handshake, too many connections, server shutting down / starting.
_RETRYABLE = {2002, 2003, 2006, 2013, 1040, 1053, 1205, 2005}
PING_AFTER_S = 0.5     # a pooled MariaDB connection idle longer is pinged before use


def parse_url(url: str | URL, password_file: str | None = None) -> URL:
    """A checked SQLAlchemy URL; InputError names the (masked) URL and what is wrong."""
    shown = mask_url(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as e:
        raise InputError(f"database URL {shown!r} is not valid ({first_line(e)}); expected "
                         "sqlite:///PATH or mysql+pymysql://USER@HOST[:PORT]/DATABASE") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise InputError(f"database URL {shown!r}: unsupported backend {parsed.drivername!r} "
                         "(use sqlite:///PATH or mysql+pymysql://USER@HOST[:PORT]/DATABASE)")
    if "@" in (parsed.host or "") or "@" in (parsed.database or ""):
        raise InputError(f"database URL {shown!r}: the user or password contains '@'; write it "
                         "as %40, or keep the password in a password file")
    parsed = parsed.set(drivername=driver)
    if driver == "sqlite":
        if parsed.host or parsed.username or parsed.password:
            raise InputError(f"database URL {shown!r}: an SQLite URL has no host or user; "
                             "write sqlite:////absolute/path.db")
        return parsed
    if not parsed.database:
        raise InputError(f"database URL {shown!r}: names no database (…/DATABASE at the end)")
    if not parsed.host and "unix_socket" not in parsed.query:
        raise InputError(f"database URL {shown!r}: names no host (or ?unix_socket=PATH)")
    if password_file:
        parsed = parsed.set(password=read_password_file(password_file))
    if "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    return parsed


def is_sqlite(url: URL | Engine) -> bool:
    return (url.url if isinstance(url, Engine) else url).get_backend_name() == "sqlite"


def sqlite_path(url: URL) -> Path | None:
    """The database file of an SQLite URL; None for an in-memory database."""
    if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
        return None
    return Path(url.database)


class _OneLinePoolErrors(logging.Filter):
    """SQLAlchemy's pool logs a traceback when it cannot reset a connection the server
    dropped (a database restart). During an outage that is expected, and the store's
    callers report the outage once, in one line; the pool's record keeps one line too."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()}: {error_line(record.exc_info[1])}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


# a logger's filters see only its own records: the pool class's logger, by name
logging.getLogger("sqlalchemy.pool.impl.QueuePool").addFilter(_OneLinePoolErrors())


def make_engine(url: str | URL, *, password_file: str | None = None,
                create_dir: bool = False) -> Engine:
    """An engine for the URL; nothing is connected yet (see :func:`connect`).

    SQLite: WAL journal (agents write while the manager reads), foreign keys on, 30 s busy
    timeout. ``create_dir`` makes the database file's directory (``andreas db upgrade``);
    otherwise a missing file is an error naming the command that creates it, rather than
    a new empty database.
    """
    parsed = parse_url(url, password_file)
    if is_sqlite(parsed):
        path = sqlite_path(parsed)
        if path is not None:
            if create_dir:
                try:
                    path.expanduser().parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise InputError(f"database URL {mask_url(parsed)!r}: cannot create "
                                     f"directory {path.parent} ({e.strerror})") from None
            elif not path.expanduser().exists():
                raise StoreUnavailable(f"database {mask_url(parsed)}: file {path} does not "
                                       "exist; create it with `andreas db upgrade`")
            parsed = parsed.set(database=str(path.expanduser()))
        engine = create_engine(parsed, connect_args={"timeout": 30},
                               json_deserializer=read_json)
        event.listen(engine, "connect", _sqlite_on_connect)
        return engine
    from andreas.store.quick import tls_args

    engine = create_engine(parsed, pool_recycle=3600,
                           connect_args={"connect_timeout": 10,
                                         **tls_args(parsed.host, dict(parsed.query))},
                           json_deserializer=read_json)
    ping_after_rest(engine)
    return engine


def ping_after_rest(engine: Engine, rest_s: float = PING_AFTER_S) -> None:
    """SQLAlchemy's ``pool_pre_ping`` for connections that rested in the pool more than
    ``rest_s``: one a transaction of this process used a moment ago is as alive as a ping
    would show (a server can go away just after a ping too, and the store's callers handle
    that), so a burst of transactions (a manager tick: 7 before a start) pings once, not
    before each. A failed ping invalidates the pool, as ``pool_pre_ping`` does."""
    dialect = engine.dialect

    def checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["andreas_rested_from"] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("andreas_rested_from")
        if since is None or time.monotonic() - since <= rest_s:
            return                          # new, or used a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as e:
            if dialect.is_disconnect(e, dbapi_connection, None):
                raise InvalidatePoolError(str(e)) from e
            raise

    event.listen(engine, "checkin", checkin)
    event.listen(engine, "checkout", checkout)


def read_json(text: str | bytes) -> Any:
    """How every JSON column is read: a value that does not parse (a row edited by hand
    on SQLite, which checks nothing) is None, logged, never an exception in the middle of
    a query; readers treat None as "unknown" (``store/read.py``, ``plandoc``)."""
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        shown = _excerpt(text)
        if shown not in _UNREADABLE and len(_UNREADABLE) < 1000:   # once each, not per tick
            _UNREADABLE.add(shown)
            log.error("a stored JSON value does not parse (%s); read as unknown", shown)
        return None


_UNREADABLE: set[str] = set()


def _excerpt(text: str | bytes) -> str:
    shown = repr(text[:40])
    return shown + ("..." if len(text) > 40 else "")


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.close()
    # Older SQLite builds lack the math functions the queries use.
    dbapi_connection.create_function("floor", 1, _floor, deterministic=True)


def _floor(x: float | None) -> float | None:
    return None if x is None else float(math.floor(x))


def connect(engine: Engine, *, retries: int = 0, backoff_s: float = 1.0,
            max_backoff_s: float = 30.0, sleep: Callable[[float], None] = time.sleep) -> None:
    """Check that the database answers; retry unreachable servers with exponential back-off.

    Only "cannot reach / overloaded" errors are retried; a refused login or an unknown
    database fails at once. Raises StoreUnavailable naming the masked URL.
    """
    shown = mask_url(engine.url)
    backoff = Backoff(initial_s=backoff_s, max_s=max_backoff_s)
    for attempt in range(retries + 1):
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            return
        except DBAPIError as e:
            code = error_code(e)
            retry = attempt < retries and code in _RETRYABLE
            if not retry:
                hint = _hint(code)
                raise StoreUnavailable(f"cannot use database {shown}: {describe_error(e)}"
                                       f"{hint}") from None
            delay_s = backoff.delay_s(attempt)
            log.warning("database %s not reachable (%s); retry %d/%d in %.1f s", shown,
                        describe_error(e), attempt + 1, retries, delay_s)
            sleep(delay_s)


def _hint(code: int | None) -> str:
    if code in (2002, 2003, 2005, 2006, 2013):
        return " (is the server running and the host/port right?)"
    if code == 1045:
        return " (wrong user or password)"
    if code == 1049:
        return " (create the database first, see README 'Store')"
    if code in (1044, 1142, 1143):
        return " (this account lacks a privilege)"
    return ""


class WriteCount:
    """Counts the statements an engine sends that may change data: every statement but a
    SELECT, except the manager lease's own (which holds no data a reader loads). Unchanged
    between two calls: this process changed nothing in between (other processes may
    have; a read is as old as its snapshot anyway). Thread-safe."""

    def __init__(self, engine: Engine) -> None:
        self._lock = threading.Lock()
        self._count = 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        head = statement.lstrip()[:32].upper()
        if head.startswith("SELECT") or head.startswith("UPDATE MANAGER_LEASE"):
            return
        with self._lock:
            self._count += 1

    def __call__(self) -> int:
        with self._lock:
            return self._count


@dataclass(frozen=True)
class Store:
    """An open, migrated database: ``with store.session() as s:`` commits on success;
    ``with store.begin() as conn:`` is the same transaction without the ORM (whose
    import the short commands, ``andreas submit``, do without)."""

    engine: Engine

    @property
    def url(self) -> str:
        """The URL with the password masked."""
        return mask_url(self.engine.url)

    @functools.cached_property
    def sessions(self) -> sessionmaker[Session]:
        from sqlalchemy.orm import sessionmaker

        return sessionmaker(self.engine, expire_on_commit=False)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions.begin() as s:
            yield s

    @functools.cached_property
    def writes(self) -> WriteCount:
        """The count of statements this process sent that may have changed the store's
        data (counted from the first use of this property on)."""
        return WriteCount(self.engine)

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    @functools.cached_property
    def wake_key(self) -> str:
        """The name submitters and the manager of this database agree on for wake-ups
        (``andreas.infra.nudge``): the SQLite file's real path, or the MariaDB server's
        own host name, port and database, the same from every client."""
        from andreas.store.quick import mysql_wake_key, sqlite_wake_key

        url = self.engine.url
        if is_sqlite(url):
            return sqlite_wake_key(url.database or ":memory:")
        with self.engine.connect() as conn:
            host, port, database = conn.exec_driver_sql(
                "SELECT @@hostname, @@port, DATABASE()").one()
        return mysql_wake_key(str(host), int(port), str(database))

    def dispose(self) -> None:
        self.engine.dispose()


def __getattr__(name: str) -> Any:
    """``Session`` and ``sessionmaker`` for the manager's modules (``from
    andreas.store.engine import Session``), importing the ORM only when asked."""
    if name in ("Session", "sessionmaker"):
        from sqlalchemy import orm

        return getattr(orm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
