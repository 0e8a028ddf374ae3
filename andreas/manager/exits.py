"""What a container's exit means for its job, and the one retry rule; pure, no I/O.

- exit 0: the job is completed;
- any exit after a stop request, or 143 / 137 (SIGTERM / SIGKILL) not from the OOM
  killer: resumable, the job is preempted and restarts from its checkpoint;
- anything else is a failure: retried from the checkpoint (preempted) until the failures
  exceed ``max_retries``, then the job fails.

The reconciler applies the same retry rule (:func:`retry`) to a container that could not
be started at all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from andreas.store.models import JobState

SIGNAL_EXITS = (143, 137)          # 128 + SIGTERM, 128 + SIGKILL


class ExitKind(enum.Enum):
    COMPLETED = "completed"
    RESUMABLE = "resumable"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True)
class Retry:
    """A failure counted: the job's failures after it and whether it was the last one."""

    failures: int
    final: bool

    @property
    def state(self) -> JobState:
        return JobState.FAILED if self.final else JobState.PREEMPTED


def retry(failures_before: int, max_retries: int) -> Retry:
    """One more failure; final once the failures exceed ``max_retries``."""
    failures = failures_before + 1
    return Retry(failures=failures, final=failures > max_retries)


@dataclass(frozen=True, kw_only=True)
class ExitOutcome:
    """The job's next state, the attempt's reason, and the failure counted (FAILED only).

    ``reason`` of a failure is the exit and its cause (``exit 1 (out of memory)``); the
    caller may append the log's tail.
    """

    kind: ExitKind
    state: JobState
    reason: str
    retry: Retry | None = None


def classify_exit(code: int, *, oom_killed: bool, stop_requested: bool, failures: int,
                  max_retries: int) -> ExitOutcome:
    """The outcome of a live job's container exiting with ``code`` (see the module doc)."""
    if code == 0:
        return ExitOutcome(kind=ExitKind.COMPLETED, state=JobState.COMPLETED,
                           reason="completed")
    if stop_requested or (code in SIGNAL_EXITS and not oom_killed):
        why = "stopped on request" if stop_requested else "stopped by a signal"
        return ExitOutcome(kind=ExitKind.RESUMABLE, state=JobState.PREEMPTED,
                           reason=f"{why} (exit {code})")
    counted = retry(failures, max_retries)
    detail = " (out of memory)" if oom_killed else ""
    return ExitOutcome(kind=ExitKind.FAILED, state=counted.state,
                       reason=f"exit {code}{detail}", retry=counted)
