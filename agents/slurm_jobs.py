"""The andreas jobs Slurm runs on this node, and their epochs: the agent on a Slurm node.

Where Docker has containers with labels, Slurm has batch jobs named
``andreas-<job>-<attempt>`` (:mod:`andreas.executor.slurm`). :class:`SlurmJobTracker` has
the interface of :class:`agents.tracker.EpochTracker` (``start``, ``stop``, ``followed``,
``on_start`` / ``on_epoch`` / ``on_exit``), so the daemon attributes energy and records
epochs the same way:

- **which jobs, on which GPUs** (polled every ``poll_s``), from Slurm itself, in one of
  two ways: the environment of the job's processes (``/proc/<pid>/environ``:
  ``SLURMD_NODENAME`` is this node, ``SLURM_JOB_NAME`` an andreas name, the GPU indexes
  Slurm gave it in ``SLURM_JOB_GPUS``, else ``CUDA_VISIBLE_DEVICES``; the agent runs as
  root, or as the jobs' user), or, with ``map_dir``, files a Slurm prolog writes (one per
  job, named by the Slurm job id, ``KEY=VALUE`` lines of those variables; the epilog
  removes it: the pattern Slurm's energy exporters use). Slurm's GPU index is the NVML
  index (gres.conf lists ``/dev/nvidia<i>`` in NVML order, as ``AutoDetect=nvml`` does);
  the agent maps it to its GPUs' UUIDs;
- **epochs** from the job's output file (the job contract's progress lines): the file
  the job's standard output goes to (``/proc/<pid>/fd/1``), else
  ``<output_dir>/<name>.out``, read from its start and then as it grows; every (job,
  attempt, epoch) once (:class:`agents.epochs.EpochPairer`);
- **the end**: a job no longer seen for two polls has ended; the rest of its file is read
  and ``on_exit`` reports it (Slurm's exit code is the manager's to read: None here).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.epochs import ContainerExit, ContainerInfo, EpochPairer, LineSplitter
from andreas.job import parse_progress

log = logging.getLogger(__name__)

NAME = re.compile(r"andreas-(?P<job>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})-(?P<attempt>[0-9]{1,9})")
GONE_AFTER = 2                     # polls without the job: it has ended
MAX_ENV_BYTES = 1 << 20
_WANTED = (b"SLURMD_NODENAME=", b"SLURM_JOB_NAME=", b"SLURM_JOB_ID=", b"SLURM_JOB_GPUS=",
           b"CUDA_VISIBLE_DEVICES=")


@dataclass(frozen=True, kw_only=True)
class SlurmJobRun:
    """One andreas job on this node: Slurm job id and name, GPU indexes, output, PIDs."""

    slurm_id: str
    name: str
    gpu_idx: tuple[int, ...]
    output: str | None = None
    pids: tuple[int, ...] = ()


def gpu_indexes(env: dict[str, str]) -> tuple[int, ...]:
    """The job's GPUs: ``SLURM_JOB_GPUS``, else ``CUDA_VISIBLE_DEVICES`` (indexes)."""
    raw = env.get("SLURM_JOB_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or ""
    return tuple(int(x) for x in raw.split(",") if x.strip().isdigit())


def read_environ(pid: int, proc: Path = Path("/proc")) -> dict[str, str] | None:
    """The Slurm variables of a process's initial environment (None: unreadable)."""
    try:
        raw = (proc / str(pid) / "environ").read_bytes()[:MAX_ENV_BYTES]
    except OSError:
        return None
    out = {}
    for item in raw.split(b"\0"):
        if item.startswith(_WANTED):
            key, _, value = item.decode("utf-8", "replace").partition("=")
            out[key] = value
    return out


def scan_processes(node: str, proc: Path = Path("/proc"),
                   skip: set[int] | None = None) -> dict[str, SlurmJobRun]:
    """andreas jobs of ``node`` by Slurm job id, from the processes' environments.
    ``skip``: PIDs known not to be jobs of this node (filled in; their environment never
    changes)."""
    found: dict[str, tuple[str, tuple[int, ...], list[int]]] = {}
    alive = set()
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        pid = int(entry)
        alive.add(pid)
        if skip is not None and pid in skip:
            continue
        env = read_environ(pid, proc)
        if env is None:
            continue
        name = env.get("SLURM_JOB_NAME", "")
        if env.get("SLURMD_NODENAME") != node or not NAME.fullmatch(name) \
                or not env.get("SLURM_JOB_ID"):
            if skip is not None:
                skip.add(pid)
            continue
        entry_ = found.setdefault(env["SLURM_JOB_ID"], (name, gpu_indexes(env), []))
        entry_[2].append(pid)
    if skip is not None:
        skip &= alive
    runs = {}
    for slurm_id, (name, idx, pids) in found.items():
        runs[slurm_id] = SlurmJobRun(slurm_id=slurm_id, name=name, gpu_idx=idx,
                                     output=_stdout_file(sorted(pids), proc),
                                     pids=tuple(sorted(pids)))
    return runs


def _stdout_file(pids: list[int], proc: Path) -> str | None:
    for pid in pids:
        try:
            target = os.readlink(proc / str(pid) / "fd" / "1")
        except OSError:
            continue
        if target.startswith("/") and Path(target).is_file():
            return target
    return None


def scan_map_dir(directory: Path, node: str) -> dict[str, SlurmJobRun]:
    """andreas jobs from the files a prolog writes (``<dir>/<slurm job id>``, KEY=VALUE
    lines); a file naming another node is skipped."""
    runs = {}
    try:
        files = list(directory.iterdir())
    except OSError:
        return {}
    for f in files:
        if not f.name.isdigit() or not f.is_file():
            continue
        try:
            text = f.read_text(errors="replace")[:65536]
        except OSError:
            continue
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        if env.get("SLURMD_NODENAME", node) != node or not NAME.fullmatch(
                env.get("SLURM_JOB_NAME", "")):
            continue
        runs[f.name] = SlurmJobRun(slurm_id=f.name, name=env["SLURM_JOB_NAME"],
                                   gpu_idx=gpu_indexes(env))
    return runs


@dataclass
class _Followed:
    info: ContainerInfo
    pairer: EpochPairer
    path: str | None
    pids: tuple[int, ...] = ()
    offset: int = 0
    splitter: LineSplitter = field(default_factory=LineSplitter)
    missing: int = 0


class SlurmJobTracker:
    """See the module docstring. ``uuid_of(index)``: the agent's GPU UUID at an NVML
    index (None: unknown); ``scan``: for tests (node -> runs by Slurm job id)."""

    def __init__(self, *, node: str, on_epoch: Any, on_start: Any = None, on_exit: Any = None,
                 uuid_of: Callable[[int], str | None], output_dir: str = "",
                 map_dir: str = "", poll_s: float = 1.0,
                 scan: Callable[[], dict[str, SlurmJobRun]] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.node = node
        self._on_epoch, self._on_start, self._on_exit = on_epoch, on_start, on_exit
        self.uuid_of = uuid_of
        self.output_dir = output_dir
        self.poll_s = poll_s
        self.clock = clock
        self._skip: set[int] = set()
        if scan is not None:
            self._scan = scan
        elif map_dir:
            self._scan = lambda: scan_map_dir(Path(map_dir), node)
        else:
            self._scan = lambda: scan_processes(node, skip=self._skip)
        self._runs: dict[str, _Followed] = {}
        self._emitted: dict[tuple[str, int], set[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.client = None                    # no Docker client (the daemon asks)
        self.errors = 0

    def start(self) -> SlurmJobTracker:
        self._thread = threading.Thread(target=self._loop, name="slurm-jobs", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def followed(self) -> list[ContainerInfo]:
        with self._lock:
            return [r.info for r in self._runs.values()]

    def container_of_pid(self, pid: int) -> str | None:
        """The Slurm job id a process belongs to (the NVML process check), None: none."""
        with self._lock:
            return next((sid for sid, r in self._runs.items() if pid in r.pids), None)

    def pids_of(self, container_id: str) -> tuple[int, ...]:
        with self._lock:
            run = self._runs.get(container_id)
            return run.pids if run is not None else ()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as e:  # noqa: BLE001 - keep following whatever happens
                self.errors += 1
                log.warning("Slurm jobs of node %s: %s", self.node, e)
            self._stop.wait(self.poll_s)

    def poll(self) -> None:
        """One look: new jobs followed, every followed file read, ended jobs reported."""
        seen = self._scan()
        for slurm_id, run in seen.items():
            if slurm_id not in self._runs:
                self._follow(run)
            else:
                followed = self._runs[slurm_id]
                followed.missing = 0
                followed.pids = run.pids
                if followed.path is None and run.output:
                    followed.path = run.output
        for slurm_id, followed in list(self._runs.items()):
            self._read(followed)
            if slurm_id not in seen:
                followed.missing += 1
                if followed.missing >= GONE_AFTER:
                    self._end(slurm_id, followed)

    def _follow(self, run: SlurmJobRun) -> None:
        m = NAME.fullmatch(run.name)
        assert m is not None
        job, attempt = m["job"], int(m["attempt"])
        uuids = tuple(u for u in (self.uuid_of(i) for i in run.gpu_idx) if u)
        info = ContainerInfo(container_id=run.slurm_id, name=run.name, job_id=job,
                             attempt=attempt, gpu_uuids=uuids, started_s=self.clock())
        path = run.output or (str(Path(self.output_dir) / f"{run.name}.out")
                              if self.output_dir else None)
        emitted = self._emitted.setdefault((job, attempt), set())
        pairer = EpochPairer(job_id=job, attempt=attempt, container_id=run.slurm_id,
                             gpu_uuids=uuids, emitted=emitted)
        with self._lock:
            self._runs[run.slurm_id] = _Followed(info=info, pairer=pairer, path=path,
                                                 pids=run.pids)
        log.info("following Slurm job %s (%s) on GPU(s) %s", run.slurm_id, run.name,
                 ",".join(map(str, run.gpu_idx)) or "-")
        _call(self._on_start, info)

    def _read(self, followed: _Followed) -> None:
        if followed.path is None:
            return
        try:
            with open(followed.path, "rb") as f:
                f.seek(followed.offset)
                chunk = f.read()
        except OSError:
            return
        followed.offset += len(chunk)
        for line in followed.splitter.feed(chunk):
            self._line(followed, line)

    def _line(self, followed: _Followed, line: str) -> None:
        event = parse_progress(line)
        if event is None:
            return
        record = followed.pairer.feed(event)
        if record is not None:
            _call(self._on_epoch, record)

    def _end(self, slurm_id: str, followed: _Followed) -> None:
        self._read(followed)
        for line in followed.splitter.flush():
            self._line(followed, line)
        with self._lock:
            self._runs.pop(slurm_id, None)
        info = followed.info
        _call(self._on_exit, ContainerExit(container_id=slurm_id, job_id=info.job_id,
                                           attempt=info.attempt, gpu_uuids=info.gpu_uuids,
                                           exit_code=None, t=self.clock(),
                                           epochs=followed.pairer.records,
                                           open_epoch=followed.pairer.open_epoch))
        log.info("Slurm job %s (%s) ended; %d epoch(s) read", slurm_id, info.name,
                 followed.pairer.records)


def _call(sink: Any, item: Any) -> None:
    if sink is None:
        return
    fn = sink if callable(sink) else sink.put
    try:
        fn(item)
    except Exception as e:  # noqa: BLE001 - a failing consumer must not stop following
        log.warning("Slurm jobs: consumer of %s failed: %s", type(item).__name__, e)
