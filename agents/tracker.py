"""Per-epoch runtimes from the logs of the node's andreas-managed containers: the threads.

:class:`EpochTracker` watches one Docker daemon (the node's) through the Docker SDK:

- it follows every running container labelled ``andreas.job`` (the label keys are in
  :mod:`andreas.job`) when it starts, and every such container Docker starts later
  (``start`` events through :class:`andreas.executor.events.EventFollower`; the events
  stream is opened before the running ones are listed, and reopened from the last event
  seen after a daemon restart, so none is missed);
- each container run has its own thread reading
  ``container.logs(stream=True, follow=True, timestamps=True, since=...)``, from just
  before the run's ``StartedAt`` (not before the previous run's end), so a container
  that exits within milliseconds is read in full as long as it is not removed;
- the lines are paired into :class:`agents.records.EpochRecord` by the pure
  :mod:`agents.epochs` (:class:`~agents.epochs.EpochPairer`); every (job, attempt,
  epoch) is emitted at most once per tracker, also when the log is read again after a
  reconnect;
- a ``die`` event closes the container's window: the thread drains what is left of the
  log (if the followed stream does not end within ``die_grace_s`` it is closed and the
  rest read without follow) and reports a :class:`ContainerExit` with Docker's exit
  code.

Lines that are not progress lines, malformed ones, lines for another job id, a container
that vanishes while followed, a daemon that goes away: all are logged and survived;
nothing raises out of the tracker's threads (``stop()`` joins them).

Records go to ``on_epoch``, exits to ``on_exit``, newly followed containers to
``on_start``: each a callable or anything with ``put``; calls are serialised, so a
callback need not be thread-safe, but it should be quick (hand the record to a queue).

An engine that goes away while a container runs (dockerd crashed: the container's
process runs on under its shim) does not end the run: the thread waits for the engine
with back-off, the run stays followed (its GPUs stay the job's) while its main process
runs (``/proc``, ``andreas.infra.procs``), and when the engine answers again the lines
the container wrote meanwhile are read and its exit reported with Docker's exit code.

Known limits: a container removed before its log was read (``--rm``, ``auto_remove``)
cannot be read any more; after an agent restart the epochs of a still-running container
are read again from its start (the store's (job, attempt, epoch) key identifies them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from agents.epochs import ContainerExit, ContainerInfo, EpochPairer, LineSplitter, split_timestamp
from andreas.infra.backoff import Backoff
from andreas.executor.events import (ContainerAction, ContainerEvent, EventFollower,
                                     close_stream, docker_time)
from andreas.infra import procs
from andreas.job import LABEL_JOB, job_labels, parse_progress

log = logging.getLogger(__name__)

Sink = Callable[[Any], object]

LOOKBACK_S = 1.0        # Docker stamps StartedAt after the process may have printed
EVENTS = tuple(a.value for a in (ContainerAction.START, ContainerAction.DIE,
                                 ContainerAction.DESTROY))


def default_client(base_url: str | None = None) -> Any:
    """The node's Docker client; the API version is negotiated with the daemon (the
    Debian daemons are older than the SDK's default)."""
    import docker
    if base_url is None:
        return docker.from_env(version="auto")
    return docker.DockerClient(base_url=base_url, version="auto")


def _deliver(sink: Any) -> Sink | None:
    if sink is None:
        return None
    if callable(sink):
        return sink
    put = getattr(sink, "put", None)
    if callable(put):
        return put
    raise TypeError(f"a sink must be callable or have put(), got {sink!r}")


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
        self.process: procs.ProcessRef | None = None   # its main process (State.Pid)
        self.gone = False        # that process ended while the engine was away

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
            close_stream(stream)


