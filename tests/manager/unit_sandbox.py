"""A systemd unit's [Service] restrictions, for running a command under them in a test.

Where systemd runs (PID 1 is systemd), :func:`command` is ``systemd-run --wait --pipe``
with every property of the unit. Elsewhere (a container, CI without systemd) it emulates
the restrictions that decide whether the manager can work, with the same tools systemd
uses underneath: a private mount namespace (``unshare``) in which the whole file system
is read-only (``ProtectSystem=strict``) except the unit's ``StateDirectory``,
``CacheDirectory`` and ``ReadWritePaths`` (each a temporary directory bound in place),
an empty ``/tmp`` (``PrivateTmp``), empty home directories (``ProtectHome``), a ``/dev``
with only the pseudo devices (``PrivateDevices``), the unit's user (here ``nobody``), no
capabilities and no new privileges (``setpriv``), its ``UMask``, and
``MemoryDenyWriteExecute`` through the kernel's own switch for it (``prctl(PR_SET_MDWE)``,
Linux 6.3 and later: refuse to make writable memory executable, what systemd enforces
with a seccomp filter). :data:`NOT_EMULATED` lists the rest, each with why it cannot
change the outcome of a decision; a directive in neither list fails the test, so a new
one in the unit is looked at.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

EMULATED = frozenset({
    "User", "Group", "NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities",
    "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "StateDirectory",
    "CacheDirectory", "ReadWritePaths", "Environment", "UMask", "MemoryDenyWriteExecute"})
NOT_EMULATED = {
    "Type": "how systemd tracks the process", "ExecStart": "the test's own command",
    "EnvironmentFile": "secrets; the test passes its own environment",
    "KillSignal": "stopping", "TimeoutStopSec": "stopping", "Restart": "restarting",
    "RestartSec": "restarting", "RestartPreventExitStatus": "restarting",
    "ProtectKernelTunables": "/proc/sys, /sys read-only: nothing the manager writes",
    "ProtectKernelModules": "module loading", "ProtectKernelLogs": "the kernel log",
    "ProtectControlGroups": "cgroupfs read-only", "ProtectClock": "setting the clock",
    "ProtectHostname": "setting the host name", "ProtectProc": "other users' processes",
    "RestrictNamespaces": "creating namespaces", "RestrictRealtime": "real-time priority",
    "RestrictSUIDSGID": "set-user-id files", "LockPersonality": "personality(2)",
    "RemoveIPC": "IPC objects at stop", "RestrictAddressFamilies": "sockets: unix, ip",
    "SystemCallArchitectures": "native system calls only",
    "SystemCallFilter": "@system-service (a seccomp list; needs systemd)",
    "SystemCallErrorNumber": "with SystemCallFilter", "MemoryMax": "a cgroup limit",
    "TasksMax": "a cgroup limit"}
MDWE = ("import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN\n"
        "    sys.exit('PR_SET_MDWE failed: errno %d' % ctypes.get_errno())\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n")
NOBODY = 65534


@dataclass
class Unit:
    """The [Service] section as (key, value) pairs, in order (keys may repeat)."""

    path: Path
    service: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Unit:
        unit, section = cls(path), ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line
            elif section == "[Service]":
                key, _, value = line.partition("=")
                unit.service.append((key.strip(), value.strip()))
        return unit

    def get(self, key: str, default: str = "") -> str:
        values = [v for k, v in self.service if k == key]
        return values[-1] if values else default

    def all(self, key: str) -> list[str]:
        return [v for k, v in self.service if k == key]

    def environment(self) -> dict[str, str]:
        env = {}
        for value in self.all("Environment"):
            for item in shlex.split(value):
                k, _, v = item.partition("=")
                env[k] = v
        return env

    def unknown(self) -> set[str]:
        return {k for k, _ in self.service} - EMULATED - set(NOT_EMULATED)


def systemd_runs() -> bool:
    return Path("/run/systemd/system").is_dir() and shutil.which("systemd-run") is not None


def writable(unit: Unit) -> list[str]:
    """The paths the unit may write: its state and cache directories and ReadWritePaths."""
    out = [f"/var/lib/{d}" for v in unit.all("StateDirectory") for d in v.split()]
    out += [f"/var/cache/{d}" for v in unit.all("CacheDirectory") for d in v.split()]
    out += [p for v in unit.all("ReadWritePaths") for p in v.split()]
    return list(dict.fromkeys(out))


def command(unit: Unit, argv: list[str], env: dict[str, str],
            binds: dict[str, Path]) -> list[str]:
    """``argv`` under the unit's restrictions; ``binds``: host directories that stand for
    the unit's writable paths (each must be in :func:`writable`)."""
    if systemd_runs():
        props = [f"--property={k}={v}" for k, v in unit.service
                 if k not in NOT_EMULATED or k.startswith(("Protect", "Restrict", "System",
                                                          "Memory", "Tasks", "Lock",
                                                          "Remove"))]
        return ["systemd-run", "--wait", "--pipe", "--quiet", "--collect", *props,
                *[f"--setenv={k}={v}" for k, v in env.items()], *argv]
    script = _mounts(unit, binds)
    caps = "-all" if unit.get("CapabilityBoundingSet", "x") == "" else "+all"
    priv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            f"--bounding-set={caps}", "--inh-caps=-all"]
    if unit.get("NoNewPrivileges") == "yes":
        priv.append("--no-new-privs")
    wrapped = list(argv)
    if unit.get("MemoryDenyWriteExecute") == "yes":
        wrapped = [sys.executable, "-c", MDWE, *argv]
    umask = unit.get("UMask", "0022")
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    script.append(f"umask {umask}; exec env -i {exports} "
                  + " ".join(shlex.quote(a) for a in [*priv, *wrapped]))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-ec", "\n".join(script)]


