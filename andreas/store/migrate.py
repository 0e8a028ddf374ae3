"""Alembic migrations, driven from code (no alembic.ini): upgrade, current revision, checks.

The migration scripts are package data in ``andreas/store/migrations/versions/``. The
Alembic ``Config`` is built here and handed the open connection, so the commands work the
same from a source checkout, an editable install or a wheel, and the URL (with its
password) never goes through a config file.

Migrations are forward-only: a downgrade request is refused with a message, because
going back would drop data; restore a backup instead.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from andreas.config import mask_url
from andreas.store.engine import is_sqlite, sqlite_path
from andreas.store.errors import SchemaError, StoreError, StoreUnavailable, describe_error
from andreas.store.schema import head_revision

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
UPGRADE_HINT = "run `andreas db upgrade`"


def alembic_config(connection: Connection | None = None, *, output: io.StringIO | None = None,
                   dialect_name: str | None = None) -> Config:
    cfg = Config(output_buffer=output)
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    cfg.attributes["dialect_name"] = dialect_name
    return cfg


def script_directory() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


class SchemaState(enum.StrEnum):
    """Where a database's schema stands against this andreas (printed as its value)."""

    HEAD = "head"          # ready
    BEHIND = "behind"      # needs `andreas db upgrade`
    NONE = "none"          # not migrated
    UNKNOWN = "unknown"    # a revision this andreas does not know (a newer andreas's?)


@dataclass(frozen=True)
class SchemaStatus:
    """A database's revision against this andreas's head (:class:`SchemaState`)."""

    url: str
    revision: str | None
    head: str
    state: SchemaState
    has_tables: bool = False

    def describe(self) -> str:
        if self.state is SchemaState.HEAD:
            return f"database {self.url}: revision {self.revision} (head, up to date)"
        if self.state is SchemaState.NONE:
            extra = (" but has tables that `andreas db upgrade` did not create"
                     if self.has_tables else "")
            return (f"database {self.url} is not migrated (no andreas schema{extra}); "
                    f"{UPGRADE_HINT}")
        if self.state is SchemaState.BEHIND:
            return (f"database {self.url} is at revision {self.revision}, this andreas needs "
                    f"{self.head}; {UPGRADE_HINT}")
        return (f"database {self.url} is at revision {self.revision}, which this andreas "
                f"does not know (migrated by a newer andreas?); use that version or "
                f"restore a backup")


def status(engine: Engine) -> SchemaStatus:
    """Read the revision of the database; StoreUnavailable when it cannot be read."""
    url = mask_url(engine.url)
    try:
        with engine.connect() as conn:
            return _status(conn, url)
    except DBAPIError as e:
        raise StoreUnavailable(f"cannot read the schema revision of {url}: "
                               f"{describe_error(e)}") from None


def _status(conn: Connection, url: str) -> SchemaStatus:
    revision = MigrationContext.configure(conn).get_current_revision()
    head = head_revision()
    if revision is None:
        has_tables = any(t != "alembic_version" for t in inspect(conn).get_table_names())
        return SchemaStatus(url, None, head, SchemaState.NONE, has_tables)
    if revision == head:
        return SchemaStatus(url, revision, head, SchemaState.HEAD)
    try:
        known = script_directory().get_revision(revision) is not None
    except CommandError:
        known = False
    return SchemaStatus(url, revision, head,
                        SchemaState.BEHIND if known else SchemaState.UNKNOWN)


def require_head(engine: Engine) -> None:
    """The check every component makes before it uses the database."""
    st = status(engine)
    if st.state is not SchemaState.HEAD:
        raise SchemaError(st.describe())


def upgrade(engine: Engine, target: str = "heads") -> tuple[str | None, str | None]:
    """Create or upgrade the schema; returns the revisions before and after.

    Running it again at head does nothing. On MariaDB a named lock keeps two concurrent
    upgrades from interleaving.
    """
    url = mask_url(engine.url)
    try:
        with _migration_lock(engine, url), engine.begin() as conn:
            before = _status(conn, url)
            if before.state is SchemaState.UNKNOWN:
                raise SchemaError(before.describe())
            if before.state is SchemaState.NONE and before.has_tables:
                raise SchemaError(f"database {url} has tables but no andreas revision: it was "
                                  "not created by `andreas db upgrade`; use an empty database")
            if before.state is not SchemaState.HEAD:
                command.upgrade(alembic_config(conn), target)
            after = MigrationContext.configure(conn).get_current_revision()
    except DBAPIError as e:
        raise StoreError(f"upgrade of {url} failed: {describe_error(e)}") from None
    return before.revision, after


def upgrade_url(url: str) -> str:
    """Create or upgrade the database at ``url`` (and a new SQLite file's directory) with
    an engine of its own; returns the URL. For tests, benchmarks and demos."""
    from andreas.store.engine import make_engine

    engine = make_engine(url, create_dir=True)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return url


def upgrade_sql(dialect_name: str, target: str = "heads") -> str:
    """The DDL of an upgrade from an empty database, for a DBA to review or run by hand."""
    out = io.StringIO()
    command.upgrade(alembic_config(output=out, dialect_name=dialect_name), target, sql=True)
    return out.getvalue()


def downgrade(engine: Engine, target: str) -> None:
    """Refused unless it changes nothing: andreas migrations are forward-only."""
    st = status(engine)
    if target == st.revision or (target in ("head", "heads") and st.state is SchemaState.HEAD):
        return
    raise SchemaError(f"downgrade of {st.url} from revision {st.revision or 'none'} to "
                      f"{target!r} refused: andreas migrations are forward-only (going back "
                      "drops data); restore a backup taken before the upgrade instead")


@contextlib.contextmanager
def _migration_lock(engine: Engine, url: str) -> Iterator[None]:
    """One upgrade at a time, held until its transaction has committed.

    MariaDB: a named lock on its own connection. SQLite runs DDL outside transactions: an
    flock on the database file (independent of SQLite's own byte-range locks).
    """
    if is_sqlite(engine):
        path = sqlite_path(engine.url)
        if path is None:
            yield
            return
        with open(path, "ab") as f:   # an empty file is an empty SQLite database
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
        return
    name = f"andreas_migrate_{engine.url.database}"[:64]
    with engine.connect() as conn:
        got = conn.execute(text("SELECT GET_LOCK(:name, 60)"), {"name": name}).scalar()
        if got != 1:
            raise StoreError(f"upgrade of {url}: another `andreas db upgrade` holds the "
                             "migration lock; try again when it has finished")
        try:
            yield
        finally:
            conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": name})
