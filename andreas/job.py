"""The job contract: what a training image must do to run under andreas.

This module is the single definition of the contract (ARCHITECTURE.md, "The job
contract") for both sides: the training code inside a container (progress lines,
checkpoints, SIGTERM) and andreas itself (the executor sets the environment and the
container labels; the node agent parses the progress lines). It uses the standard
library only and imports nothing else from andreas, so a training image may install
andreas or simply copy this one file.

Environment (set by the executor for every container)
    ``ANDREAS_JOB_ID``          the job's id
    ``ANDREAS_CHECKPOINT_DIR``  a mounted directory that follows the job across nodes
    ``ANDREAS_EPOCHS``          the target number of epochs
    ``ANDREAS_RESTART_COUNT``   0 on the first attempt, then 1, 2, ...

Container labels (set by the executor, read by the agent)
    ``andreas.job=<job id>``, ``andreas.attempt=<n>``,
    ``andreas.gpus=<comma-separated GPU UUIDs>`` (may be empty)

Progress line, format v1 (one per epoch start and one per epoch end, on stdout or stderr)::

    ANDREAS-PROGRESS v1 job=<id> epoch=<n> of=<N> event=<start|end> t=<unix seconds> [<metric>=<number> ...]

    ANDREAS-PROGRESS v1 job=j00042 epoch=3 of=10 event=end t=1716212345.123456 loss=0.4121

- Epochs are numbered from 1 to N (``epoch=1 of=10`` is the first of ten).
- ``t`` is UTC seconds since the epoch with a fractional part (``time.time()``),
  digits and at most one dot, nothing else.
- The fields are space-separated ``key=value`` tokens, the five required ones exactly
  once each; :func:`format_progress` writes them in the order above. Further tokens are
  metrics: a name (a letter or ``_`` first, then letters, digits, ``_`` or ``.``) and a
  number (``0.25``, ``1e-05``, ``nan``, ``inf``). Nothing else may follow the marker.
- ``job`` is 1 to 64 characters of ``A-Z a-z 0-9 . _ - : @ +``.
- Anything may *precede* the marker (Docker's timestamp, a logger prefix, the rest of a
  progress bar ended by a carriage return); a line that holds the marker several times
  is read from the last one.
- A reader accepts only version 1 lines; a later format gets a new version token.
  :func:`parse_progress` returns ``None`` for anything that is not a valid v1 line and
  never raises.

Checkpoints: after every epoch write the checkpoint atomically (a temporary name in the
same directory, fsync, rename) and then the manifest ``latest.json``::

    {"format": "andreas-checkpoint/1", "epoch": 5, "time": 1716212345.1,
     "path": "epoch-000005.ckpt"}

``path`` is relative to the checkpoint directory (it is mounted at different places on
different nodes); ``epoch`` is the last *completed* epoch. :func:`save_checkpoint` does
both; :func:`resume_epoch` tells a starting job which epoch to run next.

Exit codes: 0 all epochs done; 143 stopped on request (SIGTERM), resumable; 137 killed,
resume from the manifest; anything else a failure. :class:`GracefulStop` turns SIGTERM
into a flag the training loop checks after each epoch (or batch), so it can checkpoint
and exit 143 within the grace period.

Training-loop helpers: :class:`EpochReporter` (prints and flushes the start/end lines),
:class:`KerasProgressCallback` / :func:`keras_callback` and
:class:`LightningProgressCallback` / :func:`lightning_callback` (framework callbacks that
import no framework at module import).

A plain loop::

    from andreas import job

    env = job.JobEnv.from_environ()
    reporter = job.EpochReporter()
    stop = job.GracefulStop().install()
    state = load(job.latest_checkpoint(env.checkpoint_dir))       # None: start fresh
    for epoch in range(job.resume_epoch(env.checkpoint_dir), env.epochs + 1):
        with reporter.epoch(epoch) as ep:
            ep.metrics["loss"] = train_one_epoch(state)
            job.save_checkpoint(env.checkpoint_dir, epoch, lambda p: save(state, p))
        stop.exit_if_requested()                                     # SystemExit(143)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

# --- names ---------------------------------------------------------------------------

ENV_JOB_ID = "ANDREAS_JOB_ID"
ENV_CHECKPOINT_DIR = "ANDREAS_CHECKPOINT_DIR"
ENV_EPOCHS = "ANDREAS_EPOCHS"
ENV_RESTART_COUNT = "ANDREAS_RESTART_COUNT"

LABEL_JOB = "andreas.job"
LABEL_ATTEMPT = "andreas.attempt"
LABEL_GPUS = "andreas.gpus"

EXIT_DONE = 0
EXIT_PREEMPTED = 143      # 128 + SIGTERM: stopped on request, resumable
EXIT_KILLED = 137         # 128 + SIGKILL: resume from the manifest if there is one

PROGRESS_MARKER = "ANDREAS-PROGRESS"
PROGRESS_VERSION = 1
EVENTS = ("start", "end")

MANIFEST_NAME = "latest.json"
MANIFEST_FORMAT = "andreas-checkpoint/1"
DEFAULT_LOCAL_JOB_ID = "local"

_JOB_ID = re.compile(r"[A-Za-z0-9._\-:@+]{1,64}")
_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,63}")
_UINT = re.compile(r"[0-9]{1,12}")
_TIME = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")
_NUMBER = re.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?"
                     r"|nan|inf|infinity)", re.IGNORECASE)
_MARKER = re.compile(r"(?<![A-Za-z0-9_\-])" + re.escape(PROGRESS_MARKER)
                     + r"[ \t]+v([0-9]{1,4})(?=[ \t]|$)")
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_.]{0,63})=(\S+)")
_REQUIRED = ("job", "epoch", "of", "event", "t")


def valid_job_id(job_id: object) -> bool:
    return isinstance(job_id, str) and _JOB_ID.fullmatch(job_id) is not None


# --- progress lines ------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ProgressEvent:
    """One parsed progress line."""

    job_id: str
    epoch: int
    of: int
    event: str                  # "start" | "end"
    t: float
    metrics: Mapping[str, float] = field(default_factory=dict, hash=False)
    version: int = PROGRESS_VERSION

    @property
    def is_start(self) -> bool:
        return self.event == "start"

    @property
    def is_end(self) -> bool:
        return self.event == "end"

    def line(self) -> str:
        return format_progress(self.job_id, self.epoch, self.of, self.event, t=self.t,
                               metrics=self.metrics)


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"progress line: {what} must be a whole number >= 1, got {value!r}")
    return value


def format_progress(job_id: str, epoch: int, of: int, event: str, *, t: float | None = None,
                    metrics: Mapping[str, float] | None = None) -> str:
    """The v1 progress line (no newline). ``t`` defaults to ``time.time()``.

    Raises ValueError naming the field for a value the format cannot carry (the reader
    would drop the line, and the epoch with it).
    """
    if not valid_job_id(job_id):
        raise ValueError(f"progress line: job must be 1-64 characters of A-Z a-z 0-9 . _ - "
                         f": @ +, got {job_id!r}")
    _positive_int(epoch, "epoch")
    _positive_int(of, "of")
    if event not in EVENTS:
        raise ValueError(f"progress line: event must be 'start' or 'end', got {event!r}")
    if t is None:
        t = time.time()
    if (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)
            or t < 0):
        raise ValueError(f"progress line: t must be finite UTC seconds >= 0, got {t!r}")
    parts = [PROGRESS_MARKER, f"v{PROGRESS_VERSION}", f"job={job_id}", f"epoch={epoch}",
             f"of={of}", f"event={event}", f"t={float(t):.6f}"]
    for name, value in (metrics or {}).items():
        if not isinstance(name, str) or _METRIC_NAME.fullmatch(name) is None \
                or name in _REQUIRED:
            raise ValueError(f"progress line: metric name must be a letter or _ then letters, "
                             f"digits, _ or . (and not one of {', '.join(_REQUIRED)}), "
                             f"got {name!r}")
        if isinstance(value, bool):
            raise ValueError(f"progress line: metric {name} must be a number, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"progress line: metric {name} must be a number, "
                             f"got {value!r}") from None
        parts.append(f"{name}={number!r}")
    return " ".join(parts)


def parse_progress(line: object) -> ProgressEvent | None:
    """The progress event in ``line`` (str or bytes), or None. Never raises.

    Text before the marker is ignored (timestamps, logger prefixes); the fields after it
    must be exactly the v1 format.
    """
    try:
        return _parse_progress(line)
    except Exception:            # noqa: BLE001 — the contract: garbage in, None out
        return None


def _parse_progress(line: object) -> ProgressEvent | None:
    if isinstance(line, (bytes, bytearray)):
        line = bytes(line).decode("utf-8", errors="replace")
    if not isinstance(line, str) or PROGRESS_MARKER not in line:
        return None
    markers = list(_MARKER.finditer(line))
    if not markers or int(markers[-1].group(1)) != PROGRESS_VERSION:
        return None
    last = markers[-1]
    tokens = line[last.end():].split()
    fields: dict[str, str] = {}
    metrics: dict[str, float] = {}
    for token in tokens:
        m = _TOKEN.fullmatch(token)
        if m is None:
            return None
        key, value = m.groups()
        if key in fields or key in metrics:
            return None
        if key in _REQUIRED:
            fields[key] = value
        else:
            if _NUMBER.fullmatch(value) is None:
                return None
            metrics[key] = float(value)
    if len(fields) != len(_REQUIRED):
        return None
    if (not valid_job_id(fields["job"]) or _UINT.fullmatch(fields["epoch"]) is None
            or _UINT.fullmatch(fields["of"]) is None or fields["event"] not in EVENTS
            or _TIME.fullmatch(fields["t"]) is None):
        return None
    epoch, of = int(fields["epoch"]), int(fields["of"])
    if epoch < 1 or of < 1:
        return None
    return ProgressEvent(job_id=fields["job"], epoch=epoch, of=of, event=fields["event"],
                         t=float(fields["t"]), metrics=metrics)


# --- environment and labels ----------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class JobEnv:
    """The contract's environment as a training process sees it (None where unset)."""

    job_id: str | None
    checkpoint_dir: Path | None
    epochs: int | None
    restart_count: int = 0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JobEnv:
        """Read the variables; a malformed one raises ValueError naming it and its value."""
        env = os.environ if environ is None else environ
        job_id = env.get(ENV_JOB_ID) or None
        if job_id is not None and not valid_job_id(job_id):
            raise ValueError(f"{ENV_JOB_ID}: must be 1-64 characters of A-Z a-z 0-9 . _ - : "
                             f"@ +, got {job_id!r}")
        directory = env.get(ENV_CHECKPOINT_DIR) or None
        return cls(job_id=job_id, checkpoint_dir=Path(directory) if directory else None,
                   epochs=_env_int(env, ENV_EPOCHS, 1),
                   restart_count=_env_int(env, ENV_RESTART_COUNT, 0) or 0)


