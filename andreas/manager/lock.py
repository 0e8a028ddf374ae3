"""Only one manager acts at a time: the manager lease (``andreas.store.lease``), on MariaDB
and SQLite alike.

- :class:`Lease` takes the lease row when it is free: never taken, expired (its holder
  stopped renewing it ``[manager] lease_s`` ago, by the database's clock), given back by a
  clean stop, or held by a process of this machine that is no longer running (a manager
  restarted after a crash need not wait for the expiry: ``andreas.infra.procs``). Its
  token fences every write (``install_fence``), and :meth:`Lease.check` renews it and
  raises :class:`LeaseLost` once another manager has taken it.
- :class:`Renewer` renews it in the background every ``lease_s / 3``, so a long decision
  does not let it expire; the loop checks it after every observation, before acting.
- :func:`acquire`: ``settings.manager.lock`` ``wait`` (a standby: retries, surviving a
  database that comes and goes, one line per change) or ``exit`` (:class:`LockHeld`,
  exit code 2).

A manager that has lost the lease stops (exit code 1; systemd restarts it as a standby).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

from andreas.config import LockMode
from andreas.errors import AndreasError
from andreas.infra import procs
from andreas.store import lease as rows
from andreas.store.engine import Engine, is_sqlite, sqlite_path
from andreas.store.faults import FaultKind, describe, error_kind
from andreas.store.lease import LeaseLost

log = logging.getLogger("andreas.manager")

LEASE_S = 15.0
__all__ = ["LEASE_S", "Lease", "LeaseLost", "LockHeld", "ManagerLock", "ProcessLock",
           "Renewer", "acquire", "make_lock"]


class LockHeld(AndreasError):
    """Another manager holds the lease (and the settings say not to wait)."""


class ManagerLock(Protocol):
    """What the daemon and its loop need of a lease, whatever the backend."""

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        """Take it within ``timeout_s``; True if this process holds it now."""

    def holder(self) -> str:
        """Who holds it, in words (best effort)."""

    def check(self) -> None:
        """Renew it; LeaseLost when another manager holds it (a database error passes)."""

    def release(self) -> None:
        """Give it back (idempotent)."""


def holder_name(me: procs.Identity) -> str:
    """The holder column: ``host/boot/pid namespace/pid/start ticks/nonce``."""
    p = me.process
    return (f"{me.host[:100]}/{me.boot}/{me.pid_ns}/{p.pid}/{p.start_ticks}/"
            f"{os.urandom(4).hex()}")


def holder_identity(holder: str) -> procs.Identity | None:
    parts = holder.split("/")
    if len(parts) != 6 or not parts[3].isdigit() or not parts[4].isdigit():
        return None
    return procs.Identity(host=parts[0], boot=parts[1], pid_ns=parts[2],
                          process=procs.ProcessRef(pid=int(parts[3]),
                                                   start_ticks=int(parts[4])))


class Lease:
    """This process's hold on the manager lease (see the module docstring)."""

    def __init__(self, engine: Engine, *, ttl_s: float = LEASE_S,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.ttl_s = ttl_s
        self.mono = mono
        self.me = holder_name(procs.Identity.mine())
        self.token: int | None = None
        self.renewed_mono = -math.inf      # when the last successful renewal was sent
        self._lock = threading.Lock()      # the loop and the renewer

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        deadline = self.mono() + timeout_s
        while True:
            if self._try_once():
                return True
            left = deadline - self.mono()
            if left <= 0:
                return False
            time.sleep(min(1.0, left))

    def _try_once(self) -> bool:
        sent = self.mono()
        with self._lock, self.engine.begin() as conn:
            state = rows.read(conn)
            if not self._free(state):
                return False
            token = rows.take(conn, holder=self.me, seen=state, ttl_s=self.ttl_s)
        if token is None:
            return False
        self.token, self.renewed_mono = token, sent
        if state.holder and state.holder != self.me:
            log.info("manager lease taken (token %d; it was %s's, %s)", token,
                     rows.describe(state.holder),
                     "given back" if state.expires_s == 0 else
                     "expired" if state.expired else "its process has ended")
        else:
            log.info("manager lease taken (token %d)", token)
        return True

    def _free(self, state: rows.LeaseState) -> bool:
        if not state.holder or state.holder == self.me or state.expired:
            return True
        who = holder_identity(state.holder)
        return who is not None and who.dead_here()

    def holder(self) -> str:
        with self.engine.connect() as conn:
            state = rows.read(conn)
        if not state.holder:
            return "nobody (free now)"
        when = ("given back" if state.expires_s == 0 else "expired" if state.expired
                else f"expires in {state.remaining_s:.0f} s unless renewed")
        return f"{rows.describe(state.holder)} ({when})"

    def fence_token(self) -> int:
        """The token every write carries; LeaseLost when none is held."""
        token = self.token
        if token is None:
            raise LeaseLost("this manager does not hold the manager lease")
        return token

    def check(self) -> None:
        token = self.fence_token()
        sent = self.mono()
        with self._lock, self.engine.begin() as conn:
            if not rows.renew(conn, holder=self.me, token=token, ttl_s=self.ttl_s):
                state = rows.read(conn)
                self.token = None
                raise LeaseLost(f"the manager lease is held by {rows.describe(state.holder)} "
                                f"now (token {state.token}; this manager had {token})")
        self.renewed_mono = max(self.renewed_mono, sent)

    def held(self) -> bool:
        """Held, by this process's last renewal, for sure right now."""
        return self.token is not None and self.mono() < self.renewed_mono + self.ttl_s

    def release(self) -> None:
        token, self.token = self.token, None
        if token is None:
            return
        try:
            with self._lock, self.engine.begin() as conn:
                rows.give_up(conn, token=token)
        except Exception as e:  # noqa: BLE001 - it expires by itself
            log.warning("could not give the manager lease back (%s); it expires in %.0f s",
                        describe(e), self.ttl_s)


class ProcessLock:
    """An in-memory SQLite database: nobody else can see it, nothing to lease."""

    token = None

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        return True

    def holder(self) -> str:
        return "this process"

    def check(self) -> None:
        return None

    def release(self) -> None:
        return None


class Renewer:
    """Renews a :class:`Lease` every ``every_s`` on a daemon thread (a long tick or
    decision must not let it expire); errors are the loop's to see at its next check."""

    def __init__(self, lease: Lease, every_s: float | None = None) -> None:
        self.lease = lease
        self.every_s = every_s if every_s is not None else lease.ttl_s / 3.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="andreas-lease", daemon=True)

    def start(self) -> Renewer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            if self.lease.token is None:
                return
            if self.lease.mono() - self.lease.renewed_mono < self.every_s * 0.9:
                continue                       # the loop renewed it just now
            try:
                self.lease.check()
            except Exception as e:  # noqa: BLE001 - the loop's next check reports it
                log.debug("lease renewal failed: %s", describe(e))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)


