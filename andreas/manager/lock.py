"""Only one manager acts at a time.

- MariaDB: the database's named lock, :class:`andreas.store.lock.NamedLock` (released by
  the server when its connection ends, so a manager that dies frees it at once); a lost
  lock that another manager took stops the daemon with :class:`LockLost` (systemd
  restarts it, and it then waits).
- SQLite: ``fcntl.flock`` on ``<database file>.manager.lock``, which the kernel releases
  when the process ends; the file names the holder (pid and host) for messages.

``settings.manager.lock``: ``wait`` (block, logging who holds it) or ``exit`` (fail with
:class:`LockHeld`, exit code 2).
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Protocol

from andreas.errors import AndreasError
from andreas.store.engine import Engine, is_sqlite, sqlite_path
from andreas.store.lock import LockLost, NamedLock

log = logging.getLogger("andreas.manager")

LOCK_NAME = "andreas_manager"


class LockHeld(AndreasError):
    """Another manager holds the lock (and the settings say not to wait)."""


class ManagerLock(Protocol):
    """What the daemon and its loop need of a lock, whatever the backend."""

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        """Take the lock within ``timeout_s``; True if this process holds it now."""

    def holder(self) -> str:
        """Who holds it, in words (best effort)."""

    def check(self) -> None:
        """Raise LockLost unless this process still holds the lock (retaking it if free)."""

    def release(self) -> None:
        """Give the lock back (idempotent)."""


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        deadline = time.monotonic() + timeout_s
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            return True

    def holder(self) -> str:
        try:
            return self.path.read_text().strip() or "unknown"
        except OSError:
            return "unknown"

    def check(self) -> None:
        if self._fd is None:
            raise LockLost(f"manager lock {self.path} is not held")

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None


class ProcessLock:
    """An in-memory SQLite database: nobody else can see it, nothing to lock."""

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        return True

    def holder(self) -> str:
        return "this process"

    def check(self) -> None:
        return None

    def release(self) -> None:
        return None


def make_lock(engine: Engine) -> ManagerLock:
    """The lock that fits the store's backend."""
    if is_sqlite(engine):
        path = sqlite_path(engine.url)
        if path is None:
            return ProcessLock()
        return FileLock(Path(f"{path}.manager.lock"))
    return NamedLock(engine, LOCK_NAME)


def acquire(lock: ManagerLock, mode: str = "wait", *, stop: threading.Event | None = None,
            step_s: float = 2.0) -> bool:
    """Take the lock: at once, or (``wait``) once the holder lets go; False if ``stop`` was
    set while waiting. ``exit`` mode raises LockHeld naming the holder."""
    if lock.try_acquire(0):
        return True
    holder = lock.holder()
    if mode == "exit":
        raise LockHeld(f"another manager holds the manager lock ({holder}); not starting "
                       "([manager] lock = 'exit')")
    log.warning("waiting for the manager lock held by %s", holder)
    stop = stop or threading.Event()
    while not stop.is_set():
        if lock.try_acquire(step_s):
            log.info("manager lock taken")
            return True
    return False
