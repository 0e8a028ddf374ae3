"""What every subcommand shares: a database error is one line, not a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from andreas.store.faults import database_errors


def db_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A database error in the middle of a command is one line too, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with database_errors():
            return fn(*args, **kwargs)

    return wrapper
