"""Slurm's command-line tools as the Slurm executor uses them: run, time out, parse.

Stable text formats only (``squeue --format`` with a separator no name holds, ``sinfo
--Format``, ``scontrol -o show job``), never one release's JSON, and no ``pyslurm`` (it
is pinned to one Slurm release). Every command runs with ``TZ=UTC`` (Slurm prints times
in the caller's zone, without one), ``[executor.slurm] command_timeout_s`` and no shell.

Errors are translated once, here: a command that is missing, hangs (killed after the
timeout) or cannot reach the controller is :class:`EngineUnavailable` (nothing is known;
no node is thereby down); any other non-zero exit is an :class:`ExecutorError` with
Slurm's own message on one line.
"""

from __future__ import annotations

import calendar
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andreas.config import SlurmSettings
from andreas.executor.base import EngineNodeState
from andreas.executor.errors import EngineUnavailable, ExecutorError

SEP = "\x1f"           # ASCII unit separator: in no node, user or job name
SQUEUE_FIELDS = ("%i", "%T", "%n", "%N", "%V", "%S", "%e", "%u", "%j", "%r")
SINFO_FIELDS = "NodeList:|,StateComplete:|,Gres:|,GresUsed:|,Reason:"
# The controller did not answer: the engine is unavailable, no node is known to be down.
_UNREACHABLE = ("unable to contact slurm controller", "socket timed out",
                "connection refused", "zero bytes were transmitted", "slurmctld not responding",
                "could not establish a configuration source", "communication connection failure",
                "unable to establish", "protocol authentication error", "munge")
PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                            "RESV_DEL_HOLD", "SPECIAL_EXIT", "RESIZING"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING",
                            "STAGE_OUT"})
_GRES_USED = re.compile(r"gpu(?::([^:(,\s]+))?:(\d+)\(IDX:([^)]*)\)")
_GRES = re.compile(r"gpu(?::([^:(,\s]+))?:(\d+)")
_EXIT = re.compile(r"(?:^|\s)ExitCode=(\d+):(\d+)")


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    """One job of ``squeue -t all``. ``node``: the node it runs (ran) on, else the one it
    asked for; ``ran``: it was given a node (a job cancelled while pending was not)."""

    job_id: str
    state: str
    node: str
    ran: bool
    submit_s: float | None
    start_s: float | None
    end_s: float | None
    user: str
    name: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class JobDetail:
    """What ``scontrol -o -d show job`` adds: the exit code (``c:s``), the GPU indexes it
    holds (Slurm's IDX) and its output file."""

    code: int | None
    signal: int
    gpu_idx: tuple[int, ...]
    stdout: str


@dataclass(frozen=True, kw_only=True)
class NodeRow:
    name: str
    state: EngineNodeState
    raw_state: str
    gpu_type: str
    gpus: int
    used_idx: tuple[int, ...]
    reason: str


