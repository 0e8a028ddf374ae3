"""Exponential back-off, the one rule behind every "retry later" of the project.

Call sites differ in how they wait (a sleep, a ``retry_at`` on a monotonic clock, an
``Event.wait``), so this is only the rule: the wait after ``failures`` failures in a row.
Callers count failures themselves and reset the count on success. Stdlib only, so the
agent imports it for free.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """``initial_s``, multiplied by ``factor`` per further failure, capped at ``max_s``."""

    initial_s: float
    max_s: float
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not self.initial_s >= 0:
            raise ValueError(f"Backoff initial_s {self.initial_s!r}: must be >= 0")
        if not self.max_s >= 0:
            raise ValueError(f"Backoff max_s {self.max_s!r}: must be >= 0")
        if not self.factor >= 1:
            raise ValueError(f"Backoff factor {self.factor!r}: must be >= 1")

    def delay_s(self, failures: int) -> float:
        """The wait before the next try after ``failures`` earlier failures in a row:
        ``initial_s`` for 0, then ``initial_s * factor**failures``, never above ``max_s``
        (also for a count so large that the power overflows: an outage of days)."""
        if failures < 0:
            raise ValueError(f"Backoff failures {failures!r}: must be >= 0")
        try:
            return min(self.max_s, self.initial_s * self.factor ** failures)
        except OverflowError:
            return self.max_s
