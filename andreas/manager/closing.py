"""Ending an attempt and moving its job, the one write every phase of a tick shares.

Apart so that settling, starting and the queued runs all end attempts the same way: in
one transaction with the job's move, a conflict logged and looked at again next tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from andreas.limits import REASON_CHARS
from andreas.store.attempts import end_attempt
from andreas.store.engine import Store
from andreas.store.errors import TransitionConflict
from andreas.store.jobs import record, transition
from andreas.store.models import JobState
from andreas.store.read import AttemptView, JobView

log = logging.getLogger("andreas.manager")

UNREACHABLE_REASON = "node unreachable"   # an attempt ended because its node went away


def clip(text: str) -> str:
    """A reason cut to the width the store keeps."""
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


class Closer:
    """Closes attempts and fails jobs that cannot start, for the whole reconciler."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    def end(self, job: JobView, a: AttemptView, end_s: float, *, reason: str,
            exit_code: int | None = None, new: JobState | None = None,
            failures: int | None = None, job_reason: str | None = None,
            epochs_done: int | None = None) -> bool:
        """Close an attempt and (optionally) move its job, in one transaction."""
        try:
            with self.store.session() as s:
                end_attempt(s, a.id, end_s, exit_code=exit_code, reason=clip(reason))
                if new is not None:
                    transition(s, job.id, new, expected=job.state, now_s=self.clock())
                record(s, job.id, failures=failures,
                       reason=clip(job_reason) if job_reason is not None else None,
                       epochs_done=epochs_done)
            return True
        except TransitionConflict as e:
            log.info("job %s changed meanwhile (%s); will look again", job.id, e)
            return False

    def fail_unstarted(self, job: JobView, now: float, why: str) -> None:
        """A job that cannot start, ever: failed with ``why``, no attempt recorded."""
        reason = clip(why)
        try:
            with self.store.session() as s:
                transition(s, job.id, JobState.FAILED, expected=job.state, now_s=now)
                record(s, job.id, reason=reason)
            log.warning("failed job=%s: %s", job.id, reason)
        except TransitionConflict as c:
            log.info("job %s changed meanwhile (%s)", job.id, c)