def _env_int(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"{name}: must be a whole number >= {minimum}, got {raw!r}")
    return value


def job_environment(job_id: str, checkpoint_dir: str | Path, epochs: int,
                    restart_count: int = 0) -> dict[str, str]:
    """The variables the executor passes to a job's container."""
    if not valid_job_id(job_id):
        raise ValueError(f"job id must be 1-64 characters of A-Z a-z 0-9 . _ - : @ +, "
                         f"got {job_id!r}")
    _positive_int(epochs, "epochs")
    if isinstance(restart_count, bool) or not isinstance(restart_count, int) \
            or restart_count < 0:
        raise ValueError(f"restart_count must be a whole number >= 0, got {restart_count!r}")
    return {ENV_JOB_ID: job_id, ENV_CHECKPOINT_DIR: str(checkpoint_dir),
            ENV_EPOCHS: str(epochs), ENV_RESTART_COUNT: str(restart_count)}


@dataclass(frozen=True, kw_only=True)
class JobLabels:
    """What the container labels say about a managed container."""

    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...] = ()


def container_labels(job_id: str, attempt: int, gpu_uuids: tuple[str, ...] | list[str] = (),
                     ) -> dict[str, str]:
    """The labels the executor puts on a job's container."""
    if not valid_job_id(job_id):
        raise ValueError(f"job id must be 1-64 characters of A-Z a-z 0-9 . _ - : @ +, "
                         f"got {job_id!r}")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise ValueError(f"attempt must be a whole number >= 0, got {attempt!r}")
    for uuid in gpu_uuids:
        if not isinstance(uuid, str) or not uuid or "," in uuid or uuid != uuid.strip():
            raise ValueError(f"GPU UUID must be a non-empty string without commas or "
                             f"surrounding spaces, got {uuid!r}")
    return {LABEL_JOB: job_id, LABEL_ATTEMPT: str(attempt), LABEL_GPUS: ",".join(gpu_uuids)}


