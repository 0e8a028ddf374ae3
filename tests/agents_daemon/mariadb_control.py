"""Stop and start a test MariaDB server (an outage on demand).

``scripts/mariadb-test-server.sh`` exports ``MARIADB_TEST_DIR`` (the run directory with
``mariadb.pid`` and ``mariadbd.args``, the server's exact command line, NUL-separated)
and ``MARIADB_TEST_SOCKET``. :meth:`MariaDBServer.stop` shuts the server down cleanly
through the socket (as root, which the script leaves reachable only there);
:meth:`MariaDBServer.start` launches mariadbd again with the same arguments (same data
directory, socket and TCP port) and waits until it answers. ``mariadb_test_stop`` finds a
restarted server through the pid file.

The outage tests stop a server of their own (:class:`PrivateMariaDB`, the same script,
once per pytest process: the ``outage_mariadb`` fixture), never the one scripts/test.sh
shares with every other test, so they can run beside them. Missing variables or a server
that does not start are a test failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_started: list[subprocess.Popen] = []     # keep restarted servers referenced


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")              # a zombie has stopped: it only waits to be reaped


class MariaDBServer:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        """The server whose variables ``env`` holds (default: this process's)."""
        env = os.environ if env is None else env
        run_dir = env.get("MARIADB_TEST_DIR")
        socket = env.get("MARIADB_TEST_SOCKET")
        if not run_dir or not socket or not (Path(run_dir) / "mariadbd.args").is_file():
            pytest.fail("MARIADB_TEST_DIR / MARIADB_TEST_SOCKET are not set (or the run "
                        "directory has no mariadbd.args): the outage test stops and starts "
                        "a server of scripts/mariadb-test-server.sh", pytrace=False)
        self.dir = Path(run_dir)
        self.socket = socket
        self.args = [a.decode() for a in (self.dir / "mariadbd.args").read_bytes()
                     .split(b"\0") if a]
        self.admin = (env.get("MARIADB_TEST_ADMIN") or shutil.which("mariadb-admin")
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


class PrivateMariaDB:
    """A server of this pytest process (scripts/mariadb-test-server.sh in a bash that
    holds it until its stdin closes; its EXIT trap stops the server, restarted or not).
    ``env`` holds the variables the script exports (ANDREAS_TEST_MARIADB_URL, MARIADB_TEST_*)."""

    def __init__(self, base: Path, timeout_s: float = 180.0) -> None:
        base.mkdir(parents=True, exist_ok=True)
        env_file = base / f"env-{os.getpid()}"
        env_file.unlink(missing_ok=True)
        script = ('source scripts/mariadb-test-server.sh && mariadb_test_start "$1" '
                  '&& env > "$2.tmp" && mv "$2.tmp" "$2" && trap mariadb_test_stop EXIT '
                  '&& read -r _')
        self.log = (base / f"start-{os.getpid()}.log").open("w")
        self.proc = subprocess.Popen(["bash", "-c", script, "_", str(base), str(env_file)],
                                     stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + timeout_s
        while not env_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError("the outage tests' MariaDB did not start: "
                                     + Path(self.log.name).read_text()[-2000:])
            time.sleep(0.1)
        self.env = dict(line.split("=", 1) for line in env_file.read_text().splitlines()
                        if "=" in line)
        env_file.unlink()

    @property
    def admin_url(self) -> str:
        return self.env["ANDREAS_TEST_MARIADB_URL"]

    def server(self) -> MariaDBServer:
        return MariaDBServer(self.env)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
