"""Errors of the store; all are AndreasError, so the CLI prints them as one line (exit 2)."""

from __future__ import annotations

from typing import Any

from andreas.errors import AndreasError


class StoreError(AndreasError):
    """The database cannot be used as asked (unreachable, refused, wrong schema)."""


class StoreUnavailable(StoreError):
    """The server cannot be reached or refused the login; the message names the masked URL."""


class SchemaError(StoreError):
    """The database is not migrated to the revision this andreas needs (or is newer)."""


class InvalidTransition(AndreasError):
    """A job state change the state machine does not allow; names the job and both states."""


class TransitionConflict(AndreasError):
    """Another writer changed the job's state first; names the job and the states seen."""


# The driver's error, read without importing SQLAlchemy (the helpers every store module uses).

def describe_error(e: BaseException) -> str:
    """The driver's message, one line, without SQLAlchemy's background links."""
    orig = getattr(e, "orig", None) or e
    args: tuple[Any, ...] = getattr(orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int):
        return f"({args[0]}) {args[1]}"
    return first_line(orig)


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def error_code(e: BaseException) -> int | None:
    args: tuple[Any, ...] = getattr(getattr(e, "orig", None), "args", ())
    return args[0] if args and isinstance(args[0], int) else None
