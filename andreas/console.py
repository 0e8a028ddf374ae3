"""One rich console policy for every command's tables.

Data is shown, never interpreted: the console parses no markup and no emoji codes (a
node or trace named ``[/bogus]`` is printed as it is, not read as a closing tag), and any
control character that still reaches it is printed as an escape (``\\x1b``), so a job's
command, environment or cancel reason can never move the cursor or recolour the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# C0 controls, DEL and C1 controls; newlines are rich's own line breaks.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def money(x: float | None, *, grouping: bool = False) -> str:
    """An amount of money for people: cents from 1 up, three significant digits below
    (0.00123, not 0.00: a small job's cost must not read as nothing); "-" for None."""
    import math

    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    sep = "," if grouping else ""
    if x == 0 or abs(x) >= 0.995:
        return f"{x:{sep}.2f}"
    digits = min(12, 2 - math.floor(math.log10(abs(x))))
    return f"{x:{sep}.{digits}f}"


def printable(text: str) -> str:
    """``text`` with every control character (newlines too) as a ``\\xNN`` escape: for
    values users typed (a command, an environment value, a cancel reason)."""
    return _CONTROL_ALL.sub(_escape, text)


# Piped or redirected output is never cut or folded: as wide as its longest line.
UNLIMITED_WIDTH = 100_000


def console():
    """A terminal's own width (``COLUMNS`` when set). Piped or redirected, output is for
    programs: ``COLUMNS`` when set, else every row whole on one line, and tables without
    borders (columns separated by spaces, one row per line, the title on its own line
    above; ``--json`` where a command has it is the exact form)."""
    import os

    from rich.console import Console
    from rich.segment import Segment
    from rich.table import Table

    class SafeConsole(Console):
        """A console whose text segments carry no control characters (its own cursor
        and style codes are control segments and pass unchanged)."""

        def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
            if isinstance(renderable, Table) and not self.is_terminal:
                renderable = _plain(renderable, whole=self.width >= UNLIMITED_WIDTH)
            for segment in super().render(renderable, options):
                if segment.control or not _CONTROL.search(segment.text):
                    yield segment
                else:
                    yield Segment(_CONTROL.sub(_escape, segment.text), segment.style)

    out = SafeConsole(markup=False, emoji=False)
    if out.is_terminal:
        return out
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else UNLIMITED_WIDTH
    return SafeConsole(markup=False, emoji=False, width=width, soft_wrap=False)


def _plain(table: Any, *, whole: bool) -> Any:
    """A copy of ``table`` for a pipe: no box, the title on a line of its own, one space
    between columns;
    ``whole``: no cell folded (the width is not limited), else as the table says."""
    import copy

    plain = copy.copy(table)
    plain.box = None
    plain.title_justify = plain.caption_justify = "left"     # a line of its own, kept
    plain.show_edge = False
    plain.pad_edge = False
    plain.padding = (0, 0, 0, 1)
    plain.collapse_padding = False
    if whole:
        plain.columns = [copy.copy(c) for c in table.columns]
        for c in plain.columns:
            c.no_wrap = True
            c.overflow = "ignore"
    return plain
