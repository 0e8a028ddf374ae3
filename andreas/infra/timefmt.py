"""Times as people read them at the edges (CLI tables, messages); UTC seconds inside.

``stamp(1795356180.0) == "2026-11-22 14:03Z"``; ``relative(t, now)`` is ``"in 3h12m"`` or
``"3h12m ago"``; ``duration(11520) == "3h12m"``. Minutes are the finest unit that tables
show (seconds only below a minute), so columns stay narrow. The way back from what people
type: ``parse_duration("1h30m") == 5400.0``.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

_DURATION_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def stamp(t_s: float | None) -> str:
    """``YYYY-MM-DD HH:MMZ``; "-" for no value."""
    if t_s is None or not math.isfinite(t_s):
        return "-"
    try:
        return datetime.fromtimestamp(t_s, UTC).strftime("%Y-%m-%d %H:%MZ")
    except (OverflowError, OSError, ValueError):
        return "-"


def iso(t_s: float | None) -> str | None:
    """ISO 8601 with seconds and ``Z`` (JSON output); None for no value."""
    if t_s is None or not math.isfinite(t_s):
        return None
    try:
        return datetime.fromtimestamp(t_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def duration(seconds: float) -> str:
    """``2d3h``, ``3h12m``, ``12m``, ``45s``: the two largest units, truncated."""
    s = int(abs(seconds))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"


def parse_duration(text: str, units: str = "smhdw") -> float | None:
    """Seconds of ``7d``, ``12h``, ``1h30m``, ``90s`` (numbers, each with one of ``units``,
    a subset of s m h d w); None when ``text`` is not such a duration, so that the caller
    says in its own words (``--since``, ``--due``) what it accepts."""
    if not re.fullmatch(rf"(?:\d+(?:\.\d+)?[{units}])+", text):
        return None
    return sum(float(n) * _DURATION_UNITS_S[u] for n, u in _DURATION_PART.findall(text))


def relative(t_s: float | None, now_s: float) -> str:
    """``in 3h12m`` (future), ``3h12m ago`` (past), ``now`` (within a second); "-" for None."""
    if t_s is None or not math.isfinite(t_s):
        return "-"
    delta = t_s - now_s
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(delta)} ago"


def stamp_relative(t_s: float | None, now_s: float) -> str:
    """``2026-11-22 14:03Z (in 3h12m)``; "-" for None."""
    if t_s is None or not math.isfinite(t_s):
        return "-"
    return f"{stamp(t_s)} ({relative(t_s, now_s)})"