def job_labels(labels: Mapping[str, str] | None) -> JobLabels | None:
    """Read a container's labels: None for a container andreas does not manage (no
    ``andreas.job``); ValueError naming the label for a managed one with a bad value."""
    if not labels or LABEL_JOB not in labels:
        return None
    job_id = labels[LABEL_JOB]
    if not valid_job_id(job_id):
        raise ValueError(f"label {LABEL_JOB}: not a valid job id: {job_id!r}")
    raw = labels.get(LABEL_ATTEMPT)
    if raw is None or _UINT.fullmatch(raw.strip()) is None:
        raise ValueError(f"label {LABEL_ATTEMPT}: must be a whole number >= 0, got {raw!r}")
    gpus = tuple(u.strip() for u in (labels.get(LABEL_GPUS) or "").split(",") if u.strip())
    return JobLabels(job_id=job_id, attempt=int(raw.strip()), gpu_uuids=gpus)


# --- checkpoints ---------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """A complete checkpoint: the last completed epoch, when it was written, where it is."""

    epoch: int
    time: float
    path: Path


_CHECKPOINT_NAME = re.compile(r"epoch-([0-9]{6,})(\.[^/]*)?")


def checkpoint_name(epoch: int, suffix: str = ".ckpt") -> str:
    """``epoch-000005.ckpt``: the name :func:`save_checkpoint` gives epoch 5's checkpoint."""
    return f"epoch-{_positive_int(epoch, 'epoch'):06d}{suffix}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_path(path: Path) -> None:
    if path.is_dir():
        for child in sorted(path.rglob("*")):
            if child.is_file() and not child.is_symlink():
                _fsync_file(child)
        _fsync_dir(path)
    elif path.exists():
        _fsync_file(path)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass          # some file systems refuse fsync on directories
    finally:
        os.close(fd)


