"""One way to check a table of settings against the frozen dataclass that holds it.

The dataclass is the schema: its init fields are the known keys, their type hints the
types, and :func:`rule` in a field's metadata the limits (``gt``, ``ge``, ``le``, ``choices``, an
absolute path, a secret whose value is never shown). :func:`build` checks a whole table
and returns the instance; every problem is one :class:`InputError` that names where the
value came from (a file's section and key, or an environment variable), the field and
the value, so the dataclass, the TOML keys and the messages cannot drift apart. A field
with ``rule(derived=True)`` is no key: the loader fills it (e.g. a file a key names, read
and checked once at load).

Stdlib only: the node agent uses it too, and pydantic would cost it about 10 MB of
resident memory for the two dozen keys it reads.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints

from andreas.errors import InputError


@dataclass(frozen=True, kw_only=True)
class Rule:
    gt: float | None = None
    ge: float | None = None
    le: float | None = None     # an upper bound: a value past it would hang or overflow a loop
    choices: tuple[str, ...] | None = None
    absolute_path: bool = False
    secret: bool = False        # a URL or password: messages name its type, never its value
    derived: bool = False       # not a key: the loader fills it from other keys (a file read)


def rule(**limits: Any) -> dict[str, Rule]:
    """Field metadata: ``field(default=1.0, metadata=rule(gt=0))``."""
    return {"rule": Rule(**limits)}


def check_field(cls: type, name: str, value: Any, label: str) -> Any:
    """One field of ``cls`` checked on its own (a command-line option that overrides a
    setting after the file was read); ``label`` names the option in the message."""
    spec = next(f for f in dataclasses.fields(cls) if f.name == name)
    return check(label, value, get_type_hints(cls)[name], spec.metadata.get("rule", Rule()))


def known_keys(cls: type) -> tuple[str, ...]:
    """The keys a table may set: the init fields that are not ``derived``."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init and not _derived(f))


def _derived(f: dataclasses.Field) -> bool:
    return f.metadata.get("rule", Rule()).derived


def build(cls: type, table: Mapping[str, Any], *, where: Callable[[str], str],
          section: str, skip: tuple[str, ...] = ()) -> Any:
    """``cls(**table)`` once every key is known and every value has its type and limits.

    ``where(key)`` names a value's origin (``"/etc/andreas/andreas.toml: [manager]
    period_s"`` or ``"ANDREAS_PERIOD_S"``); ``section`` prefixes unknown-key messages;
    ``skip``: init fields a table may not set (filled by the caller).
    """
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)
              if f.init and not _derived(f) and f.name not in skip}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in fields:
            raise InputError(f"{section} unknown key '{key}' "
                             f"(known: {', '.join(sorted(fields))})")
        values[key] = check(where(key), value, hints[key],
                            fields[key].metadata.get("rule", Rule()))
    return cls(**values)


def check(label: str, value: Any, hint: Any, limits: Rule = Rule()) -> Any:
    """``value`` converted to ``hint`` (int -> float, list -> tuple) and checked."""
    value = _typed(label, value, hint, limits)
    if limits.choices is not None and value not in limits.choices:
        raise InputError(f"{label} must be one of {', '.join(limits.choices)}, got {value!r}",
                         field=label)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if limits.gt is not None and not value > limits.gt:
            raise InputError(f"{label} must be > {limits.gt:g}, got {value!r}", field=label)
        if limits.ge is not None and not value >= limits.ge:
            raise InputError(f"{label} must be >= {limits.ge:g}, got {value!r}", field=label)
        if limits.le is not None and not value <= limits.le:
            raise InputError(f"{label} must be <= {limits.le:g}, got {value!r}", field=label)
    if limits.absolute_path and isinstance(value, str) and not value.startswith("/"):
        raise InputError(f"{label} must be an absolute path, got {value!r}", field=label)
    return value


def _typed(label: str, value: Any, hint: Any, limits: Rule) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        members = get_args(hint)
        if value is None and type(None) in members:
            return None
        for member in members:
            if member is not type(None) and _matches(value, member):
                return _typed(label, value, member, limits)
    elif origin is tuple:
        if isinstance(value, (list, tuple)) and all(isinstance(i, str) and i for i in value):
            return tuple(value)
        raise InputError(f"{label} must be a list of non-empty strings, got {value!r}", field=label)
    elif _matches(value, hint):
        if hint is float:
            if not math.isfinite(value):
                raise InputError(f"{label} must be a finite number, got {value!r}", field=label)
            return float(value)
        return value
    shown = f"a {type(value).__name__}" if limits.secret else repr(value)
    raise InputError(f"{label} has the wrong type: {shown}", field=label)


def _matches(value: Any, hint: Any) -> bool:
    """TOML booleans are ints to Python: a bool matches only ``bool``; an int matches
    ``float`` too."""
    if get_origin(hint) is tuple:
        return isinstance(value, (list, tuple))
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, (int, float))
    return isinstance(hint, type) and isinstance(value, hint)
