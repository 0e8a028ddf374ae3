"""What every subcommand shares: a database error is one line, not a traceback."""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable
from typing import Any

import click


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


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class Finite(click.FloatRange):
    """A FloatRange that also refuses nan and inf (click's lets nan through: every
    comparison with it is false), so ``--period-s nan`` is a usage error, never a hang."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _DECIMAL.fullmatch(value.strip()):
            # float() also reads '1_0', '١٢', 'nan' and 'infinity': plain decimals only
            self.fail(f"{value!r} is not a finite decimal number.", param, ctx)
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(rv, param, ctx)


# Seeds of numpy's generators are non-negative; iterations and workers bounded so a typo
# (10**7) is an error, not gigabytes of arrays.
SEED = click.IntRange(min=0, max=2**63 - 1)
ITERATIONS = click.IntRange(min=1, max=100_000)
