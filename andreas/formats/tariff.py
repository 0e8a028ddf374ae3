"""Reads time-of-use tariff files: price (and optionally PUE) per UTC hour of day.

The format (docs/FORMAT.md, "Tariff")::

    hour_of_day,price_per_kwh,pue
    0,0.11,1.25
    ...
    23,0.12,1.26

24 rows, hours 0..23 each exactly once (any order), repeated every day in UTC. ``pue``
is optional; without it the site's constant PUE applies to every hour
(:func:`andreas.costs.with_tariff`). Every problem is one ``InputError`` line that names
the file, the row and column, and the value, so a command prints it and writes nothing.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from andreas.errors import InputError
from andreas.limits import MAX_PRICE_PER_KWH
from andreas.infra.fileio import read_capped
from andreas.infra.numbers import decimal, whole

if TYPE_CHECKING:   # the model is imported when a tariff is read (config loads this module)
    from andreas.model import Tariff

HEADER = ("hour_of_day", "price_per_kwh")
OPTIONAL = ("pue",)
MAX_BYTES = 64 * 1024          # 24 rows; anything this big is not a tariff


@dataclass(frozen=True, kw_only=True)
class TariffFile:
    """What a tariff file holds: the price per hour and, if it has the column, the PUE."""

    price_per_kwh: tuple[float, ...]
    pue: tuple[float, ...] | None

    def tariff(self, default_pue: float) -> Tariff:
        """The tariff, with ``default_pue`` every hour when the file has no pue column."""
        from andreas.model import HOURS_PER_DAY, Tariff

        return Tariff(price_per_kwh=self.price_per_kwh,
                      pue=self.pue if self.pue is not None else (default_pue,) * HOURS_PER_DAY)


def load_tariff(path: str | Path) -> TariffFile:
    """Read and check a tariff file; every error message starts with ``tariff PATH:``
    (field ``tariff``, so a command can name its option)."""
    try:
        raw = read_capped(path, what="tariff", limit=MAX_BYTES, label=f"tariff {path}")
    except InputError as e:
        raise InputError(str(e), field="tariff") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"tariff {path}: not UTF-8 text (byte {e.start})",
                         field="tariff") from None
    try:
        return parse_tariff(text)
    except InputError as e:
        raise InputError(f"tariff {path}: {e}", field="tariff") from None


def parse_tariff(text: str) -> TariffFile:
    """Check the CSV text of a tariff (see the module docstring)."""
    from andreas.limits import MAX_PUE, MIN_PUE
    from andreas.model import HOURS_PER_DAY

    rows = [(n, r) for n, r in enumerate(csv.reader(io.StringIO(text, newline="")), start=1)
            if any(cell.strip() for cell in r)]
    if not rows:
        raise InputError(f"header: must be {','.join(HEADER)}[,pue], got an empty file")
    header = rows[0][1]
    names = tuple(h.strip() for h in header)
    if names[:2] != HEADER or any(h not in OPTIONAL for h in names[2:]) \
            or len(set(names)) != len(names):
        # What the first row holds is not shown: a tariff path may name any file the
        # reader can read (a symlink to /etc/shadow showed its first line).
        raise InputError(f"header: must be {','.join(HEADER)}[,pue]; the first row is not "
                         f"({len(header)} column(s)): not a tariff file")
    has_pue = "pue" in names
    prices: dict[int, float] = {}
    pues: dict[int, float] = {}
    seen: dict[int, int] = {}
    for line, cells in rows[1:]:
        if len(cells) != len(names):
            raise InputError(f"row {line}: has {len(cells)} columns, the header {len(names)}")
        cell = dict(zip(names, (c.strip() for c in cells)))
        hour = _hour(line, cell["hour_of_day"])
        if hour in seen:
            raise InputError(f"row {line} column hour_of_day: hour {hour} repeats row "
                             f"{seen[hour]}")
        seen[hour] = line
        prices[hour] = _number(line, "price_per_kwh", cell["price_per_kwh"], 0.0,
                               MAX_PRICE_PER_KWH)
        if has_pue:
            pues[hour] = _number(line, "pue", cell["pue"], MIN_PUE, MAX_PUE)
    missing = [h for h in range(HOURS_PER_DAY) if h not in prices]
    if missing:
        raise InputError(f"column hour_of_day: hour {missing[0]} is missing "
                         f"({len(missing)} of 0..23 missing)")
    if max(prices.values()) <= 0:
        raise InputError("column price_per_kwh: every hour is 0; a tariff needs a price")
    order = range(HOURS_PER_DAY)
    return TariffFile(price_per_kwh=tuple(prices[h] for h in order),
                      pue=tuple(pues[h] for h in order) if has_pue else None)


def _hour(line: int, value: str) -> int:
    from andreas.model import HOURS_PER_DAY

    hour = whole(value)
    if hour is None:
        raise InputError(f"row {line} column hour_of_day: must be an integer 0..23, "
                         f"got {_cell(value)}")
    if not 0 <= hour < HOURS_PER_DAY:
        raise InputError(f"row {line} column hour_of_day: must be 0..23, got {value!r}")
    return hour


def _number(line: int, column: str, value: str, low: float, high: float) -> float:
    x = decimal(value)              # plain decimals: float() also reads 1_0 and '١٢'
    if x is None:
        what = "a number" if not _float_reads(value) else (
            f"a finite number in [{low:g}, {high:g}], a plain decimal")
        raise InputError(f"row {line} column {column}: must be {what}, got {_cell(value)}")
    if not math.isfinite(x) or not low <= x <= high:
        raise InputError(f"row {line} column {column}: must be a finite number in "
                         f"[{low:g}, {high:g}], got {_cell(value)}")
    return x


def _float_reads(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _cell(value: str) -> str:
    """A cell as messages show it: short (a whole line of another file never)."""
    return repr(value) if len(value) <= 24 else repr(value[:24]) + "..."