def make_lock(engine: Engine, *, ttl_s: float = LEASE_S) -> Lease | ProcessLock:
    """The lease of the store's database (none to take for an in-memory SQLite one)."""
    if is_sqlite(engine) and sqlite_path(engine.url) is None:
        return ProcessLock()
    return Lease(engine, ttl_s=ttl_s)


def acquire(lock: ManagerLock, mode: str = LockMode.WAIT, *, stop: threading.Event | None = None,
            step_s: float = 2.0) -> bool:
    """Take the lease: at once, or (``wait``) once its holder lets go; False if ``stop``
    was set while waiting. ``exit`` mode raises LockHeld naming the holder. A waiting
    manager outlives database outages: one line when the database goes away, one when
    it is back."""
    stop = stop or threading.Event()
    down: str | None = None
    waiting = False
    while True:
        try:
            if lock.try_acquire(0):
                return True
            holder = lock.holder()
        except (LeaseLost, LockHeld):
            raise
        except Exception as e:            # the database is away: keep waiting
            why = describe(e)
            if error_kind(e) is FaultKind.REFUSED:
                raise LockHeld(f"this database account may not take the manager lease "
                               f"({why}); run the manager with the manager's account "
                               "(`andreas db create-users`)") from None
            if mode == LockMode.EXIT:
                raise
            if down is None:
                log.warning("standby: the database does not answer (%s); still waiting for "
                            "the manager lease", why)
            down = why
        else:
            if down is not None:
                log.info("standby: the database answers again; the manager lease is held "
                         "by %s", holder)
                down = None
            if mode == LockMode.EXIT:
                raise LockHeld(f"another manager holds the manager lease ({holder}); not "
                               "starting ([manager] lock = 'exit')")
            if not waiting:
                log.warning("waiting for the manager lease held by %s", holder)
                waiting = True
        if stop.wait(step_s):
            return False
