"""The manager's loop: start (reconcile, reschedule, apply), then one tick every ``poll_s``
and a ``period`` trigger every ``period_s`` (an APScheduler 3 interval job), until asked
to stop. A tick that fails (the database is down, say) is logged and retried with
back-off; a lost manager lock ends the loop.

Between ticks the loop waits on ``manager.wakeup`` (set by :meth:`Manager.request`, e.g.
the period timer, and by the executor's container events through :meth:`Manager.wake`)
for at most ``poll_s``: a wake makes the next tick come sooner, never replaces the poll.
After a wake it waits ``settle_s`` more so a burst of events makes one tick, and ticks
start at least ``min_tick_s`` apart. While ticks fail, wakes are ignored (the back-off
holds). The flag is cleared just before each tick, so a wake during a tick is not lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from andreas.infra.backoff import Backoff
from andreas.manager.lock import LockLost, ManagerLock
from andreas.manager.manager import Manager

log = logging.getLogger("andreas.manager")

LOCK_CHECK_S = 10.0
MAX_ERROR_BACKOFF_S = 60.0
SETTLE_S = 0.05            # after a wake: wait this long for the rest of a burst
MIN_TICK_S = 0.1           # ticks start at least this far apart (event storms)
STOP_CHECK_S = 0.2         # a stop is noticed this quickly while waiting for a wake


def period_scheduler(manager: Manager, period_s: float) -> Any:
    """A started BackgroundScheduler that asks for a ``period`` rescheduling every H."""
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(daemon=True, timezone="UTC")
    scheduler.add_job(manager.request, "interval", seconds=period_s, args=("period",),
                      id="andreas-period", coalesce=True, max_instances=1,
                      misfire_grace_time=None)
    scheduler.start()
    return scheduler


def wait_for_tick(stop: threading.Event, wakeup: threading.Event, timeout_s: float, *,
                  last_tick: float, settle_s: float = SETTLE_S,
                  min_tick_s: float = MIN_TICK_S) -> bool:
    """Wait until ``timeout_s`` passed or ``wakeup`` is set (then ``settle_s`` more, and
    until ``min_tick_s`` after ``last_tick``, a ``time.monotonic()``). True: stop is set."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if wakeup.wait(min(left, STOP_CHECK_S)):
            pause = max(settle_s, last_tick + min_tick_s - time.monotonic())
            return stop.wait(pause) if pause > 0 else stop.is_set()
    return True


def run_loop(manager: Manager, stop: threading.Event, *, once: bool = False,
             lock: ManagerLock | None = None,
             scheduler_factory: Callable[[Manager, float], Any] = period_scheduler,
             monotonic: Callable[[], float] = time.monotonic,
             settle_s: float = SETTLE_S, min_tick_s: float = MIN_TICK_S) -> None:
    """Run until ``stop`` is set (a tick in progress is finished first)."""
    settings = manager.settings.manager
    wakeup = manager.wakeup
    wakeup.clear()
    manager.start()
    if once or stop.is_set():
        return
    scheduler = scheduler_factory(manager, settings.period_s)
    errors = 0
    error_backoff = Backoff(initial_s=settings.poll_s, max_s=MAX_ERROR_BACKOFF_S)
    next_lock_check = monotonic() + LOCK_CHECK_S
    last_tick = time.monotonic()
    try:
        wait_s = settings.poll_s
        while True:
            if errors:
                if stop.wait(wait_s):          # back-off: wakes do not shorten it
                    break
            elif wait_for_tick(stop, wakeup, wait_s, last_tick=last_tick,
                               settle_s=settle_s, min_tick_s=min_tick_s):
                break
            wakeup.clear()
            last_tick = time.monotonic()
            try:
                manager.tick()
                errors, wait_s = 0, settings.poll_s
            except Exception:
                errors += 1
                wait_s = error_backoff.delay_s(errors)
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
