"""Only one manager acts at a time.

- MariaDB: ``GET_LOCK('andreas_manager', ...)`` on a dedicated autocommit connection kept
  for the daemon's life. The server releases it when that connection ends, so a manager
  that dies (even by SIGKILL, or on another host) frees it at once. :meth:`check` runs a
  cheap query regularly, which also keeps the idle connection from the server's
  ``wait_timeout``; a lost lock (connection dropped) is taken back if it is free, else
  the daemon stops with :class:`LockLost` (systemd restarts it, and it then waits).
- SQLite: ``fcntl.flock`` on ``<database file>.manager.lock``, which the kernel releases
  when the process ends; the file names the holder (pid and host) for messages.

``settings.manager.lock``: ``wait`` (block, logging who holds it) or ``exit`` (fail with
:class:`LockHeld`, exit code 2).
"""

from __future__ import annotations

import abc
import fcntl
import logging
import os
import socket
import threading
import time
from pathlib import Path

from sqlalchemy import Connection, Engine, text

from andreas.errors import AndreasError
from andreas.store.engine import is_sqlite, sqlite_path

log = logging.getLogger("andreas.manager")

LOCK_NAME = "andreas_manager"


class LockHeld(AndreasError):
    """Another manager holds the lock (and the settings say not to wait)."""


class LockLost(AndreasError):
    """The lock went away while this manager held it, and another manager has it now."""


class ManagerLock(abc.ABC):
    @abc.abstractmethod
    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        """Take the lock within ``timeout_s``; True if this process holds it now."""

    @abc.abstractmethod
    def holder(self) -> str:
        """Who holds it, in words (best effort)."""

    @abc.abstractmethod
    def check(self) -> None:
        """Raise LockLost unless this process still holds the lock (retaking it if free)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lock back (idempotent)."""


class MariaDBLock(ManagerLock):
    def __init__(self, engine: Engine, name: str = LOCK_NAME) -> None:
        self.engine = engine
        self.name = name
        self._conn: Connection | None = None

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._conn

    def try_acquire(self, timeout_s: float = 0.0) -> bool:
        got = self._connection().execute(text("SELECT GET_LOCK(:n, :t)"),
                                         {"n": self.name, "t": max(0, int(timeout_s))}
                                         ).scalar()
        return got == 1

    def holder(self) -> str:
        with self.engine.connect() as conn:
            cid = conn.execute(text("SELECT IS_USED_LOCK(:n)"), {"n": self.name}).scalar()
            if cid is None:
                return "nobody (free now)"
            try:
                row = conn.execute(text("SELECT USER, HOST FROM information_schema.PROCESSLIST "
                                        "WHERE ID = :id"), {"id": cid}).one_or_none()
            except Exception:  # noqa: BLE001 - who holds it is a courtesy
                row = None
        where = f" ({row[0]}@{row[1]})" if row is not None else ""
        return f"database connection {cid}{where}"

    def check(self) -> None:
        try:
            mine = self._connection().execute(
                text("SELECT IS_USED_LOCK(:n) = CONNECTION_ID()"), {"n": self.name}).scalar()
        except Exception as e:  # noqa: BLE001 - the connection died: try to retake below
            log.warning("manager lock connection lost (%s); retaking the lock", e)
            self._drop()
            mine = None
        if mine == 1:
            return
        if self.try_acquire(0):
            log.warning("manager lock was lost and has been taken again")
            return
        raise LockLost(f"manager lock {self.name!r} lost; now held by {self.holder()}")

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:  # noqa: BLE001
                pass
            self._conn = None

    def release(self) -> None:
        if self._conn is None:
            return
        try:
            self._conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": self.name})
            self._conn.close()
        except Exception:  # noqa: BLE001 - closing the connection releases it anyway
            self._drop()
        self._conn = None


class FileLock(ManagerLock):
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


class ProcessLock(ManagerLock):
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
    return MariaDBLock(engine)


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