def _temporary(target: Path) -> Path:
    # Same directory (rename stays atomic), hidden, and the target's suffix kept last
    # (Keras insists on ".keras").
    return target.with_name(f".{target.stem}.tmp-{secrets.token_hex(4)}{target.suffix}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def atomic_write(path: str | Path, data: bytes | str | Callable[[Path], object]) -> Path:
    """Write ``path`` atomically: bytes, text (UTF-8), or a writer called with a
    temporary path in the same directory (it may create a file or a directory there,
    e.g. ``torch.save(state, p)``); then fsync and rename over ``path``. A reader sees
    the old content or the new, never a part. Returns ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(target)
    try:
        if callable(data):
            data(tmp)
            if not tmp.exists():
                raise ValueError(f"{target}: the writer created nothing at {tmp}")
        else:
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
        _fsync_path(tmp)
        if tmp.is_dir() and target.exists():
            # A directory cannot be renamed over a non-empty one: move the old aside first.
            old = _temporary(target)
            os.replace(target, old)
            os.replace(tmp, target)
            _remove(old)
        else:
            os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        _remove(tmp)
        raise
    return target


def write_manifest(checkpoint_dir: str | Path, epoch: int, path: str | Path,
                   t: float | None = None) -> Checkpoint:
    """Atomically point ``latest.json`` at a complete checkpoint of ``epoch``."""
    directory = Path(checkpoint_dir)
    _positive_int(epoch, "epoch")
    target = Path(path)
    if not target.is_absolute():
        target = directory / target
    try:
        stored = str(target.relative_to(directory))
    except ValueError:
        stored = str(target)
    t = time.time() if t is None else float(t)
    doc = {"format": MANIFEST_FORMAT, "epoch": epoch, "time": t, "path": stored}
    atomic_write(directory / MANIFEST_NAME, json.dumps(doc, indent=1) + "\n")
    return Checkpoint(epoch=epoch, time=t, path=target)


def save_checkpoint(checkpoint_dir: str | Path, epoch: int,
                    data: bytes | str | Callable[[Path], object], *, suffix: str = ".ckpt",
                    t: float | None = None, keep: int | None = 2) -> Checkpoint:
    """Write epoch ``epoch``'s checkpoint as ``epoch-NNNNNN<suffix>`` atomically (see
    :func:`atomic_write`), then the manifest, then delete all but the ``keep`` newest
    checkpoints of this naming (None keeps all) and temporary files left by a crash."""
    directory = Path(checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = atomic_write(directory / checkpoint_name(epoch, suffix), data)
    written = write_manifest(directory, epoch, target, t)
    if keep is not None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 or None, got {keep!r}")
        found = sorted(_scan(directory), key=lambda c: c[0], reverse=True)
        epochs_kept = sorted({e for e, _ in found}, reverse=True)[:keep]
        for e, p in found:
            if e not in epochs_kept and e != epoch:
                _remove(p)
    for pattern in (".epoch-*.tmp-*", f".{Path(MANIFEST_NAME).stem}.tmp-*"):
        for stale in directory.glob(pattern):
            _remove(stale)
    return written


def _scan(directory: Path) -> list[tuple[int, Path]]:
    found = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    for p in entries:
        m = _CHECKPOINT_NAME.fullmatch(p.name)
        if m is not None and ".tmp-" not in p.name:
            found.append((int(m.group(1)), p))
    return found


def read_manifest(checkpoint_dir: str | Path) -> Checkpoint | None:
    """``latest.json`` as a Checkpoint; None when it is missing, unreadable, not the
    andreas format, or points at nothing."""
    directory = Path(checkpoint_dir)
    try:
        doc = json.loads((directory / MANIFEST_NAME).read_text(encoding="utf-8"))
        epoch, t, stored = doc["epoch"], doc["time"], doc["path"]
        if doc.get("format", MANIFEST_FORMAT) != MANIFEST_FORMAT:
            return None
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            return None
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not isinstance(stored, str):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    path = Path(stored)
    if not path.is_absolute():
        path = directory / path
    if not path.exists():
        return None
    return Checkpoint(epoch=epoch, time=float(t), path=path)


def latest_checkpoint(checkpoint_dir: str | Path | None) -> Checkpoint | None:
    """The newest complete checkpoint: the manifest's, or a newer ``epoch-NNNNNN*`` file
    (a crash between the rename and the manifest update), or None."""
    if checkpoint_dir is None:
        return None
    directory = Path(checkpoint_dir)
    best = read_manifest(directory)
    for epoch, path in _scan(directory):
        if best is None or epoch > best.epoch:
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            best = Checkpoint(epoch=epoch, time=mtime, path=path)
    return best


def completed_epochs(checkpoint_dir: str | Path | None) -> int:
    """Epochs already done according to the checkpoints (0 with none). Keras:
    ``model.fit(..., initial_epoch=completed_epochs(dir))``."""
    latest = latest_checkpoint(checkpoint_dir)
    return 0 if latest is None else latest.epoch


def resume_epoch(checkpoint_dir: str | Path | None) -> int:
    """The 1-based epoch to run next: 1 without a checkpoint, k + 1 after epoch k."""
    return completed_epochs(checkpoint_dir) + 1


# --- progress reporting --------------------------------------------------------------

class EpochReporter:
    """Prints the progress lines of one training process and flushes each at once.

    ``job_id`` defaults to ``$ANDREAS_JOB_ID`` (``local`` outside andreas), ``epochs``
    to ``$ANDREAS_EPOCHS`` (a framework callback may fill it in later). Lines go to
    ``stream`` (default: ``sys.stdout`` at the time of writing).
    """

    def __init__(self, job_id: str | None = None, epochs: int | None = None, *,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.time,
                 environ: Mapping[str, str] | None = None) -> None:
        env = JobEnv.from_environ(environ)
        self.job_id = job_id or env.job_id or DEFAULT_LOCAL_JOB_ID
        if not valid_job_id(self.job_id):
            raise ValueError(f"job id must be 1-64 characters of A-Z a-z 0-9 . _ - : @ +, "
                             f"got {self.job_id!r}")
        self.epochs = epochs if epochs is not None else env.epochs
        if self.epochs is not None:
            _positive_int(self.epochs, "epochs")
        self.stream = stream
        self.clock = clock
        self._lock = threading.Lock()

    def _emit(self, epoch: int, event: str, metrics: Mapping[str, float] | None) -> float:
        if self.epochs is None:
            raise ValueError(f"EpochReporter: the number of epochs is unknown; pass "
                             f"epochs= or set {ENV_EPOCHS}")
        t = self.clock()
        line = format_progress(self.job_id, epoch, self.epochs, event, t=t, metrics=metrics)
        with self._lock:
            stream = self.stream if self.stream is not None else sys.stdout
            stream.write(line + "\n")
            stream.flush()
        return t

    def start(self, epoch: int) -> float:
        """Print epoch ``epoch``'s start line; returns its time."""
        return self._emit(epoch, "start", None)

    def end(self, epoch: int, metrics: Mapping[str, float] | None = None) -> float:
        """Print epoch ``epoch``'s end line (with metrics); returns its time."""
        return self._emit(epoch, "end", metrics)

    @contextlib.contextmanager
    def epoch(self, epoch: int) -> Iterator[EpochProgress]:
        """Start line on entry, end line (with ``.metrics``) on a normal exit; an epoch
        left by an exception did not finish and gets no end line."""
        progress = EpochProgress(epoch=epoch, start_s=self.start(epoch))
        yield progress
        progress.end_s = self.end(epoch, progress.metrics)


