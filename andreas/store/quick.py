"""A submission without SQLAlchemy: the one write ``andreas submit`` makes, through the
driver itself (stdlib ``sqlite3``, or PyMySQL).

Importing SQLAlchemy costs a short command more than everything else it does together
(docs/results.md, "Submission"), so the submission's happy path speaks the driver's SQL
directly: the same row as :func:`andreas.store.submissions.add_job` (a test compares
them column by column on both backends), the same id check, MariaDB submitters through
``andreas_submit``. Whatever this path does not handle itself (a URL with options it does
not know, a database not at the head revision, a server that does not answer, any
error before the write) it hands back as ``None`` and the caller takes the SQLAlchemy
path, which explains the problem the usual way.
"""

from __future__ import annotations

import json
import os
import types
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from types import ModuleType

from andreas.errors import AndreasError, InputError
from andreas.store import credentials
from andreas.store.errors import StoreUnavailable

# The columns a submission writes, in the order of the INSERT (tests hold this list to
# the ``jobs`` table: a new column must be added here or have a server default).
COLUMNS = ("id", "image", "command", "env", "epochs", "epochs_done", "submit_s", "due_s",
           "weight", "application", "grace_s", "state", "state_changed_s", "max_gpus",
           "failures", "reason", "gpu_milli", "gpu_memory_mib", "owner")
_MYSQL_QUERY = frozenset({"charset", "unix_socket"})
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
_CALL_SUBMIT = ("CALL andreas_submit(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")


class DuplicateId(AndreasError):
    """A job with this id (ignoring case) exists; ``existing`` is its stored id."""

    def __init__(self, job_id: str, existing: str) -> None:
        super().__init__(f"job id {job_id!r}: taken by {existing!r}")
        self.existing = existing


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the driver needs: ``kind`` sqlite (``path``) or mysql (``connect`` kwargs)."""

    kind: str
    path: str = ""
    connect: dict[str, Any] | None = None


def target(url: str, password_file: str | None) -> Target | None:
    """The URL for the driver, or None when it has anything this path does not handle."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme in ("sqlite", "sqlite+pysqlite"):
        # sqlite:///relative or sqlite:////absolute, as SQLAlchemy reads it
        if parts.netloc or parts.query or not parts.path.startswith("/"):
            return None
        path = parts.path[1:]
        if not path or path == ":memory:" or path.startswith("file:"):
            return None
        return Target(kind="sqlite", path=os.path.expanduser(path))
    if scheme not in ("mysql", "mysql+pymysql", "mariadb", "mariadb+pymysql"):
        return None
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    database = urllib.parse.unquote(parts.path.lstrip("/"))
    if set(query) - _MYSQL_QUERY or not database or "/" in database:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    if password_file:
        password = credentials.read_password_file(password_file)
    kwargs: dict[str, Any] = {"user": user, "password": password or "",
                              "database": database, "charset": query.get("charset", "utf8mb4"),
                              "connect_timeout": 10, "autocommit": True}
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"]
    if parts.hostname:
        kwargs["host"] = parts.hostname
    if port:
        kwargs["port"] = port
    if not parts.hostname and "unix_socket" not in query:
        return None
    kwargs.update(tls_args(parts.hostname, query))
    return Target(kind="mysql", connect=kwargs)


def tls_args(host: str | None, query: dict[str, Any]) -> dict[str, Any]:
    """PyMySQL's TLS arguments for a connection the URL asks nothing about TLS for.

    PyMySQL >= 2 negotiates TLS whenever the server offers it and, for that, loads the
    system's CA store on every connection (0.15 s, most of a short command's connect)
    although, without a CA in the URL, it verifies no certificate. Over a unix socket or
    the loopback interface TLS protects nothing, so it is off there; elsewhere PyMySQL's
    default stands, and a site sets ``ssl_ca`` & co. in the URL to verify the server."""
    if any(str(key).startswith("ssl") for key in query):
        return {}
    if "unix_socket" in query or (host or "localhost").lower() in _LOOPBACK:
        return {"ssl_disabled": True}
    return {}


