"""What every subcommand shares: a database error is one line, not a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from andreas.infra.numbers import Finite, Whole
from andreas.limits import MAX_DAYS, MAX_SEED
from andreas import policies
from andreas.policies import OPTIONS

__all__ = ["Finite", "Whole", "db_errors", "policy_default", "policy_option",
           "policy_option_type"]


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
SEED = Whole(min=0, max=MAX_SEED)
MAX_WORKERS = 256                           # processes: far above any machine's cores
MAX_SWEEP_SEEDS = 1000                      # traces per grid point of a sweep
MAX_WINDOW_H = 24.0 * MAX_DAYS              # a look-back window, a half-life
MAX_LINES = 10_000_000                      # lines of a log tail
MAX_ATTEMPT = 1_000_000
MAX_PORT_TEXT = 2**31 - 1                   # the library names the port's own range


def _whole(bound: float | None) -> int | None:
    """An int option's bound (the registry writes those as ints)."""
    return None if bound is None else int(bound)


def policy_option_type(name: str) -> Any:
    """The click type of a policy option, from its spec in the registry (andreas/policies.py)."""
    spec = OPTIONS[name]
    if spec.type is int:
        return Whole(min=_whole(spec.minimum), max=_whole(spec.maximum))
    if spec.type is float:
        return Finite(min=spec.minimum, max=spec.maximum, min_open=spec.min_open,
                      max_open=spec.max_open)
    if spec.type is str and spec.choices:
        return click.Choice([str(c) for c in spec.choices])   # StrEnum: values
    raise ValueError(f"option {name}: no command-line type for {spec.type.__name__}")


def policy_option(option: str, flag: str | None = None, dest: str | None = None, *,
                  text: str, **kwargs: Any) -> Any:
    """A command's option (``flag``, default ``--option``, into parameter ``dest``, default
    ``option``) that sets the policy option ``option``: its type, bounds and the policies
    that take it come from the registry (andreas/policies.py)."""
    flag = flag or "--" + option.replace("_", "-")
    defaults = {n: policies.POLICIES[n].options[option] for n in policies.takers(option)}
    if OPTIONS[option].type is bool:
        if "/" not in flag:
            kwargs.setdefault("is_flag", True)
        users = ", ".join(defaults)
    else:
        kwargs.setdefault("type", policy_option_type(option))
        kwargs.setdefault("default", None)
        first = next(iter(defaults.values()))
        if len({repr(v) for v in defaults.values()}) == 1:
            users = ", ".join(defaults) + f"; default {policy_default(first)}"
        else:
            users = ", ".join(f"{n} (default {policy_default(v)})" for n, v in defaults.items())
    return click.option(flag, dest or option, help=f"{text} [taken by {users}]", **kwargs)


def policy_default(value: Any) -> str:
    """A policy option's default in words."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)
