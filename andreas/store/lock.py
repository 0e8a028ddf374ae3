"""The database's named lock (MariaDB ``GET_LOCK``), e.g. the one that lets only one manager act.

It is held on a dedicated autocommit connection kept for the holder's life. The server
releases it when that connection ends, so a holder that dies (even by SIGKILL, or on
another host) frees it at once. :meth:`NamedLock.check` runs a cheap query regularly,
which also keeps the idle connection from the server's ``wait_timeout``; a lost lock
(connection dropped) is taken back if it is free, else :class:`LockLost`.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine, text

from andreas.errors import AndreasError

log = logging.getLogger(__name__)


class LockLost(AndreasError):
    """The lock went away while this process held it, and another holder has it now."""


class NamedLock:
    """``GET_LOCK(name)`` held on one autocommit connection (see the module docstring)."""

    def __init__(self, engine: Engine, name: str) -> None:
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
            log.warning("lock %r: connection lost (%s); retaking it", self.name, e)
            self._drop()
            mine = None
        if mine == 1:
            return
        if self.try_acquire(0):
            log.warning("lock %r was lost and has been taken again", self.name)
            return
        raise LockLost(f"lock {self.name!r} lost; now held by {self.holder()}")

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