@dataclass
class EpochProgress:
    """The epoch inside ``with reporter.epoch(n) as ep``: put metrics in ``ep.metrics``."""

    epoch: int
    start_s: float
    end_s: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


# --- SIGTERM -------------------------------------------------------------------------

class GracefulStop:
    """Turns SIGTERM (the manager's preemption) into a flag.

    ``install()`` (main thread only) replaces the handlers of ``signals``; the training
    loop checks ``requested`` after each epoch (or batch), saves a checkpoint and calls
    ``exit_if_requested()``, which raises ``SystemExit(143)``. ``uninstall()`` (or
    leaving the ``with`` block) restores the previous handlers.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,), *,
                 announce: bool = True) -> None:
        self.signals = tuple(signals)
        self.announce = announce
        self.signum: int | None = None
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def install(self) -> GracefulStop:
        for s in self.signals:
            if s not in self._previous:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def uninstall(self) -> None:
        while self._previous:
            s, handler = self._previous.popitem()
            signal.signal(s, handler)

    def __enter__(self) -> GracefulStop:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def _handle(self, signum: int, frame: object) -> None:
        self.request(signum)

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Set the flag as the signal would (also for tests and programmatic stops)."""
        first = not self._event.is_set()
        self.signum = signum
        self._event.set()
        if first and self.announce:
            with contextlib.suppress(OSError):
                os.write(2, f"andreas: signal {signum} received: finishing this epoch, "
                            f"checkpointing, exiting with {EXIT_PREEMPTED}\n".encode())

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def exit_if_requested(self, code: int = EXIT_PREEMPTED) -> None:
        if self.requested:
            raise SystemExit(code)


