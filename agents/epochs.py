"""What a container run's log says about epochs: the pure part of epoch tracking.

No threads and no Docker calls (:mod:`agents.tracker` follows the containers and feeds
this): Docker's log stream is split into lines (:class:`LineSplitter`), each line's
``timestamps=True`` prefix is split off (:func:`split_timestamp`), the job contract's
progress lines (:func:`andreas.job.parse_progress`) are paired per epoch into
:class:`agents.records.EpochRecord` (:class:`EpochPairer`): the start is the epoch's
start line, or the previous epoch's end when that line is missing; both times are the
``t`` values the container printed; every (job, attempt, epoch) is emitted at most once,
also when the log is read again. :class:`ContainerInfo` and :class:`ContainerExit` are
what the tracker reports about a followed run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from agents.records import EpochRecord
from andreas.executor.events import docker_time
from andreas.job import ProgressEvent

log = logging.getLogger(__name__)

MAX_LINE = 1 << 20      # a "line" longer than this (no newline) is dropped, not buffered


@dataclass(frozen=True, kw_only=True)
class ContainerInfo:
    """A container run the tracker follows (passed to ``on_start``)."""

    container_id: str
    name: str
    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...]
    started_s: float | None
    gpu_milli: int | None = None          # its share of its one GPU; None: whole GPUs
    power_limit_w: float | None = None    # its label's limit (andreas.job.LABEL_POWER_LIMIT)


@dataclass(frozen=True, kw_only=True)
class ContainerExit:
    """A followed container run ended (passed to ``on_exit``).

    ``exit_code`` is Docker's (from the ``die`` event, else from inspecting the
    container); None when the container vanished without telling. ``epochs`` counts the
    records emitted for this run; ``open_epoch`` is an epoch that started and never
    ended (the partial epoch a restart redoes), else None. ``removed``: the container
    was already gone when the exit was reported (best effort: a removal right after the
    exit may not be seen).
    """

    container_id: str
    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...]
    exit_code: int | None
    t: float
    epochs: int
    open_epoch: int | None
    removed: bool = False
    gpu_milli: int | None = None


class EpochPairer:
    """Pairs one container run's progress events into epoch records (no I/O)."""

    def __init__(self, *, job_id: str, attempt: int, container_id: str,
                 gpu_uuids: tuple[str, ...] = (), emitted: set[int] | None = None) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.container_id = container_id
        self.gpu_uuids = tuple(gpu_uuids)
        self.emitted = emitted if emitted is not None else set()
        self.records = 0
        self._open: dict[int, float] = {}
        self._last_end: tuple[int, float] | None = None
        self._warned_job = False

    @property
    def open_epoch(self) -> int | None:
        pending = [e for e in self._open if e not in self.emitted]
        return max(pending) if pending else None

    def feed(self, event: ProgressEvent) -> EpochRecord | None:
        """The record this event completes, or None."""
        if event.job_id != self.job_id:
            if not self._warned_job:
                log.warning("container %s (job %s): ignoring progress lines for job %s",
                            self.container_id[:12], self.job_id, event.job_id)
                self._warned_job = True
            return None
        if event.is_start:
            if event.epoch not in self.emitted:
                self._open[event.epoch] = event.t
            return None
        start = self._open.pop(event.epoch, None)
        if start is None and self._last_end is not None \
                and self._last_end[0] == event.epoch - 1:
            start = self._last_end[1]        # no start line: the previous epoch's end
        self._last_end = (event.epoch, event.t)
        for stale in [e for e in self._open if e < event.epoch]:
            del self._open[stale]            # epochs that started and never ended
        if event.epoch in self.emitted:
            return None                      # read again (reconnect, replay, restart)
        if start is None:
            log.warning("container %s (job %s): epoch %d ended without a start line or "
                        "the previous epoch's end; not recorded", self.container_id[:12],
                        self.job_id, event.epoch)
            return None
        if event.t < start:
            log.warning("container %s (job %s): epoch %d ends (t=%.6f) before it starts "
                        "(t=%.6f); not recorded", self.container_id[:12], self.job_id,
                        event.epoch, event.t, start)
            return None
        self.emitted.add(event.epoch)
        self.records += 1
        return EpochRecord(job_id=self.job_id, attempt=self.attempt, epoch=event.epoch,
                           start_s=start, end_s=event.t, container_id=self.container_id,
                           gpu_uuids=self.gpu_uuids)


class LineSplitter:
    """Bytes from a log stream (frames or arbitrary chunks) into text lines."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes | str) -> Iterator[str]:
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", errors="replace")
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_LINE:
            log.warning("dropping a %d-byte log line without a newline", len(self._buffer))
            self._buffer = b""
        for raw in lines:
            yield raw.decode("utf-8", errors="replace").rstrip("\r")

    def flush(self) -> Iterator[str]:
        rest, self._buffer = self._buffer, b""
        if rest:
            yield rest.decode("utf-8", errors="replace").rstrip("\r")


def split_timestamp(line: str) -> tuple[float | None, str]:
    """Docker's ``timestamps=True`` prefix split off: (UTC seconds or None, the text)."""
    head, sep, rest = line.partition(" ")
    t = docker_time(head) if sep else None
    return (t, rest) if t is not None else (None, line)
