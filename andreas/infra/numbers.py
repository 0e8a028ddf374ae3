"""Numbers people type, read one way everywhere: plain ASCII decimals, finite, bounded.

Python's ``float()`` and ``int()`` also read ``1_0``, Unicode digits (``١٢``), ``nan`` and
``infinity``; none of that is a number a person means in a tariff, a config or an option.
:func:`decimal` and :func:`whole` are the one reading; :class:`Finite` and :class:`Whole`
are the command-line types built on them (every numeric option of ``andreas`` and
``andreas-agent`` is one of the two, with an upper bound: ``tests/cli/test_fuzz_cli.py``
walks the commands and holds that line). Stdlib and click only: the node agent uses it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import click

DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
WHOLE = re.compile(r"[+-]?[0-9]+")
MAX_DIGITS = 30                          # int() of thousands of digits is slow, and a typo


def decimal(text: str) -> float | None:
    """``text`` as a float when it is a plain ASCII decimal (surrounding spaces allowed);
    None otherwise. The result may be infinite (``1e999``): callers bound it."""
    text = text.strip()
    return float(text) if DECIMAL.fullmatch(text) else None


def whole(text: str) -> int | None:
    """``text`` as an int when it is plain ASCII digits with an optional sign; None
    otherwise (and for more than MAX_DIGITS digits)."""
    text = text.strip()
    if not WHOLE.fullmatch(text) or len(text.lstrip("+-")) > MAX_DIGITS:
        return None
    return int(text)


class Finite(click.FloatRange):
    """A FloatRange of plain decimals that also refuses nan and inf (click's lets nan
    through: every comparison with it is false), so ``--period-s nan`` is a usage error,
    never a hang."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            number = decimal(value)
            if number is None:
                self.fail(f"{value!r} is not a finite decimal number.", param, ctx)
            value = number
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(rv, param, ctx)


class Whole(click.IntRange):
    """An IntRange of plain ASCII digits (click's ``int()`` reads ``1_0`` and ``١٢``)."""

    name = "whole number range"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            number = whole(value)
            if number is None:
                self.fail(f"{value!r} is not a whole number.", param, ctx)
            value = number
        return super().convert(value, param, ctx)