# --- framework callbacks (no framework imported here) ---------------------------------

def _float_metrics(values: Mapping[str, Any] | None) -> dict[str, float]:
    """The numeric entries of a framework's logs, as floats, with names the line allows."""
    out: dict[str, float] = {}
    for name, value in (values or {}).items():
        if not isinstance(name, str) or _METRIC_NAME.fullmatch(name) is None \
                or name in _REQUIRED or isinstance(value, bool):
            continue
        try:
            out[name] = float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError, RuntimeError):
            continue
    return out


class _CallbackConfig:
    def _configure(self, reporter: EpochReporter | None, epochs: int | None,
                   checkpoint_dir: str | Path | None, save: bool,
                   stop: GracefulStop | None) -> None:
        self.reporter = reporter if reporter is not None else EpochReporter(epochs=epochs)
        if epochs is not None:
            self.reporter.epochs = epochs
        env_dir = JobEnv.from_environ().checkpoint_dir if checkpoint_dir is None else None
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else env_dir
        self.save = save
        self.stop = stop
        self._warned = False

    def _can_report(self) -> bool:
        """False (with one warning on stderr) while the number of epochs is unknown: a
        callback must not break a training run, inside andreas or out of it."""
        if self.reporter.epochs is not None:
            return True
        if not self._warned:
            self._warned = True
            with contextlib.suppress(OSError):
                os.write(2, f"andreas: {ENV_EPOCHS} is not set and the framework gives no "
                            f"finite number of epochs: no progress lines\n".encode())
        return False


