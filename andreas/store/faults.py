"""Database errors as the rest of andreas sees them: one line for a person, and for the
agent a sort by what to do about them (so no caller needs the driver's exception types).

- ``transient``: the server is down, the connection was lost, a lock timed out: retry
  with back-off;
- ``refused``: the server answers but will not take this account's writes (wrong
  password, missing privilege, unknown table or database): retry slowly, someone must fix
  the setup;
- ``data``: the statement itself was refused (a constraint): retrying cannot help.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError

from andreas.store.engine import describe_error, error_code
from andreas.store.errors import StoreError

# Server gone, unreachable, overloaded, shutting down, read-only during a fail-over,
# lock wait timeout, deadlock, connection killed.
TRANSIENT_CODES = frozenset({2002, 2003, 2005, 2006, 2013, 2055, 1040, 1053, 1205, 1213, 1290,
                             1836, 1927, 4031})
# The server answers but refuses this account or this schema.
REFUSED_CODES = frozenset({1044, 1045, 1049, 1142, 1143, 1146, 1054, 1227, 1370})


class FaultKind(enum.StrEnum):
    """What to do about a database error (the module docstring); logged as its value."""

    TRANSIENT = "transient"
    REFUSED = "refused"
    DATA = "data"


@contextlib.contextmanager
def database_errors() -> Iterator[None]:
    """A database error inside becomes a one-line StoreError (``database error: …``)."""
    try:
        yield
    except DBAPIError as e:
        raise StoreError(f"database error: {describe_error(e)}") from None


def error_kind(e: BaseException) -> FaultKind | None:
    """``transient`` | ``refused`` | ``data`` for an error the database raised; None for
    any other exception."""
    if isinstance(e, IntegrityError):
        return FaultKind.DATA
    if not isinstance(e, DBAPIError):
        return None
    if e.connection_invalidated or isinstance(e, InterfaceError):
        return FaultKind.TRANSIENT
    code = error_code(e)
    if code in TRANSIENT_CODES:
        return FaultKind.TRANSIENT
    if code in REFUSED_CODES:
        return FaultKind.REFUSED
    text = str(getattr(e, "orig", e)).lower()
    if "database is locked" in text or "database is busy" in text:   # SQLite
        return FaultKind.TRANSIENT
    if code is None and ("unable to open" in text or "disk i/o" in text or "readonly" in text):
        return FaultKind.REFUSED
    if code is not None and code >= 2000:    # client-side: connection trouble
        return FaultKind.TRANSIENT
    return FaultKind.DATA


def describe(e: BaseException) -> str:
    """One line: the driver's message for a database error, else the exception's text."""
    if isinstance(e, DBAPIError):
        return describe_error(e)
    return str(e) or type(e).__name__
