"""The report window (``--since`` / ``--until``) and its periods (UTC days, ISO weeks).

Accepted times: ``now``; relative to now ``-7d``, ``-12h``, ``-1h30m``, ``-2w`` (s, m, h, d,
w); an ISO date (``2026-11-01`` = 00:00 UTC that day); an ISO 8601 date-time (UTC unless
it has an offset, ``Z`` accepted); unix seconds. Days and weeks are UTC, weeks start on
Monday (ISO 8601), so a period label is ``2026-11-22`` or ``2026-W47``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from andreas.errors import InputError
from andreas.infra.timefmt import parse_duration, stamp

DEFAULT_SINCE = "-7d"
DEFAULT_UNTIL = "now"
PERIODS = ("day", "week")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, kw_only=True)
class Window:
    """[since, until) in UTC seconds; ``now_s`` ends running attempts and tardiness."""

    since_s: float
    until_s: float
    now_s: float

    @property
    def hours(self) -> float:
        return (self.until_s - self.since_s) / 3600.0


@dataclass(frozen=True, kw_only=True)
class Period:
    label: str
    start_s: float
    end_s: float


def parse_time(text: str, now_s: float, label: str) -> float:
    """One ``--since`` / ``--until`` value as UTC seconds; InputError names option and value."""
    value = text.strip()
    if value.lower() == "now":
        return now_s
    if value.startswith("-"):
        ago_s = parse_duration(value[1:])
        if ago_s is None:
            raise InputError(f"{label} {text!r}: a relative time is - and a number with a unit "
                             "s, m, h, d or w (e.g. -7d, -1h30m)")
        return now_s - ago_s
    if _NUMBER.fullmatch(value):
        return float(value)
    try:
        if _DATE.fullmatch(value):
            parsed = datetime.combine(date.fromisoformat(value), datetime.min.time())
        else:
            parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{label} {text!r}: not now, -<n><s|m|h|d|w>, an ISO date "
                         "(2026-11-01), an ISO date-time (2026-11-01T08:00Z) or unix seconds"
                         ) from None
    t = (parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed).timestamp()
    if not math.isfinite(t):
        raise InputError(f"{label} {text!r}: not a finite time")
    return t


def make_window(since: str | None, until: str | None, now_s: float) -> Window:
    """The window of ``--since`` / ``--until`` (defaults: the last 7 days up to now)."""
    since_s = parse_time(since or DEFAULT_SINCE, now_s, "--since")
    until_s = parse_time(until or DEFAULT_UNTIL, now_s, "--until")
    if not since_s < until_s:
        raise InputError(f"--since {since or DEFAULT_SINCE!r} ({stamp(since_s)}) is not before "
                         f"--until {until or DEFAULT_UNTIL!r} ({stamp(until_s)})")
    return Window(since_s=since_s, until_s=until_s, now_s=now_s)


def periods(window: Window, kind: str) -> list[Period]:
    """The UTC days or ISO weeks that meet the window, clipped to it."""
    if kind not in PERIODS:
        raise InputError(f"--by {kind!r}: periods are {', '.join(PERIODS)}")
    start = datetime.fromtimestamp(window.since_s, UTC)
    day = datetime(start.year, start.month, start.day, tzinfo=UTC)
    if kind == "week":
        day -= timedelta(days=day.weekday())
    step = timedelta(days=1 if kind == "day" else 7)
    out = []
    while day.timestamp() < window.until_s:
        nxt = day + step
        if kind == "day":
            label = day.strftime("%Y-%m-%d")
        else:
            year, week, _ = day.isocalendar()
            label = f"{year}-W{week:02d}"
        out.append(Period(label=label, start_s=max(window.since_s, day.timestamp()),
                          end_s=min(window.until_s, nxt.timestamp())))
        day = nxt
    return out


def overlap_s(a0: float, a1: float, b0: float, b1: float) -> float:
    """Seconds that [a0, a1) and [b0, b1) share."""
    return max(0.0, min(a1, b1) - max(a0, b0))