class _KerasHooks(_CallbackConfig):
    """The progress logic of the Keras callback; ``model`` and ``params`` come from the
    callback base (Keras' own, or :class:`_KerasPlumbing`)."""

    def __init__(self, reporter: EpochReporter | None = None, *, epochs: int | None = None,
                 checkpoint_dir: str | Path | None = None, save: bool = False,
                 stop: GracefulStop | None = None) -> None:
        super().__init__()
        self._configure(reporter, epochs, checkpoint_dir, save, stop)

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self.reporter.epochs is None:
            epochs = (getattr(self, "params", None) or {}).get("epochs")
            if isinstance(epochs, int) and not isinstance(epochs, bool) and epochs > 0:
                self.reporter.epochs = epochs
        if self._can_report():
            self.reporter.start(epoch + 1)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        model = getattr(self, "model", None)
        if self.save and self.checkpoint_dir is not None and model is not None:
            save_checkpoint(self.checkpoint_dir, epoch + 1, lambda p: model.save(str(p)),
                            suffix=".keras")
        if self._can_report():
            self.reporter.end(epoch + 1, _float_metrics(logs))
        if self.stop is not None and self.stop.requested and model is not None:
            model.stop_training = True


class _KerasPlumbing:
    """What Keras calls on every callback, as no-ops (the duck-typed base)."""

    _supports_tf_logs = False

    def __init__(self) -> None:
        self.model: Any = None
        self.params: dict[str, Any] = {}
        self.validation_data = None

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def set_model(self, model: Any) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        # on_train_begin, on_test_batch_end, ...: every other hook does nothing.
        if name.startswith("on_"):
            return _no_op
        raise AttributeError(name)


class KerasProgressCallback(_KerasHooks, _KerasPlumbing):
    """Keras callback: prints the start/end line of every epoch (Keras counts from 0, the
    line from 1), optionally saves ``model.save()`` as the epoch's checkpoint
    (``save=True``, into ``checkpoint_dir`` or ``$ANDREAS_CHECKPOINT_DIR``), and stops
    training after the epoch once ``stop.requested``. Resume with
    ``initial_epoch=completed_epochs(dir)``. Duck-typed; :func:`keras_callback` returns
    a subclass of Keras' own ``Callback`` where Keras is installed."""


