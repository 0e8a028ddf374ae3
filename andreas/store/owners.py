"""Who is asking, and whether they may act on a job (docs/design/trust.md).

- **MariaDB**: the caller is the database account (its login name,
  ``SUBSTRING_INDEX(USER(), '@', 1)``). An account that cannot see the ``jobs`` table is a
  *submitter* (the ``<prefix>submitter`` role of :mod:`andreas.store.accounts`): it reads
  its own jobs through the views ``my_jobs`` / ``my_job_attempts`` and writes only
  through the procedures ``andreas_submit`` / ``andreas_cancel`` (migration 0006). The
  database enforces all of that. Any account that sees ``jobs`` (manager, reporter,
  administrator) is an *operator*: the database lets it read every job and, where its
  grants allow, change any.
- **SQLite** (embedded, one machine): the caller is the OS user; the *operator* is the
  user who owns the database file (or root). Owners are recorded and checked here, in
  the library the CLI calls; anyone who can write the file can bypass that, so it is a
  guard against mistakes, not a security boundary.
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass
from typing import Any
from pathlib import Path

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from andreas.errors import InputError, NotPermitted
from andreas.store import credentials
from andreas.store.engine import error_code, sqlite_path
from andreas.store.tables import job_attempts as JobAttempt
from andreas.store.tables import jobs as Job

if TYPE_CHECKING:      # the ORM only for the hint: a submission does without it
    from sqlalchemy.orm import Session

_CACHE_KEY = "andreas_access"
# SQLSTATE 45000 from a procedure's SIGNAL (its message is meant for the user).
SIGNAL_CODE = 1644
# Read-only stand-ins for the tables, typed like them, for a submitter's session.
MY_JOBS = sa.table("my_jobs", *(sa.column(c.name, c.type) for c in Job.c))
MY_ATTEMPTS = sa.table("my_job_attempts",
                       *(sa.column(c.name, c.type) for c in JobAttempt.c))


@dataclass(frozen=True, kw_only=True)
class Access:
    """The caller of one session: ``user`` is what ``jobs.owner`` records for them."""

    user: str
    operator: bool                    # may read and cancel every job
    restricted: bool                  # a MariaDB submitter: views and procedures only


def os_user() -> str:
    """The effective OS user's name (its uid when the passwd database has no entry)."""
    return credentials.os_user()


def _owner_of(path: Path) -> str | None:
    try:
        uid = path.stat().st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _conn(db: Session | Connection) -> Connection:
    return db if isinstance(db, Connection) else db.connection()


def access(db: Session | Connection) -> Access:
    """The caller of this session (MariaDB: probed once per connection and cached)."""
    conn = _conn(db)
    if conn.dialect.name == "sqlite":
        me = os_user()
        path = sqlite_path(conn.engine.url)
        file_owner = _owner_of(path) if path is not None else None
        return Access(user=me, operator=me in ("root", file_owner) or file_owner is None,
                      restricted=False)
    cached = conn.info.get(_CACHE_KEY)
    if isinstance(cached, Access):
        return cached
    me, sees_jobs = conn.execute(sa.text(
        "SELECT SUBSTRING_INDEX(USER(), '@', 1), (SELECT COUNT(*) FROM "
        "information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
        "TABLE_NAME = 'jobs')")).one()
    found = Access(user=str(me), operator=bool(sees_jobs), restricted=not sees_jobs)
    conn.info[_CACHE_KEY] = found
    return found


def restricted(db: Session | Connection) -> bool:
    """Whether this session is a MariaDB submitter's (cheap: SQLite never is)."""
    return _conn(db).dialect.name != "sqlite" and access(db).restricted


def jobs_table(db: Session | Connection) -> sa.TableClause:
    """Where this session reads jobs: ``jobs``, or a submitter's ``my_jobs``."""
    return MY_JOBS if restricted(db) else Job


def attempts_table(db: Session | Connection) -> sa.TableClause:
    """Where this session reads attempts: ``job_attempts``, or ``my_job_attempts``."""
    return MY_ATTEMPTS if restricted(db) else JobAttempt


def owned_by(db: Session | Connection, column: Any, user: str) -> Any:
    """SQL: ``column`` (an owner) is ``user``, byte for byte, as the database's views and
    procedures compare (MariaDB's collation alone would take ``Alice`` for ``alice``)."""
    if _conn(db).dialect.name == "sqlite":
        return column == user                     # SQLite's = is binary already
    return sa.and_(column == user, sa.func.binary(column) == sa.func.binary(user))


# The writes every manager makes, probed without touching a row (WHERE 1 = 0): an account
# that lacks one is not the manager's, whatever else it may do.
_MANAGER_PROBES = ("UPDATE jobs SET state = state WHERE 1 = 0",
                   "UPDATE job_attempts SET end_s = end_s WHERE 1 = 0",
                   "DELETE FROM decisions WHERE 1 = 0")


def require_manager(db: Session | Connection) -> None:
    """InputError (one line) unless this session's account may do the manager's writes:
    a person's account, the reporter's or an agent's is told so before anything starts."""
    conn = _conn(db)
    if conn.dialect.name == "sqlite":
        return                       # the file's permissions decide
    who = access(db)
    kind = "a person's (submitter) account" if who.restricted else "not allowed to"
    for probe in _MANAGER_PROBES:
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(probe)
        except DBAPIError as e:
            if error_code(e) not in (1142, 1143, 1044):
                raise
            what = probe.split(" WHERE")[0].split(" SET")[0].lower()
            raise InputError(f"database account {who.user!r} is not the manager's ({kind}"
                             f"{'' if who.restricted else ' ' + what}); run `andreas manager "
                             "run` with the manager's account (andreas_manager: "
                             "ANDREAS_DB_URL or [store] url)") from None


def require(who: Access, job_id: str, owner: str | None, action: str) -> None:
    """NotPermitted unless ``who`` owns the job or is an operator; ``action`` says what was
    refused ("cancel", "read the logs of")."""
    if who.operator or (owner is not None and owner == who.user):
        return
    if owner is None:
        raise NotPermitted(f"job {job_id}: has no recorded owner (submitted before owners "
                           f"were recorded); only an operator may {action} it")
    raise NotPermitted(f"job {job_id}: owned by {owner}, not {who.user}; only its owner or "
                       f"an operator may {action} it")


def signalled(e: DBAPIError) -> InputError | NotPermitted | None:
    """A procedure's refusal (SIGNAL) as the error andreas raises; None for any other."""
    if error_code(e) != SIGNAL_CODE:
        return None
    args: tuple[Any, ...] = getattr(e.orig, "args", ())
    text = str(args[1]) if len(args) > 1 else str(e.orig)
    if "only its owner" in text or "only an operator" in text:
        return NotPermitted(text)
    return InputError(text)
