"""The manager's loop: start (reconcile, reschedule, apply), then one tick every ``poll_s``
and a ``period`` trigger every ``period_s`` (an APScheduler 3 interval job), until asked
to stop. A lost manager lease (:class:`LeaseLost`) ends the loop.

A tick that fails because the database is away (a transient error: server down,
connection lost) puts the loop in *outage* mode: one warning, then a cheap probe (the
lease renewal, else ``SELECT 1``) every 0.25-2 s (``PROBE``), and the first tick as soon
as it answers, with one line saying so. The probe renews the lease, so after any outage
the manager knows it still holds it before it acts again. Any other failure is retried
with exponential back-off (``ERROR_BACKOFF``): its traceback is logged once, repeats of
the same error one line each.

Between ticks the loop waits on ``manager.wakeup`` (set by :meth:`Manager.request`, e.g.
the period timer, and by the executor's container events through :meth:`Manager.wake`)
for at most ``poll_s``: a wake makes the next tick come sooner, never replaces the poll.
After a wake it waits ``settle_s`` more so a burst of events makes one tick, and ticks
start at least ``min_tick_s`` apart; a prompt wake (``manager.prompt``: a submission or
cancellation, one datagram per command) skips the settle, so a new job is not held
back by it. While ticks fail, wakes are ignored (the back-off
holds). The flag is cleared just before each tick, so a wake during a tick is not lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from andreas.infra.backoff import Backoff
from andreas.manager.lock import LeaseLost, ManagerLock
from andreas.manager.manager import Manager
from andreas.manager.triggers import Trigger
from andreas.store.engine import connect
from andreas.store.faults import FaultKind, describe, error_kind

log = logging.getLogger("andreas.manager")

MAX_ERROR_BACKOFF_S = 60.0
PROBE = Backoff(initial_s=0.25, max_s=2.0)   # while the database is away
SETTLE_S = 0.05            # after a wake: wait this long for the rest of a burst
MIN_TICK_S = 0.1           # ticks start at least this far apart (event storms)
STOP_CHECK_S = 0.2         # a stop is noticed this quickly while waiting for a wake


def period_scheduler(manager: Manager, period_s: float) -> Any:
    """A started BackgroundScheduler that asks for a ``period`` rescheduling every H."""
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(daemon=True, timezone="UTC")
    scheduler.add_job(manager.request, "interval", seconds=period_s, args=(Trigger.PERIOD,),
                      id="andreas-period", coalesce=True, max_instances=1,
                      misfire_grace_time=None)
    scheduler.start()
    return scheduler


def wait_for_tick(stop: threading.Event, wakeup: threading.Event, timeout_s: float, *,
                  last_tick: float, settle_s: float = SETTLE_S,
                  min_tick_s: float = MIN_TICK_S,
                  prompt: threading.Event | None = None) -> bool:
    """Wait until ``timeout_s`` passed or ``wakeup`` is set (then ``settle_s`` more, none
    when ``prompt`` is set too, and until ``min_tick_s`` after ``last_tick``, a
    ``time.monotonic()``). True: stop is set."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if wakeup.wait(min(left, STOP_CHECK_S)):
            return _settle(stop, prompt, time.monotonic() + settle_s, last_tick + min_tick_s)
    return True


def _settle(stop: threading.Event, prompt: threading.Event | None, settle_end: float,
            floor: float) -> bool:
    """After a wake: until ``settle_end``, or only until ``floor`` once ``prompt`` is
    set (also while settling). True: stop is set."""
    while not stop.is_set():
        prompted = prompt is not None and prompt.is_set()
        end = floor if prompted else max(settle_end, floor)
        left = end - time.monotonic()
        if left <= 0:
            return False
        if prompt is None or prompted:
            return stop.wait(left)
        prompt.wait(min(left, STOP_CHECK_S))
    return True


def wait_for_database(manager: Manager, stop: threading.Event, lock: ManagerLock | None,
                      why: str, *, mono: Callable[[], float] = time.monotonic) -> bool:
    """Outage mode: probe until the database answers (True) or ``stop`` is set (False).
    The probe is the lease's renewal when there is a lease (LeaseLost passes: another
    manager took over meanwhile), else ``SELECT 1``."""
    log.warning("database unreachable (%s); probing it every %.2g-%.2g s", why,
                PROBE.initial_s, PROBE.max_s)
    since = mono()
    tries = 0
    while not stop.wait(PROBE.delay_s(tries)):
        tries += 1
        try:
            if lock is not None:
                lock.check()
            else:
                connect(manager.store.engine)
        except LeaseLost:
            raise
        except Exception as e:  # noqa: BLE001 - still away (one line when the cause changes)
            now_why = describe(e)
            if now_why != why:
                log.warning("database still unreachable: %s", now_why)
                why = now_why
            continue
        log.info("database answers again after %.1f s; resuming", mono() - since)
        return True
    return False


def run_loop(manager: Manager, stop: threading.Event, *, once: bool = False,
             lock: ManagerLock | None = None,
             scheduler_factory: Callable[[Manager, float], Any] = period_scheduler,
             monotonic: Callable[[], float] = time.monotonic,
             settle_s: float = SETTLE_S, min_tick_s: float = MIN_TICK_S) -> None:
    """Run until ``stop`` is set (a tick in progress is finished first)."""
    settings = manager.settings.manager
    wakeup = manager.wakeup
    prompt = manager.prompt
    wakeup.clear()
    manager.start()
    if once or stop.is_set():
        return
    scheduler = scheduler_factory(manager, settings.period_s)
    errors = 0
    last_error = ""
    error_backoff = Backoff(initial_s=settings.poll_s, max_s=MAX_ERROR_BACKOFF_S)
    last_tick = time.monotonic()
    try:
        wait_s = settings.poll_s
        while True:
            if errors:
                if stop.wait(wait_s):          # back-off: wakes do not shorten it
                    break
            elif wait_for_tick(stop, wakeup, wait_s, last_tick=last_tick,
                               settle_s=settle_s, min_tick_s=min_tick_s, prompt=prompt):
                break
            prompt.clear()
            wakeup.clear()
            last_tick = time.monotonic()
            try:
                manager.tick()
                if errors:
                    log.info("ticks succeed again after %d failure(s)", errors)
                errors, last_error, wait_s = 0, "", settings.poll_s
            except LeaseLost:
                raise
            except Exception as e:
                if error_kind(e) is FaultKind.TRANSIENT:
                    if not wait_for_database(manager, stop, lock, describe(e),
                                             mono=monotonic):
                        break
                    errors, last_error, wait_s = 0, "", 0.0
                    continue
                errors += 1
                wait_s = error_backoff.delay_s(errors)
                line = describe(e)
                if line != last_error:
                    log.exception("tick failed; next try in %.1f s", wait_s)
                else:
                    log.warning("tick failed again (%d in a row): %s; next try in %.1f s",
                                errors, line, wait_s)
                last_error = line
    finally:
        scheduler.shutdown(wait=False)
