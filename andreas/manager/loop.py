"""The manager's loop: start (reconcile, reschedule, apply), then one tick every ``poll_s``
and a ``period`` trigger every ``period_s`` (an APScheduler 3 interval job), until asked
to stop. A tick that fails (the database is down, say) is logged and retried with
back-off; a lost manager lock ends the loop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from andreas.manager.lock import LockLost, ManagerLock
from andreas.manager.manager import Manager

log = logging.getLogger("andreas.manager")

LOCK_CHECK_S = 10.0
MAX_ERROR_BACKOFF_S = 60.0


def period_scheduler(manager: Manager, period_s: float) -> Any:
    """A started BackgroundScheduler that asks for a ``period`` rescheduling every H."""
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(daemon=True, timezone="UTC")
    scheduler.add_job(manager.request, "interval", seconds=period_s, args=("period",),
                      id="andreas-period", coalesce=True, max_instances=1,
                      misfire_grace_time=None)
    scheduler.start()
    return scheduler


def run_loop(manager: Manager, stop: threading.Event, *, once: bool = False,
             lock: ManagerLock | None = None,
             scheduler_factory: Callable[[Manager, float], Any] = period_scheduler,
             monotonic: Callable[[], float] = time.monotonic) -> None:
    """Run until ``stop`` is set (a tick in progress is finished first)."""
    settings = manager.settings.manager
    manager.start()
    if once or stop.is_set():
        return
    scheduler = scheduler_factory(manager, settings.period_s)
    errors = 0
    next_lock_check = monotonic() + LOCK_CHECK_S
    try:
        wait_s = settings.poll_s
        while not stop.wait(wait_s):
            try:
                manager.tick()
                errors, wait_s = 0, settings.poll_s
            except Exception:  # noqa: BLE001 - the loop outlives a database outage
                errors += 1
                wait_s = min(MAX_ERROR_BACKOFF_S, settings.poll_s * 2 ** errors)
                log.exception("tick failed (%d in a row); next try in %.1f s", errors, wait_s)
            if lock is not None and monotonic() >= next_lock_check:
                next_lock_check = monotonic() + LOCK_CHECK_S
                try:
                    lock.check()
                except LockLost:
                    raise
                except Exception as e:  # noqa: BLE001 - database briefly away: check later
                    log.warning("could not check the manager lock: %s", e)
    finally:
        scheduler.shutdown(wait=False)