def slurm_time(text: str) -> float | None:
    """``2026-11-27T16:17:15`` (UTC: the commands run with TZ=UTC) as unix seconds; None
    for N/A, Unknown, None and anything else that is not a time."""
    try:
        return float(calendar.timegm(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def index_list(text: str) -> tuple[int, ...]:
    """Slurm's index list (``0-1,3``; ``N/A``: none) as a tuple of indexes."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if lo.isdigit() and (not dash or hi.isdigit()):
            out.extend(range(int(lo), int(hi if dash else lo) + 1))
    return tuple(out)


def exit_status(code: int | None, signal: int) -> int | None:
    """Slurm's ``ExitCode=c:s`` as a process exit status: a signal s is 128 + s (a SIGTERM
    before the job's handler is installed shows as ``0:15``, i.e. 143)."""
    if signal:
        return 128 + signal
    return code


def node_state(raw: str) -> EngineNodeState:
    """``sinfo`` StateComplete (``idle+drain``, ``down+not_responding``, ...) as an
    :class:`EngineNodeState`. Not responding alone is not down: Slurm still counts on
    the node until it marks it down."""
    parts = [p.strip().lower().rstrip("*~#!%$@^-") for p in raw.split("+") if p.strip()]
    base, flags = (parts[0] if parts else ""), set(parts[1:])
    if base in ("down", "fail", "inval", "future", "unknown", "unk") \
            or (base == "" and not flags):
        return EngineNodeState.DOWN
    if flags & {"powering_up", "power_up"}:
        return EngineNodeState.POWERING_UP
    if flags & {"powering_down", "power_down"}:
        return EngineNodeState.POWERING_DOWN
    if "powered_down" in flags:
        return EngineNodeState.POWERED_DOWN
    if flags & {"drain", "maint", "reboot_requested", "reboot_issued"} \
            or base in ("drained", "draining", "drain", "failing", "maint", "reboot"):
        return EngineNodeState.DRAINING
    return EngineNodeState.UP


def parse_gres(text: str) -> tuple[str, int]:
    """The GPU type and count of a node's ``Gres`` (``gpu:v100:2(S:0)``, ``gpu:2``)."""
    kinds, count = set(), 0
    for m in _GRES.finditer(text):
        kinds.add(m.group(1) or "")
        count += int(m.group(2))
    return (kinds.pop() if len(kinds) == 1 else ",".join(sorted(kinds))), count


def parse_gres_used(text: str) -> tuple[int, ...]:
    """GPU indexes in use from ``GresUsed`` (``gpu:v100:1(IDX:0)``)."""
    return tuple(sorted({i for m in _GRES_USED.finditer(text) for i in index_list(m.group(3))}))


def parse_squeue(text: str) -> list[QueueRow]:
    rows = []
    for line in text.splitlines():
        f = line.split(SEP)
        if len(f) < len(SQUEUE_FIELDS):
            continue
        requested, nodes = f[2].strip(), f[3].strip()
        rows.append(QueueRow(job_id=f[0].strip(), state=f[1].strip().upper(),
                             node=nodes or requested, ran=bool(nodes),
                             submit_s=slurm_time(f[4]), start_s=slurm_time(f[5]),
                             end_s=slurm_time(f[6]), user=f[7].strip(), name=f[8].strip(),
                             reason=SEP.join(f[9:]).strip()))
    return rows


def parse_job_detail(text: str, node: str) -> JobDetail:
    """``scontrol -o -d show job ID``: exit code, the GPUs on ``node`` and StdOut."""
    m = _EXIT.search(text)
    idx: tuple[int, ...] = ()
    for dm in re.finditer(r"(?:^|\s)Nodes=(\S+)\s+CPU_IDs=.*?\sGRES=(\S*)", text):
        if dm.group(1) == node:
            idx = parse_gres_used(dm.group(2))
    out = re.search(r"(?:^|\s)StdOut=(\S*)", text)
    return JobDetail(code=int(m.group(1)) if m else None, signal=int(m.group(2)) if m else 0,
                     gpu_idx=idx, stdout=out.group(1) if out else "")


def parse_sinfo(text: str) -> list[NodeRow]:
    rows = []
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < 5 or not f[0].strip():
            continue
        gpu_type, gpus = parse_gres(f[2])
        rows.append(NodeRow(name=f[0].strip(), state=node_state(f[1]), raw_state=f[1].strip(),
                            gpu_type=gpu_type, gpus=gpus, used_idx=parse_gres_used(f[3]),
                            reason="|".join(f[4:]).strip()))
    return rows


Runner = Callable[..., Any]          # subprocess.run's signature


class SlurmCli:
    """Runs Slurm's commands (``bin_dir`` or the PATH) with a timeout; see the module doc.
    ``environ``: the environment the commands see (SLURM_CONF with it); ``runner``: for
    tests (subprocess.run's signature)."""

    def __init__(self, settings: SlurmSettings, *, environ: Mapping[str, str] | None = None,
                 runner: Runner = subprocess.run) -> None:
        self.settings = settings
        self.environ = dict(os.environ if environ is None else environ)
        self.runner = runner

    def program(self, name: str) -> str:
        return str(Path(self.settings.bin_dir) / name) if self.settings.bin_dir else name

    def base_env(self) -> dict[str, str]:
        """What every command (and, through sbatch, every job) gets from the manager's
        environment: a PATH, the locale, SLURM_CONF; nothing else (no database URL, no
        secret reaches a job)."""
        keep = ("PATH", "LANG", "LC_ALL", "HOME", "USER", "LOGNAME", "SLURM_CONF")
        env = {k: self.environ[k] for k in keep if self.environ.get(k)}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env["TZ"] = "UTC"
        return env

    def run(self, name: str, args: Sequence[str], *, what: str,
            env: Mapping[str, str] | None = None) -> str:
        """stdout of ``name args``; EngineUnavailable or ExecutorError (module doc)."""
        argv = [self.program(name), *args]
        timeout = self.settings.command_timeout_s
        try:
            done = self.runner(argv, env=dict(env) if env is not None else self.base_env(),
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise EngineUnavailable(f"Slurm: {name} did not answer within {timeout:g} s "
                                    f"({what}; [executor.slurm] command_timeout_s)") from None
        except OSError as e:
            raise EngineUnavailable(f"Slurm: cannot run {argv[0]}: {e.strerror or e} ({what}; "
                                    "install slurm-client or set [executor.slurm] bin_dir)"
                                    ) from None
        if done.returncode == 0:
            return str(done.stdout)
        message = one_line(done.stderr or done.stdout or f"exit {done.returncode}")
        if any(m in message.lower() for m in _UNREACHABLE):
            raise EngineUnavailable(f"Slurm: {name} ({what}): {message}")
        raise ExecutorError(f"Slurm: {name} ({what}): {message}")


def one_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    joined = " | ".join(lines)
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."