class EpochTracker:
    """Follows the andreas-labelled containers of one Docker daemon; see the module doc.

    ``client`` is a ``docker.DockerClient`` (default :func:`default_client`, created by
    the tracker's thread and retried while no daemon answers). ``on_epoch`` receives
    :class:`~agents.records.EpochRecord`, ``on_exit`` :class:`ContainerExit`,
    ``on_start`` :class:`ContainerInfo`. ``die_grace_s``: how long after a ``die`` event
    the followed stream may take to end before it is closed and the rest read without
    follow; ``reconnect_s`` .. ``max_reconnect_s``: back-off after a lost stream (events
    or a log).
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
        # Replay the last second on the first connection too: a container that starts
        # while the tracker starts is seen through its start event.
        self._events = EventFollower(self._events_client, self._dispatch,
                                     name="epoch tracker", thread_name="epochs-events",
                                     events=EVENTS, on_open=self._discover, replay_s=1.0,
                                     resume=True, backoff_s=(reconnect_s, max_reconnect_s),
                                     healthy_s=0.0, clock=clock, logger=log)
        self._started = False
        self._connected = threading.Event()
        self._errors = 0
        self._opened = 0          # times the events stream was (re)opened: the engine is up

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> EpochTracker:
        """Start following (returns at once; the first discovery runs in the background,
        :meth:`wait_connected` waits for it)."""
        if self._started:
            raise RuntimeError("EpochTracker already started")
        self._started = True
        self._events.start()
        return self

    def wait_connected(self, timeout: float | None = None) -> bool:
        """True once the events stream is open and the running containers are followed."""
        return self._connected.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Close every stream and join every thread (waiting at most ``timeout`` s)."""
        self._stopping.set()
        self._events.stop()
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            if run.timer is not None:
                run.timer.cancel()
            run.force_close()
        deadline = time.monotonic() + timeout
        threads = [self._events.thread if self._started else None] + [r.thread for r in runs]
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
                    if r.thread is not None and r.thread.is_alive() and not r.gone]

    # --- events ----------------------------------------------------------------------

    @property
    def errors(self) -> int:
        """Errors survived (a lost events stream included), for --check and tests."""
        with self._errors_lock:
            return self._errors + self._events.failures

    def _events_client(self) -> Any:
        if self.client is None:
            self.client = default_client()     # retried until a daemon answers
        return self.client

    def _discover(self) -> None:
        self._opened += 1
        containers = self.client.containers.list(
            filters={"label": LABEL_JOB, "status": "running"})
        for container in containers:
            self._follow(container)
        self._connected.set()

    def _dispatch(self, event: ContainerEvent) -> None:
        if self._stopping.is_set():
            return
        cid = event.container_id
        try:
            if event.action == ContainerAction.START:
                try:
                    container = self.client.containers.get(cid)
                except Exception as e:
                    if _is_not_found(e):
                        log.warning("container %s started and was removed before its "
                                    "log could be read", cid[:12])
                        return
                    raise
                self._follow(container)
            elif event.action == ContainerAction.DIE:
                self._died(cid, event.exit_code, event.time_s)
            elif event.action == ContainerAction.DESTROY:
                for run in self._runs_of(cid):
                    run.removed = True
        except Exception as e:  # noqa: BLE001 — one bad event must not end the loop
            self._error()
            log.warning("epoch tracker: %s event of container %s: %s", event.action,
                        cid[:12], e)

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
        started = docker_time(state.get("StartedAt"))
        finished = docker_time(state.get("FinishedAt"))
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
                                 gpu_uuids=labels.gpu_uuids, started_s=started,
                                 gpu_milli=labels.gpu_milli,
                                 power_limit_w=labels.power_limit_w)
            emitted = self._emitted.setdefault((labels.job_id, labels.attempt), set())
            run = _Run(info, since, EpochPairer(job_id=labels.job_id, attempt=labels.attempt,
                                                container_id=container.id,
                                                gpu_uuids=labels.gpu_uuids, emitted=emitted))
            pid = state.get("Pid")
            if state.get("Running") and isinstance(pid, int) and pid > 0:
                run.process = procs.ref(pid)
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
        retry = Backoff(initial_s=self.reconnect_s, max_s=self.max_reconnect_s)
        failures = 0
        lost = False           # the engine went away while the container ran
        while not self._stopping.is_set():
            try:
                since = self._since(run)
                stream = container.logs(stream=True, follow=True, timestamps=True,
                                        since=since if since and since > 0 else None)
                if not run.set_stream(stream):
                    close_stream(stream)
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
            if run.died.is_set():
                return
            alive = self._still_running(run, container)
            if alive is None:      # the engine does not answer: its process may run on
                lost = True
                self._watch_process(run)
            elif not alive:
                if lost:           # what it wrote while the engine was away
                    self._drain(run, container)
                return
            # The stream ended while the container runs (daemon restart, lost socket).
            if self._pause(run, retry.delay_s(failures), watch=lost):
                return
            failures += 1

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

    def _pause(self, run: _Run, wait_s: float, *, watch: bool) -> bool:
        """Wait ``wait_s`` before the next try (True: stopping); with ``watch`` (the
        engine is away) look at the container's process every second meanwhile, so a
        process that ended stops counting as the job's within a second."""
        deadline = time.monotonic() + wait_s
        opened = self._opened
        while (left := deadline - time.monotonic()) > 0:
            if self._stopping.wait(min(left, 1.0) if watch else left):
                return True
            if watch:
                self._watch_process(run)
                if self._opened != opened:
                    return False            # the engine answers again: read now
        return False

    def _watch_process(self, run: _Run) -> None:
        if run.gone or run.process is None or procs.alive(run.process):
            return
        run.gone = True
        log.warning("container %s (job=%s attempt=%d): its process ended while the engine "
                    "was away; the rest of its log is read when the engine answers",
                    run.info.container_id[:12], run.info.job_id, run.info.attempt)

    def _still_running(self, run: _Run, container: Any) -> bool | None:
        """Whether this run of the container still runs; None: the engine does not
        answer (its process may run on)."""
        try:
            container.reload()
        except Exception as e:  # noqa: BLE001
            if _is_not_found(e):
                run.removed = True
                return False
            return None
        state = container.attrs.get("State") or {}
        return bool(state.get("Running")) \
            and docker_time(state.get("StartedAt")) == run.info.started_s

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
                    run.died_s = docker_time(state.get("FinishedAt"))
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
                              gpu_milli=info.gpu_milli, exit_code=run.exit_code,
                              t=run.died_s or self.clock(),
                              epochs=run.pairer.records, open_epoch=run.pairer.open_epoch,
                              removed=run.removed)
        self._emit(self._on_exit, exit_)

    def _error(self) -> None:
        with self._errors_lock:
            self._errors += 1

    def _emit(self, sink: Sink | None, item: Any) -> None:
        if sink is None:
            return
        with self._emit_lock:
            try:
                sink(item)
            except Exception as e:  # noqa: BLE001 — a failing consumer must not stop tracking
                self._error()
                log.warning("epoch tracker: consumer of %s failed: %s", type(item).__name__, e)
