"""Private Docker engines for the end-to-end test: one ``dockerd`` per simulated node.

Each engine has its own API socket, data root, exec root, pid file and containerd
namespace, no bridge and no iptables (containers run with ``--network none``), so several
run side by side on one machine without touching the host network, and a test can stop
one of them to take its node away.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker


def dockerd_binary() -> str:
    """The dockerd that scripts/test.sh installed (Debian's docker.io)."""
    for candidate in (shutil.which("dockerd"), "/usr/sbin/dockerd", "/usr/bin/dockerd"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("dockerd not found: scripts/test.sh installs Debian's docker.io")


@dataclass
class Engine:
    """One dockerd; ``url`` is its ``unix://`` endpoint (also the node's docker_endpoint)."""

    name: str
    root: Path
    tmp: Path = field(init=False)
    proc: subprocess.Popen | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # unix socket paths are limited to ~107 bytes: keep the socket under a short /tmp dir
        self.tmp = Path(tempfile.mkdtemp(prefix=f"andreas-e2e-{self.name}."))

    @property
    def url(self) -> str:
        return f"unix://{self.tmp / 'docker.sock'}"

    def start(self, timeout_s: float = 60.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "daemon.json").write_text("{}")
        log = (self.root / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            [dockerd_binary(), "--host", self.url, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.tmp / "exec"), "--pidfile", str(self.root / "dockerd.pid"),
             "--containerd-namespace", f"andreas-e2e-{self.name}",
             "--containerd-plugins-namespace", f"andreas-e2e-{self.name}-plugins",
             "--iptables=false", "--ip6tables=false", "--bridge=none",
             "--config-file", str(self.root / "daemon.json"), "--log-level=warn"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd {self.name} exited at start: "
                                   f"{(self.root / 'dockerd.log').read_text()[-2000:]}")
            if self.answers():
                return
            time.sleep(0.3)
        raise RuntimeError(f"dockerd {self.name} did not answer within {timeout_s:.0f} s")

    def answers(self) -> bool:
        try:
            client = docker.DockerClient(base_url=self.url, version="auto", timeout=3)
            try:
                client.ping()
            finally:
                client.close()
            return True
        except Exception:  # noqa: BLE001 - not up (yet)
            return False

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, version="auto", timeout=30)

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM: dockerd stops its containers (SIGTERM, then SIGKILL) and exits."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def destroy(self) -> None:
        """Stop, then remove containers' mounts and every file the engine left."""
        if self.proc is not None and self.proc.poll() is None and self.answers():
            c = self.client()
            try:
                for container in c.containers.list(all=True):
                    try:
                        container.remove(force=True)
                    except Exception:  # noqa: BLE001 - best effort cleanup
                        pass
            finally:
                c.close()
        self.stop()
        for prefix in (str(self.root) + "/", str(self.tmp) + "/"):
            mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                      if line.split()[1].startswith(prefix)]
            for mnt in sorted(mounts, reverse=True):
                subprocess.run(["umount", "-l", mnt], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
