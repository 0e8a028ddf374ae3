"""Per-epoch runtimes from the logs of the node's andreas-managed containers.

:class:`EpochTracker` watches one Docker daemon (the node's) through the Docker SDK:

- it follows every running container labelled ``andreas.job`` (the label keys are in
  :mod:`andreas.job`) when it starts, and every such container Docker starts later
  (``start`` events; the events stream is opened before the running ones are listed, and
  reopened with ``since`` after a daemon restart, so none is missed);
- each container run has its own thread reading
  ``container.logs(stream=True, follow=True, timestamps=True, since=...)``, from just
  before the run's ``StartedAt`` (not before the previous run's end), so a container
  that exits within milliseconds is read in full as long as it is not removed;
- the progress lines of the job contract (:func:`andreas.job.parse_progress`) are paired
  per epoch into :class:`agents.records.EpochRecord`: the start is the epoch's start
  line, or the previous epoch's end when that line is missing; both times are the ``t``
  values the container printed. Every (job, attempt, epoch) is emitted at most once per
  tracker, also when the log is read again after a reconnect;
- a ``die`` event closes the container's window: the thread drains what is left of the
  log (if the followed stream does not end within ``die_grace_s`` it is closed and the
  rest read without follow) and reports a :class:`ContainerExit` with Docker's exit
  code.

Lines that are not progress lines, malformed ones, lines for another job id, a container
that vanishes while followed, a daemon that goes away: all are logged and survived;
nothing raises out of the tracker's threads. ``stop()`` closes the streams and joins
every thread.

Records go to ``on_epoch``, exits to ``on_exit``, newly followed containers to
``on_start``; each is a callable or anything with ``put`` (a ``queue.Queue``). Calls are
serialised (one at a time, from the tracker's threads), so a callback need not be
thread-safe, but it should be quick: hand the record to a queue.

Known limits: a container removed before its log was read (``--rm``, ``auto_remove``)
cannot be read any more; after an agent restart the epochs of a still-running container
are read again from its start (the store's (job, attempt, epoch) key identifies them).
"""

from __future__ import annotations

import calendar
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from agents.records import EpochRecord
from andreas.job import LABEL_JOB, ProgressEvent, job_labels, parse_progress

log = logging.getLogger(__name__)

Sink = Callable[[Any], object]

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?"
                      r"(Z|[+-]\d\d:\d\d)")
LOOKBACK_S = 1.0        # Docker stamps StartedAt after the process may have printed
MAX_LINE = 1 << 20      # a "line" longer than this (no newline) is dropped, not buffered


def default_client(base_url: str | None = None) -> Any:
    """The node's Docker client; the API version is negotiated with the daemon (the
    Debian daemons are older than the SDK's default)."""
    import docker
    if base_url is None:
        return docker.from_env(version="auto")
    return docker.DockerClient(base_url=base_url, version="auto")


def parse_docker_time(value: object) -> float | None:
    """Docker's RFC 3339 time with nanoseconds as UTC seconds; None for zero or garbage."""
    if not isinstance(value, str):
        return None
    m = _RFC3339.fullmatch(value.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    t = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s)))
    if frac:
        t += int(frac) / 10 ** len(frac)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        t -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return t if t > 0 else None


@dataclass(frozen=True, kw_only=True)
class ContainerInfo:
    """A container run the tracker follows (passed to ``on_start``)."""

    container_id: str
    name: str
    job_id: str
    attempt: int
    gpu_uuids: tuple[str, ...]
    started_s: float | None


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
    t = parse_docker_time(head) if sep else None
    return (t, rest) if t is not None else (None, line)


def _deliver(sink: Any) -> Sink | None:
    if sink is None:
        return None
    if callable(sink):
        return sink
    put = getattr(sink, "put", None)
    if callable(put):
        return put
    raise TypeError(f"a sink must be callable or have put(), got {sink!r}")


