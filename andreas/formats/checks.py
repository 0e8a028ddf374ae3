"""The checkers of every document's fields (snapshots, traces, profiles, power limits).

Each names the document, the field and the value as it looked in the JSON in one line.
Apart from ``snapshot.py`` so that the documents built on it import it, not each other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from andreas.errors import InputError

_MISSING: Any = object()


def show(value: Any, limit: int = 60) -> str:
    """A value as it looked in the JSON, on one line and cut short, for error messages."""
    try:
        text = json.dumps(value, ensure_ascii=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def _fail(label: str, field: str, problem: str, value: Any = _MISSING) -> NoReturn:
    got = "" if value is _MISSING else f", got {show(value)}"
    raise InputError(f"{label}: field '{field}' {problem}{got}")


def check_number(label: str, field: str, value: Any, *, gt: float | None = None,
                 ge: float | None = None, le: float | None = None) -> float:
    """A finite JSON number (never a boolean) as float, with an optional lower bound."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(label, field, "must be a number", value)
    try:
        number = float(value)
    except OverflowError:
        _fail(label, field, "must be a finite number", value)
    if not math.isfinite(number):
        _fail(label, field, "must be a finite number", value)
    if gt is not None and not number > gt:
        _fail(label, field, f"must be > {gt:g}", value)
    if ge is not None and not number >= ge:
        _fail(label, field, f"must be >= {ge:g}", value)
    if le is not None and not number <= le:
        _fail(label, field, f"must be <= {le:g}", value)
    return number


def check_integer(label: str, field: str, value: Any, *, ge: int | None = None,
                  le: int | None = None, le_what: str = "") -> int:
    """A JSON integer (``3`` or ``3.0``, never a boolean) with optional bounds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(label, field, "must be an integer", value)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        _fail(label, field, "must be an integer", value)
    number = int(value)
    if abs(number) > 2**53:
        _fail(label, field, "is too large", value)
    if ge is not None and number < ge:
        _fail(label, field, f"must be >= {ge}", value)
    if le is not None and number > le:
        _fail(label, field, f"must be <= {le_what or le}", value)
    return number


def check_name(label: str, field: str, value: Any) -> str:
    """An identifier (job id, node, GPU type, VM name): it ends up in labels and log lines."""
    if not isinstance(value, str) or not value:
        _fail(label, field, "must be a non-empty string", value)
    if not value.isprintable() or any(ch.isspace() for ch in value):
        _fail(label, field, "must not contain spaces or control characters", value)
    return value


def check_list(label: str, field: str, value: Any, *, nonempty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        _fail(label, field, "must be a list", value)
    if nonempty and not value:
        _fail(label, field, "must be a non-empty list", value)
    return value


class Fields:
    """One JSON object under validation; every error names ``label`` and the field.

    ``prefix`` qualifies nested sections (``energy.pue``) so messages stay unambiguous.
    """

    def __init__(self, raw: Any, label: str, known: Sequence[str], prefix: str = "") -> None:
        self.label, self.prefix = label, prefix
        if not isinstance(raw, Mapping):
            where = f" field '{prefix.rstrip('.')}'" if prefix else ""
            raise InputError(f"{label}:{where} must be a JSON object, got {_kind(raw)}")
        for key in raw:
            if key not in known:
                raise InputError(f"{label}: unknown field {show(prefix + str(key))} "
                                 f"(known: {', '.join(known)})")
        self.raw = raw

    def has(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str, default: Any = _MISSING) -> Any:
        if key in self.raw:
            return self.raw[key]
        if default is _MISSING:
            raise InputError(f"{self.label}: field '{self.prefix}{key}' is missing")
        return default

    def field(self, key: str) -> str:
        return self.prefix + key

    def number(self, key: str, *, gt: float | None = None, ge: float | None = None,
               le: float | None = None, default: Any = _MISSING) -> float:
        if default is not _MISSING and key not in self.raw:
            return default
        return check_number(self.label, self.field(key), self.get(key), gt=gt, ge=ge, le=le)

    def integer(self, key: str, *, ge: int | None = None, le: int | None = None,
                le_what: str = "", default: Any = _MISSING) -> int:
        if default is not _MISSING and key not in self.raw:
            return default
        return check_integer(self.label, self.field(key), self.get(key), ge=ge, le=le,
                             le_what=le_what)

    def name(self, key: str) -> str:
        return check_name(self.label, self.field(key), self.get(key))

    def text(self, key: str, default: str = "") -> str:
        value = self.get(key, default)
        if not isinstance(value, str):
            _fail(self.label, self.field(key), "must be a string", value)
        return value
