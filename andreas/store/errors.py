"""Errors of the store; all are AndreasError, so the CLI prints them as one line (exit 2)."""

from __future__ import annotations

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