def _mounts(unit: Unit, binds: dict[str, Path]) -> list[str]:
    lines = []
    where = writable(unit)
    for target in binds:
        if target not in where:
            raise ValueError(f"{target} is not writable in {unit.path.name}")
    if unit.get("ProtectSystem") == "strict":       # every mount read-only ...
        lines.append("for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do "
                     "case $m in /proc*|/sys*|/dev*) ;; *) "
                     "mount -n -o remount,bind,ro \"$m\" 2>/dev/null || true;; esac; done")
    parents = dict.fromkeys(str(Path(t).parent) for t in binds)
    for parent in parents:       # ... but the unit's own directories (before /tmp goes)
        lines.append(f"mount -n -t tmpfs -o mode=0755 tmpfs {shlex.quote(parent)}")
    for target, source in binds.items():
        lines.append(f"mkdir -p {shlex.quote(target)}; "
                     f"mount -n --bind {shlex.quote(str(source))} {shlex.quote(target)}; "
                     f"mount -n -o remount,bind,rw {shlex.quote(target)}")
    if unit.get("PrivateTmp") == "yes":
        lines += ["mount -n -t tmpfs -o mode=1777 tmpfs /tmp",
                  "mount -n -t tmpfs -o mode=1777 tmpfs /var/tmp"]
    if unit.get("ProtectHome") == "yes":
        homes = ("/home", "/root", "/run/user")
        # The one concession to a test machine: an interpreter installed in a home
        # directory (pyenv) stays reachable, read-only; production uses /opt and /usr.
        prefix = shlex.quote(os.path.realpath(sys.base_prefix))
        keep = prefix.startswith(tuple(f"{d}/" for d in homes))
        if keep:
            lines.append(f"mkdir -p /dev/shm/.keep && mount -n --bind {prefix} /dev/shm/.keep")
        lines += [f"[ -d {d} ] && mount -n -t tmpfs -o mode=0755 tmpfs {d} || true"
                  for d in homes]
        if keep:
            lines.append(f"mkdir -p {prefix} ; mount -n --move /dev/shm/.keep {prefix}; "
                         f"mount -n -o remount,bind,ro {prefix}")
        lines += [f"[ -d {d} ] && mount -n -o remount,ro {d} || true" for d in homes]
    if unit.get("PrivateDevices") == "yes":
        lines.append("mkdir -p /tmp/.dev && for d in null zero full random urandom tty; do "
                     "touch /tmp/.dev/$d; mount -n --bind /dev/$d /tmp/.dev/$d; done; "
                     "mount -n -t tmpfs -o mode=0755 tmpfs /dev && for d in null zero full "
                     "random urandom tty; do touch /dev/$d; mount -n --bind /tmp/.dev/$d "
                     "/dev/$d; done; mkdir -m 1777 /dev/shm")
    return lines


def chown_nobody(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
