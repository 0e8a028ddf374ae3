"""Wake the manager when a job is submitted or cancelled: a hint, never the truth.

The manager polls the store every ``poll_s`` (1 s); that poll stays the source of truth.
A submission (or cancellation) that committed also sends one empty datagram to the
manager's socket, so the manager ticks now instead of at its next poll. The socket is a
Linux *abstract* Unix datagram socket (no file, nothing to clean up, gone with the
process) named after the database (:func:`address`: a hash of the key the store gives,
the SQLite file's real path or the MariaDB server's host, port and database), so a
submitter and the manager of the same database on one host meet without configuration,
and two databases on one host never wake each other's manager.

Nothing depends on the datagram arriving: a submitter on another host (MariaDB), a
manager not running, another network namespace (a container) or an OS without abstract
sockets simply leave the manager to its poll. Any local process can send such a
datagram; all it can do is bring a tick forward (the loop starts ticks at least 0.1 s
apart), and the tick reads the store as always.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import threading
from collections.abc import Callable

log = logging.getLogger("andreas.manager")

PREFIX = b"\0andreas-wake-"
STOP_CHECK_S = 0.5


def address(key: str) -> bytes:
    """The abstract socket address of the manager of the database named by ``key``."""
    return PREFIX + hashlib.sha256(key.encode()).hexdigest()[:32].encode()


def poke(key: str, what: bytes = b"submit") -> bool:
    """Tell the manager of ``key``'s database that something changed; True if a manager
    listens on this host (no error is ever raised: the poll covers a lost hint)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            s.sendto(what[:64], address(key))
        return True
    except OSError:
        return False


class Listener:
    """Calls ``on_wake(what)`` for each datagram, on a daemon thread, until :meth:`close`."""

    def __init__(self, key: str, on_wake: Callable[[str], None]) -> None:
        self._stop = threading.Event()
        self._sock: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(address(key))
        except OSError:
            self._sock.close()
            raise
        self._sock.settimeout(STOP_CHECK_S)
        self._on_wake = on_wake
        self._thread = threading.Thread(target=self._run, name="andreas-wake", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stop.is_set():
            try:
                data = sock.recv(64)
            except TimeoutError:
                continue
            except OSError:
                return                          # closed
            try:
                self._on_wake(data.decode("ascii", "replace") or "poke")
            except Exception:
                log.exception("wake-up handler failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * STOP_CHECK_S)
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def listen(key: str, on_wake: Callable[[str], None]) -> Listener | None:
    """A :class:`Listener`, or None (logged) when the socket cannot be had: the manager
    then sees submissions at its poll."""
    try:
        return Listener(key, on_wake)
    except OSError as e:
        log.warning("no wake-up socket for submissions (%s): new jobs are seen at the next "
                    "poll", e)
        return None
