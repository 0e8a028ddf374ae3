"""Processes of this machine through ``/proc``: naming one so it cannot be mistaken for a
later process with the same PID, telling whether it still runs, signalling it.

Two users: the manager's lease (``andreas/manager/lock.py``) names its holder by host,
boot, PID namespace, PID and start time, so a manager restarted on the same machine sees
that the previous holder is dead and need not wait for its lease to expire; and the
agent's fence (``agents/fence.py``) stops a container's processes when the container
engine that started them is gone (they keep running under their shim). A PID alone is
not a name: after the process ends the kernel may give it to another, so every check
compares the start time (clock ticks after boot, field 22 of ``/proc/PID/stat``) too.

Stdlib only (the agent imports it).
"""

from __future__ import annotations

import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True, kw_only=True)
class ProcessRef:
    """One process for its whole life: its PID and when it started (clock ticks)."""

    pid: int
    start_ticks: int


def start_ticks(pid: int, proc: Path = PROC) -> int | None:
    """When process ``pid`` started (clock ticks after boot); None when there is none, or
    when it has exited and only waits to be reaped (a zombie runs nothing)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text.rsplit(")", 1)[-1].split()     # the name may hold spaces and ')'
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])                   # field 22 of the whole line
    except ValueError:
        return None


def ref(pid: int, proc: Path = PROC) -> ProcessRef | None:
    """The process with this PID now; None when none runs."""
    ticks = start_ticks(pid, proc)
    return None if ticks is None else ProcessRef(pid=pid, start_ticks=ticks)


def alive(process: ProcessRef, proc: Path = PROC) -> bool:
    """Whether that very process still runs (not merely one with its PID)."""
    return start_ticks(process.pid, proc) == process.start_ticks


def send(process: ProcessRef, sig: signal.Signals, proc: Path = PROC) -> bool:
    """Send ``sig`` to that process if it still runs; False when it has gone. (A check and
    a kill are two steps: a PID freed and reused within them is the one race left, as
    with any PID; the window is a few microseconds.)"""
    if not alive(process, proc):
        return False
    try:
        os.kill(process.pid, sig)
    except ProcessLookupError:
        return False
    return True


def boot_id() -> str:
    """This boot of the machine (PIDs and start times mean something only within one)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def pid_namespace() -> str:
    """This process's PID namespace (``pid:[4026531836]``): a PID names a process only
    within its namespace, so two containers with one host name do not judge each other."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"


@dataclass(frozen=True, kw_only=True)
class Identity:
    """Where a process runs and which one it is: enough for another process on the same
    machine to tell whether it still runs (:meth:`dead_here`)."""

    host: str
    boot: str
    pid_ns: str
    process: ProcessRef

    @classmethod
    def mine(cls) -> Identity:
        pid = os.getpid()
        return cls(host=socket.gethostname(), boot=boot_id(), pid_ns=pid_namespace(),
                   process=ref(pid) or ProcessRef(pid=pid, start_ticks=0))

    def dead_here(self, proc: Path = PROC) -> bool:
        """True only when this process can tell that one has ended: same host, same PID
        namespace, and either another boot or no process with that PID and start time.
        False whenever it cannot tell (another host, another namespace)."""
        here = Identity.mine()
        if self.host != here.host or self.pid_ns != here.pid_ns:
            return False
        return self.boot != here.boot or not alive(self.process, proc)
