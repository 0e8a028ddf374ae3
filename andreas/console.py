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


def printable(text: str) -> str:
    """``text`` with every control character (newlines too) as a ``\\xNN`` escape: for
    values users typed (a command, an environment value, a cancel reason)."""
    return _CONTROL_ALL.sub(_escape, text)


def console():
    """A terminal's own width; 120 columns when piped, so tables are not squeezed."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        """A console whose text segments carry no control characters (its own cursor
        and style codes are control segments and pass unchanged)."""

        def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                if segment.control or not _CONTROL.search(segment.text):
                    yield segment
                else:
                    yield Segment(_CONTROL.sub(_escape, segment.text), segment.style)

    out = SafeConsole(markup=False, emoji=False)
    return out if out.is_terminal else SafeConsole(markup=False, emoji=False, width=120)