def _close(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception:          # noqa: BLE001 — a stream already closed or half torn down
        pass


def _is_not_found(error: BaseException) -> bool:
    try:
        from docker.errors import NotFound
    except ImportError:         # pragma: no cover — docker is a dependency
        return False
    return isinstance(error, NotFound)


class _Run:
    """One followed container run: its thread, its stream and what the die event said."""

    def __init__(self, info: ContainerInfo, since: float | None, pairer: EpochPairer) -> None:
        self.info = info
        self.since = since
        self.pairer = pairer
        self.thread: threading.Thread | None = None
        self.stream: Any = None
        self.lock = threading.Lock()
        self.died = threading.Event()
        self.exit_code: int | None = None
        self.died_s: float | None = None
        self.removed = False
        self.force_closed = False
        self.timer: threading.Timer | None = None
        self.last_log_s: float | None = None

    def set_stream(self, stream: Any) -> bool:
        with self.lock:
            if self.force_closed:
                return False
            self.stream = stream
            return True

    def force_close(self) -> None:
        with self.lock:
            self.force_closed = True
            stream, self.stream = self.stream, None
        if stream is not None:
            _close(stream)


class EpochTracker:
    """Follows the andreas-labelled containers of one Docker daemon; see the module doc.

    ``client`` is a ``docker.DockerClient`` (default :func:`default_client`, created by
    the tracker's thread and retried while no daemon answers). ``on_epoch`` receives
    :class:`~agents.records.EpochRecord`, ``on_exit`` :class:`ContainerExit`,
    ``on_start`` :class:`ContainerInfo`. ``die_grace_s``: how long after a ``die`` event
    the followed stream may take to end before it is closed and the rest read without
    follow; ``reconnect_s`` .. ``max_reconnect_s``: back-off after a lost stream.
    """

    def __init__(self, on_epoch: Sink | Any, *, client: Any = None, on_exit: Sink | Any = None,
                 on_start: Sink | Any = None, die_grace_s: float = 5.0,
                 reconnect_s: float = 1.0, max_reconnect_s: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._on_epoch = _deliver(on_epoch)
        self._on_exit = _deliver(on_exit)
        self._on_start = _deliver(on_start)
        self.client = client
        self.die_grace_s = die_grace_s
        self.reconnect_s = reconnect_s
        self.max_reconnect_s = max_reconnect_s
        self.clock = clock
        self._lock = threading.Lock()           # runs, emitted
        self._emit_lock = threading.Lock()      # one callback at a time
        self._errors_lock = threading.Lock()
        self._stopping = threading.Event()
        self._runs: dict[tuple[str, float | None], _Run] = {}
        self._emitted: dict[tuple[str, int], set[int]] = {}
        self._events_stream: Any = None
        self._events_thread: threading.Thread | None = None
        self._connected = threading.Event()
        self.errors = 0                         # survived errors, for --check and tests

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> EpochTracker:
        """Start following (returns at once; the first discovery runs in the background,
        :meth:`wait_connected` waits for it)."""
        if self._events_thread is not None:
            raise RuntimeError("EpochTracker already started")
        self._events_thread = threading.Thread(target=self._events_loop,
                                               name="epochs-events", daemon=True)
        self._events_thread.start()
        return self

    def wait_connected(self, timeout: float | None = None) -> bool:
        """True once the events stream is open and the running containers are followed."""
        return self._connected.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Close every stream and join every thread (waiting at most ``timeout`` s)."""
        self._stopping.set()
        _close(self._events_stream)
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            if run.timer is not None:
                run.timer.cancel()
            run.force_close()
        deadline = time.monotonic() + timeout
        threads = [self._events_thread] + [r.thread for r in runs]
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    log.warning("epoch tracker: thread %s did not stop within %.0f s",
                                thread.name, timeout)

    def __enter__(self) -> EpochTracker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def followed(self) -> list[ContainerInfo]:
        """The container runs being read now."""
        with self._lock:
            return [r.info for r in self._runs.values()
                    if r.thread is not None and r.thread.is_alive()]

    # --- events ----------------------------------------------------------------------

    def _events_loop(self) -> None:
        # Replay the last second on the first connection too: a container that starts
        # while the tracker starts is seen through its start event.
        since = self.clock() - 1.0
        delay = self.reconnect_s
        while not self._stopping.is_set():
            try:
                if self.client is None:
                    self.client = default_client()     # retried until a daemon answers
                opened = self.clock()
                stream = self.client.events(
                    decode=True, since=int(since),
                    filters={"type": "container", "label": [LABEL_JOB],
                             "event": ["start", "die", "destroy"]})
                self._events_stream = stream
                if self._stopping.is_set():
                    _close(stream)
                    break
                self._discover()
                self._connected.set()
                delay = self.reconnect_s
                since = opened - 1.0
                for event in stream:
                    if self._stopping.is_set():
                        break
                    since = max(since, self._event_time(event) - 1.0)
                    self._dispatch(event)
            except Exception as e:  # noqa: BLE001 — daemon gone, socket closed, ...
                if self._stopping.is_set():
                    break
                self._error()
                log.warning("epoch tracker: Docker events: %s; reconnecting in %.1f s",
                            e, delay)
            _close(self._events_stream)
            if self._stopping.wait(delay):
                break
            delay = min(self.max_reconnect_s, delay * 2)
        _close(self._events_stream)

    @staticmethod
    def _event_time(event: dict[str, Any]) -> float:
        if event.get("timeNano"):
            return int(event["timeNano"]) / 1e9
        return float(event.get("time") or 0.0)

    def _discover(self) -> None:
        containers = self.client.containers.list(
            filters={"label": LABEL_JOB, "status": "running"})
        for container in containers:
            self._follow(container)

    def _dispatch(self, event: dict[str, Any]) -> None:
        action = event.get("Action") or event.get("status") or ""
        cid = event.get("id") or (event.get("Actor") or {}).get("ID")
        if not cid:
            return
        try:
            if action == "start":
                try:
                    container = self.client.containers.get(cid)
                except Exception as e:  # noqa: BLE001
                    if _is_not_found(e):
                        log.warning("container %s started and was removed before its "
                                    "log could be read", cid[:12])
                        return
                    raise
                self._follow(container)
            elif action == "die":
                attributes = (event.get("Actor") or {}).get("Attributes") or {}
                code = attributes.get("exitCode")
                self._died(cid, int(code) if code not in (None, "") else None,
                           self._event_time(event))
            elif action == "destroy":
                for run in self._runs_of(cid):
                    run.removed = True
        except Exception as e:  # noqa: BLE001 — one bad event must not end the loop
            self._error()
            log.warning("epoch tracker: %s event of container %s: %s", action, cid[:12], e)

    def _runs_of(self, cid: str) -> list[_Run]:
        with self._lock:
            return [r for (c, _), r in self._runs.items() if c == cid]

    def _died(self, cid: str, code: int | None, t: float) -> None:
        for run in self._runs_of(cid):
            if run.died.is_set() or run.thread is None or not run.thread.is_alive():
                continue
            run.exit_code, run.died_s = code, t
            run.died.set()
            # Window closed: the follow stream ends once the log is drained; if it has
            # not within the grace, close it and read the rest without follow.
            run.timer = threading.Timer(self.die_grace_s, run.force_close)
            run.timer.daemon = True
            run.timer.start()

    # --- following one container run -------------------------------------------------

    def _follow(self, container: Any) -> None:
        attrs = container.attrs or {}
        try:
            labels = job_labels((attrs.get("Config") or {}).get("Labels")
                                or getattr(container, "labels", None))
        except ValueError as e:
            log.warning("container %s: %s; not followed", container.id[:12], e)
            return
        if labels is None:
            return
        state = attrs.get("State") or {}
        started = parse_docker_time(state.get("StartedAt"))
        finished = parse_docker_time(state.get("FinishedAt"))
        since = None
        if started is not None:
            since = started - LOOKBACK_S
            # While it runs, FinishedAt is the previous run's end: do not read that run's
            # last lines again. (Once it has exited, FinishedAt is this run's and may even
            # precede StartedAt by a little: Docker stamps StartedAt late.)
            if state.get("Running") and finished is not None:
                since = max(since, finished)
        key = (container.id, started)
        with self._lock:
            if key in self._runs or self._stopping.is_set():
                return
            info = ContainerInfo(container_id=container.id, name=(container.name or ""),
                                 job_id=labels.job_id, attempt=labels.attempt,
                                 gpu_uuids=labels.gpu_uuids, started_s=started)
            emitted = self._emitted.setdefault((labels.job_id, labels.attempt), set())
            run = _Run(info, since, EpochPairer(job_id=labels.job_id, attempt=labels.attempt,
                                                container_id=container.id,
                                                gpu_uuids=labels.gpu_uuids, emitted=emitted))
            self._runs[key] = run
            # Started under the lock, so that stop() joins only started threads.
            run.thread = threading.Thread(target=self._run_loop, args=(run, container),
                                          name=f"epochs-{container.id[:12]}", daemon=True)
            run.thread.start()

    def _run_loop(self, run: _Run, container: Any) -> None:
        try:
            self._emit(self._on_start, run.info)      # before any of its records
            self._read(run, container)
            self._report_exit(run, container)
        except Exception as e:  # noqa: BLE001 — never let a follower thread die loudly
            self._error()
            log.warning("container %s: epoch tracking failed: %s", run.info.container_id[:12],
                        e)
        finally:
            if run.timer is not None:
                run.timer.cancel()
            with self._lock:
                key = (run.info.container_id, run.info.started_s)
                if self._runs.get(key) is run:
                    del self._runs[key]

    def _since(self, run: _Run) -> float | None:
        return run.last_log_s if run.last_log_s is not None else run.since

    def _read(self, run: _Run, container: Any) -> None:
        delay = self.reconnect_s
        while not self._stopping.is_set():
            try:
                since = self._since(run)
                stream = container.logs(stream=True, follow=True, timestamps=True,
                                        since=since if since and since > 0 else None)
                if not run.set_stream(stream):
                    _close(stream)
                else:
                    self._consume(run, stream)
            except Exception as e:  # noqa: BLE001
                if _is_not_found(e):
                    run.removed = True
                    return
                if not (self._stopping.is_set() or run.force_closed):
                    self._error()
                    log.warning("container %s: log stream: %s", run.info.container_id[:12], e)
            if self._stopping.is_set():
                return
            if run.force_closed:
                self._drain(run, container)     # the window closed: read what is left
                return
            if run.died.is_set() or not self._still_running(run, container):
                return
            # The stream ended while the container runs (daemon restart, lost socket).
            if self._stopping.wait(delay):
                return
            delay = min(self.max_reconnect_s, delay * 2)

    def _consume(self, run: _Run, chunks: Iterable[bytes]) -> None:
        splitter = LineSplitter()
        for chunk in chunks:
            for line in splitter.feed(chunk):
                self._line(run, line)
        for line in splitter.flush():
            self._line(run, line)

    def _line(self, run: _Run, line: str) -> None:
        t, text = split_timestamp(line)
        if t is not None:
            run.last_log_s = t if run.last_log_s is None else max(run.last_log_s, t)
        event = parse_progress(text)
        if event is None:
            return
        with self._lock:
            record = run.pairer.feed(event)
        if record is not None:
            self._emit(self._on_epoch, record)

    def _drain(self, run: _Run, container: Any) -> None:
        since = self._since(run)
        try:
            rest = container.logs(stream=False, follow=False, timestamps=True,
                                  since=since if since and since > 0 else None)
        except Exception as e:  # noqa: BLE001
            if _is_not_found(e):
                run.removed = True
            else:
                self._error()
                log.warning("container %s: reading the rest of the log: %s",
                            run.info.container_id[:12], e)
            return
        self._consume(run, [rest])

    def _still_running(self, run: _Run, container: Any) -> bool:
        try:
            container.reload()
        except Exception as e:  # noqa: BLE001
            if _is_not_found(e):
                run.removed = True
            return False
        state = container.attrs.get("State") or {}
        return bool(state.get("Running")) \
            and parse_docker_time(state.get("StartedAt")) == run.info.started_s

    def _report_exit(self, run: _Run, container: Any) -> None:
        if self._stopping.is_set() and not run.died.is_set():
            return            # still running: no exit to report
        if not run.died.wait(min(self.die_grace_s, 2.0)):
            # No die event (yet): ask Docker, unless the container is gone.
            if not run.removed:
                try:
                    container.reload()
                    state = container.attrs.get("State") or {}
                    if state.get("Running") and not self._stopping.is_set():
                        return
                    run.exit_code = state.get("ExitCode")
                    run.died_s = parse_docker_time(state.get("FinishedAt"))
                except Exception as e:  # noqa: BLE001
                    if _is_not_found(e):
                        run.removed = True
            if run.died_s is None:
                run.died_s = self.clock()
        elif not run.removed:
            try:
                container.reload()
            except Exception as e:  # noqa: BLE001
                run.removed = _is_not_found(e)
        info = run.info
        exit_ = ContainerExit(container_id=info.container_id, job_id=info.job_id,
                              attempt=info.attempt, gpu_uuids=info.gpu_uuids,
                              exit_code=run.exit_code, t=run.died_s or self.clock(),
                              epochs=run.pairer.records, open_epoch=run.pairer.open_epoch,
                              removed=run.removed)
        self._emit(self._on_exit, exit_)

    def _error(self) -> None:
        with self._errors_lock:
            self.errors += 1

    def _emit(self, sink: Sink | None, item: Any) -> None:
        if sink is None:
            return
        with self._emit_lock:
            try:
                sink(item)
            except Exception as e:  # noqa: BLE001 — a failing consumer must not stop tracking
                self._error()
                log.warning("epoch tracker: consumer of %s failed: %s", type(item).__name__, e)