class _LightningHooks(_CallbackConfig):
    def __init__(self, reporter: EpochReporter | None = None, *, epochs: int | None = None,
                 checkpoint_dir: str | Path | None = None, save: bool = False,
                 stop: GracefulStop | None = None) -> None:
        super().__init__()
        self._configure(reporter, epochs, checkpoint_dir, save, stop)

    @staticmethod
    def _rank_zero(trainer: Any) -> bool:
        return bool(getattr(trainer, "is_global_zero", True))

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if not self._rank_zero(trainer):
            return
        if self.reporter.epochs is None:
            max_epochs = getattr(trainer, "max_epochs", None)
            if isinstance(max_epochs, int) and max_epochs > 0:
                self.reporter.epochs = max_epochs
        if self._can_report():
            self.reporter.start(int(trainer.current_epoch) + 1)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        epoch = int(trainer.current_epoch) + 1
        if self._rank_zero(trainer):
            if self.save and self.checkpoint_dir is not None:
                save_checkpoint(self.checkpoint_dir, epoch,
                                lambda p: trainer.save_checkpoint(str(p)), suffix=".ckpt")
            if self._can_report():
                self.reporter.end(epoch, _float_metrics(getattr(trainer, "callback_metrics",
                                                                None)))
        if self.stop is not None and self.stop.requested:
            trainer.should_stop = True


class _LightningPlumbing:
    """What Lightning reads from every callback, as no-ops (the duck-typed base)."""

    @property
    def state_key(self) -> str:
        return type(self).__qualname__

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_") or name in ("setup", "teardown"):
            return _no_op
        raise AttributeError(name)


class LightningProgressCallback(_LightningHooks, _LightningPlumbing):
    """PyTorch Lightning callback: prints the start/end line of every training epoch
    (rank 0 only), optionally saves ``trainer.save_checkpoint()`` as the epoch's
    checkpoint (``save=True``; rank 0 only, so not for sharded strategies: use
    Lightning's ModelCheckpoint and :func:`write_manifest` there), and sets
    ``trainer.should_stop`` once ``stop.requested``. Resume with
    ``trainer.fit(model, ckpt_path=latest_checkpoint(dir).path)``. Duck-typed;
    :func:`lightning_callback` returns a subclass of Lightning's ``Callback`` where
    Lightning is installed."""


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def _framework_base(candidates: tuple[tuple[str, str], ...]) -> type | None:
    import importlib
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except Exception:       # noqa: BLE001 — absent or broken framework: try the next
            continue
        base = getattr(module, attr, None)
        if isinstance(base, type):
            return base
    return None


def keras_callback(reporter: EpochReporter | None = None, **options: Any) -> Any:
    """A :class:`KerasProgressCallback` that is also a ``keras.callbacks.Callback``
    (Keras 3 or ``tf.keras``) when one can be imported, else the duck-typed class."""
    base = _framework_base((("keras.callbacks", "Callback"),
                            ("tensorflow.keras.callbacks", "Callback")))
    if base is None:
        return KerasProgressCallback(reporter, **options)
    cls = type("AndreasKerasCallback", (_KerasHooks, base),
               {"__doc__": KerasProgressCallback.__doc__})
    return cls(reporter, **options)


def lightning_callback(reporter: EpochReporter | None = None, **options: Any) -> Any:
    """A :class:`LightningProgressCallback` that is also a Lightning ``Callback``
    (``lightning.pytorch`` or ``pytorch_lightning``) when one can be imported, else the
    duck-typed class."""
    base = _framework_base((("lightning.pytorch", "Callback"),
                            ("pytorch_lightning", "Callback")))
    if base is None:
        return LightningProgressCallback(reporter, **options)
    cls = type("AndreasLightningCallback", (_LightningHooks, base),
               {"__doc__": LightningProgressCallback.__doc__})
    return cls(reporter, **options)
