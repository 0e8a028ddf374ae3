"""What every subcommand shares: a database error is one line, not a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from andreas.infra.numbers import Finite, Whole

__all__ = ["Finite", "Whole", "db_errors"]


def db_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A database error in the middle of a command is one line too, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception:
            if "sqlalchemy" not in sys.modules:     # not a database error: no SQLAlchemy
                raise                                # imported for nothing (`submit`)
            from andreas.store.faults import database_errors

            with database_errors():
                raise

    return wrapper


# Every numeric option is a Finite or a Whole with an upper bound, one bound per kind
# (without one, --workers 1000000 forks processes without end and --ga-generations 1e9
# or --wake-s 1e308 hang); the library's own limits are used where it has them.
SEED = Whole(min=0, max=2**63 - 1)          # numpy's generators take 0 <= seed
ITERATIONS = Whole(min=1, max=100_000)      # a typo (10**7) is an error, not gigabytes
MAX_WORKERS = 256                           # processes: far above any machine's cores
MAX_SWEEP_SEEDS = 1000                      # traces per grid point of a sweep
MAX_TIME_LIMIT_S = 86400.0                  # a solver's time limit
MAX_WINDOW_H = 24.0 * 3650                  # a look-back window, a half-life
MAX_LINES = 10_000_000                      # lines of a log tail
MAX_ATTEMPT = 1_000_000
MAX_PORT_TEXT = 2**31 - 1                   # the library names the port's own range
