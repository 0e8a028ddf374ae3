"""Progress lines (format v1): writing, reading, and the reporter a training loop uses."""

from __future__ import annotations

import contextlib
import enum
import math
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from .names import (DEFAULT_LOCAL_JOB_ID, ENV_EPOCHS, WHOLE_NUMBER, JobEnv,
                    positive_int, valid_job_id)

PROGRESS_MARKER = "ANDREAS-PROGRESS"
PROGRESS_VERSION = 1


class EpochBoundary(enum.StrEnum):
    """What a progress line says of its epoch (``event=``; the line's text is the value)."""

    START = "start"
    END = "end"


EVENTS = tuple(EpochBoundary)

_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,63}")
_TIME = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")
_NUMBER = re.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?"
                     r"|nan|inf|infinity)", re.IGNORECASE)
_MARKER = re.compile(r"(?<![A-Za-z0-9_\-])" + re.escape(PROGRESS_MARKER)
                     + r"[ \t]+v([0-9]{1,4})(?=[ \t]|$)")
_TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_.]{0,63})=(\S+)")
_REQUIRED = ("job", "epoch", "of", "event", "t")


@dataclass(frozen=True, kw_only=True)
class ProgressEvent:
    """One parsed progress line."""

    job_id: str
    epoch: int
    of: int
    event: EpochBoundary
    t: float
    metrics: Mapping[str, float] = field(default_factory=dict, hash=False)
    version: int = PROGRESS_VERSION

    @property
    def is_start(self) -> bool:
        return self.event == EpochBoundary.START

    @property
    def is_end(self) -> bool:
        return self.event == EpochBoundary.END

    def line(self) -> str:
        return format_progress(self.job_id, self.epoch, self.of, self.event, t=self.t,
                               metrics=self.metrics)


def format_progress(job_id: str, epoch: int, of: int, event: str, *, t: float | None = None,
                    metrics: Mapping[str, float] | None = None) -> str:
    """The v1 progress line (no newline). ``t`` defaults to ``time.time()``.

    Raises ValueError naming the field for a value the format cannot carry (the reader
    would drop the line, and the epoch with it).
    """
    if not valid_job_id(job_id):
        raise ValueError(f"progress line: job must be 1-64 characters of A-Z a-z 0-9 . _ - "
                         f": @ +, got {job_id!r}")
    positive_int(epoch, "epoch")
    positive_int(of, "of")
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
    if (not valid_job_id(fields["job"]) or WHOLE_NUMBER.fullmatch(fields["epoch"]) is None
            or WHOLE_NUMBER.fullmatch(fields["of"]) is None or fields["event"] not in EVENTS
            or _TIME.fullmatch(fields["t"]) is None):
        return None
    epoch, of = int(fields["epoch"]), int(fields["of"])
    if epoch < 1 or of < 1:
        return None
    return ProgressEvent(job_id=fields["job"], epoch=epoch, of=of,
                         event=EpochBoundary(fields["event"]),
                         t=float(fields["t"]), metrics=metrics)


def float_metrics(values: Mapping[str, Any] | None) -> dict[str, float]:
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
            positive_int(self.epochs, "epochs")
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
        return self._emit(epoch, EpochBoundary.START, None)

    def end(self, epoch: int, metrics: Mapping[str, float] | None = None) -> float:
        """Print epoch ``epoch``'s end line (with metrics); returns its time."""
        return self._emit(epoch, EpochBoundary.END, metrics)

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

