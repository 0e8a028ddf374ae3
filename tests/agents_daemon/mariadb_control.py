"""Stop and start the test MariaDB server that scripts/test.sh runs (an outage on demand).

``scripts/mariadb-test-server.sh`` exports ``MARIADB_TEST_DIR`` (the run directory with
``mariadb.pid`` and ``mariadbd.args``, the server's exact command line, NUL-separated)
and ``MARIADB_TEST_SOCKET``. :meth:`stop` shuts the server down cleanly through the
socket (as root, which the script leaves reachable only there); :meth:`start` launches
mariadbd again with the same arguments (same data directory, socket and TCP port) and
waits until it answers. ``mariadb_test_stop`` finds a restarted server through the pid
file. Missing variables are a test failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

_started: list[subprocess.Popen] = []     # keep restarted servers referenced


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")              # a zombie has stopped: it only waits to be reaped


class MariaDBServer:
    def __init__(self) -> None:
        run_dir = os.environ.get("MARIADB_TEST_DIR")
        socket = os.environ.get("MARIADB_TEST_SOCKET")
        if not run_dir or not socket or not (Path(run_dir) / "mariadbd.args").is_file():
            pytest.fail("MARIADB_TEST_DIR / MARIADB_TEST_SOCKET are not set (or the run "
                        "directory has no mariadbd.args): the outage test stops and starts "
                        "the private MariaDB of `bash scripts/test.sh`", pytrace=False)
        self.dir = Path(run_dir)
        self.socket = socket
        self.args = [a.decode() for a in (self.dir / "mariadbd.args").read_bytes()
                     .split(b"\0") if a]
        self.admin = (os.environ.get("MARIADB_TEST_ADMIN") or shutil.which("mariadb-admin")
                      or shutil.which("mysqladmin") or "mariadb-admin")

    def pid(self) -> int | None:
        try:
            return int((self.dir / "mariadb.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def ping(self) -> bool:
        return subprocess.run([self.admin, "--no-defaults", f"--socket={self.socket}", "-uroot",
                               "ping"], capture_output=True, timeout=30).returncode == 0

    def stop(self, timeout: float = 60.0) -> None:
        pid = self.pid()
        subprocess.run([self.admin, "--no-defaults", f"--socket={self.socket}", "-uroot",
                        "shutdown"], capture_output=True, timeout=timeout)
        deadline = time.monotonic() + timeout
        while pid is not None and _alive(pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"mariadbd {pid} did not stop within {timeout:.0f} s")
            time.sleep(0.05)

    def start(self, timeout: float = 60.0) -> None:
        proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        _started.append(proc)
        deadline = time.monotonic() + timeout
        while not self.ping():
            if proc.poll() is not None:
                raise AssertionError(f"mariadbd exited at restart (log: {self.dir}/error.log)")
            if time.monotonic() > deadline:
                raise AssertionError(f"mariadbd did not answer within {timeout:.0f} s")
            time.sleep(0.1)