def import_pymysql(*, tls: bool = True) -> Any:
    """PyMySQL, imported without cryptography (about 9 MB and 0.05-0.1 s, loaded at import
    time when installed, e.g. beside andreas[manager]'s paramiko) for its one use: MySQL
    8's RSA password exchange (sha256_password, caching_sha2_password without TLS), which
    MariaDB's accounts never use; it is imported on the first such exchange instead.
    ``tls`` False (a connection with ``ssl_disabled``, which never uses it): the ``ssl``
    module PyMySQL imports at its top (10-20 ms) is imported on its first use instead.
    None when PyMySQL is not installed."""
    import sys

    if "pymysql" in sys.modules:
        return sys.modules["pymysql"]
    # cast: a None entry is the import system's own mark of a module absent
    modules = cast("dict[str, ModuleType | None]", sys.modules)
    had, saved = "cryptography" in modules, modules.get("cryptography")
    modules["cryptography"] = None
    try:
        if not tls:
            _import_without_ssl()
        import pymysql
        from pymysql import _auth
    except ImportError:
        return None
    finally:
        if not had:
            del modules["cryptography"]
        else:
            modules["cryptography"] = saved
    if getattr(_auth, "_have_cryptography", True) or not hasattr(_auth, "sha2_rsa_encrypt"):
        return pymysql
    eager = _auth.sha2_rsa_encrypt

    def sha2_rsa_encrypt(password: bytes, salt: bytes, public_key: bytes) -> bytes:
        try:
            from cryptography.hazmat.backends import default_backend
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import padding
        except ImportError:
            return eager(password, salt, public_key)   # PyMySQL's own error message
        _auth.default_backend, _auth.hashes = default_backend, hashes
        _auth.serialization, _auth.padding = serialization, padding
        _auth._have_cryptography = True
        return eager(password, salt, public_key)

    _auth.sha2_rsa_encrypt = sha2_rsa_encrypt
    return pymysql


class _SslOnUse(types.ModuleType):
    """Stands in for ``ssl`` while PyMySQL is imported for a connection without TLS, and
    then in PyMySQL's module, where it imports the real ``ssl`` on its first use."""

    def __getattr__(self, name: str) -> Any:
        import importlib
        import sys

        if sys.modules.get("ssl") is self:      # used while PyMySQL is being imported
            del sys.modules["ssl"]
        return getattr(importlib.import_module("ssl"), name)


def _import_without_ssl() -> None:
    """PyMySQL's ``connections`` module, with :class:`_SslOnUse` as its ``ssl``; nothing
    outside PyMySQL sees the stand-in (``sys.modules`` is restored)."""
    import sys

    if "ssl" in sys.modules:
        return
    stand_in = sys.modules["ssl"] = _SslOnUse("ssl")
    try:
        import pymysql.connections  # noqa: F401 - imported here with the stand-in
    finally:
        if sys.modules.get("ssl") is stand_in:
            del sys.modules["ssl"]


@contextmanager
def _connection(where: Target) -> Iterator[tuple[Any, type[BaseException]]]:
    """An open driver connection and its IntegrityError class; closed (rolled back unless
    committed) at the end."""
    if where.kind == "sqlite":
        import sqlite3

        if not os.path.exists(where.path):
            raise LookupError(where.path)       # the SQLAlchemy path names the command
        conn: Any = sqlite3.connect(where.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN IMMEDIATE")
        integrity: type[BaseException] = sqlite3.IntegrityError
    else:
        kwargs = where.connect or {}
        pymysql = import_pymysql(tls=not kwargs.get("ssl_disabled", False))
        conn = pymysql.connect(**kwargs)
        integrity = pymysql.err.IntegrityError
    try:
        yield conn, integrity
    finally:
        conn.close()


def _sqlite_revision_ok(conn: Any) -> bool:
    from andreas.store.schema import head_revision

    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row is not None and row[0] == head_revision()


def _mysql_prepare(cur: Any) -> tuple[str, bool, str] | None:
    """(login, restricted, wake key) of a MariaDB session at the head revision, else None
    (one round trip; an unreadable ``alembic_version`` raises, and the caller hands the
    submission to the full path, which checks and explains)."""
    from andreas.store.schema import head_revision

    cur.execute("SELECT SUBSTRING_INDEX(USER(), '@', 1), (SELECT COUNT(*) FROM "
                "information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
                "TABLE_NAME = 'jobs'), @@hostname, @@port, DATABASE(), "
                "(SELECT MAX(version_num) FROM alembic_version), "
                "(SELECT COUNT(*) FROM alembic_version)")
    me, sees_jobs, host, port, database, revision, revisions = cur.fetchone()
    if revisions != 1 or revision != head_revision():
        return None
    return str(me), not sees_jobs, mysql_wake_key(str(host), int(port), str(database))


def mysql_wake_key(host: str, port: int, database: str) -> str:
    """The manager's wake-up name for a MariaDB database (the same from every client)."""
    return f"mysql:{host}:{port}/{database}"


def _values(row: dict[str, Any]) -> list[Any]:
    out = [row[c] for c in COLUMNS]
    for i, name in enumerate(COLUMNS):
        if name in ("command", "env"):
            out[i] = json.dumps(out[i])
    return out


def add_job(url: str, password_file: str | None,
            row: dict[str, Any]) -> tuple[str, str] | None:
    """Insert the job row (``row``: every name of :data:`COLUMNS` but ``owner``); returns
    (owner, wake key), or None when the SQLAlchemy path must do it. Raises DuplicateId,
    InputError for a procedure's refusal, and StoreUnavailable when the write itself
    failed (it may or may not have happened)."""
    where = target(url, password_file)
    if where is None:
        return None
    try:
        with _connection(where) as (conn, integrity):
            return (_sqlite_add(conn, integrity, row, where.path)
                    if where.kind == "sqlite" else _mysql_add(conn, integrity, row))
    except AndreasError:
        raise
    except _Written as e:
        raise StoreUnavailable(f"storing job {row['id']}: {e}") from None
    except Exception:  # noqa: BLE001 - anything before the write: the full path explains it
        return None


class _Written(Exception):
    """The write was sent and failed in a way only the full path could explain."""


def _sqlite_add(conn: Any, integrity: type[BaseException], row: dict[str, Any],
                path: str) -> tuple[str, str] | None:
    if not _sqlite_revision_ok(conn):
        return None
    existing = conn.execute("SELECT id FROM jobs WHERE id = ? COLLATE NOCASE LIMIT 1",
                            (row["id"],)).fetchone()
    if existing is not None:
        raise DuplicateId(row["id"], existing[0])
    owner = credentials.os_user()
    values = _values({**row, "owner": owner})
    marks = ", ".join("?" for _ in COLUMNS)
    try:
        conn.execute(f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({marks})", values)
        conn.execute("COMMIT")
    except integrity as e:
        raise DuplicateId(row["id"], row["id"]) from e
    except Exception as e:
        raise _Written(str(e)) from e
    return owner, sqlite_wake_key(path)


def sqlite_wake_key(path: str) -> str:
    """The manager's wake-up name for an SQLite database file."""
    return f"sqlite:{os.path.realpath(path)}"


def _mysql_add(conn: Any, integrity: type[BaseException],
               row: dict[str, Any]) -> tuple[str, str] | None:
    """The write is one statement (the procedure's one INSERT, or the INSERT itself; the
    id check before it only reads), committed by itself: the session is in autocommit
    mode, which spares the round trips of ``SET autocommit = 0`` and ``COMMIT``."""
    with conn.cursor() as cur:
        prepared = _mysql_prepare(cur)
        if prepared is None:
            return None
        me, restricted, key = prepared
        try:
            if restricted:
                cur.execute(_CALL_SUBMIT, [row["id"], row["image"], json.dumps(row["command"]),
                                           json.dumps(row["env"]), row["epochs"], row["due_s"],
                                           row["weight"], row["application"], row["grace_s"],
                                           row["max_gpus"], row["gpu_milli"],
                                           row["gpu_memory_mib"]])
            else:
                cur.execute("SELECT id FROM jobs WHERE id = %s LIMIT 1", [row["id"]])
                existing = cur.fetchone()
                if existing is not None:
                    raise DuplicateId(row["id"], existing[0])
                marks = ", ".join("%s" for _ in COLUMNS)
                cur.execute(f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({marks})",
                            _values({**row, "owner": me}))
        except integrity as e:
            raise DuplicateId(row["id"], row["id"]) from e
        except AndreasError:
            raise
        except Exception as e:
            refusal = _signalled(e)
            if refusal is not None:
                raise InputError(refusal) from None
            raise _Written(str(e)) from e
    return me, key


def _signalled(e: BaseException) -> str | None:
    """The message of a procedure's SIGNAL (error 1644), meant for the user."""
    args: tuple[Any, ...] = getattr(e, "args", ())
    if len(args) > 1 and args[0] == 1644:
        return str(args[1])
    return None
