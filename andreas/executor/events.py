"""Docker's container events and time format: one follower for the agent and the manager.

:class:`EventFollower` reads one engine's event stream in its own daemon thread and
reopens it when it fails or ends: back-off from ``backoff_s[0]`` doubling to
``backoff_s[1]``, reset once a stream has stayed open ``healthy_s``; one warning per
outage (later retries at debug level) and one info line when events flow again. A new
stream starts ``replay_s`` back (the engine subscribes after it answers; its buffered
events cover the gap); with ``resume`` a reopened stream starts from the last event (or
open) seen instead of from now, so no event is lost between streams. Both users hand it
a ``connect()`` (a Docker SDK client) and an ``on_event`` callback of typed
:class:`ContainerEvent`:

- the node agent's epoch tracker (:mod:`agents.tracker`): one follower on the node's own
  engine, ``resume`` on, the running containers listed in ``on_open``;
- the manager's wake-ups (:meth:`DockerExecutor.watch`): :class:`EventWatch` keeps one
  follower per node, each with its own client (a streaming response holds its
  connection), and calls ``wake(node)`` for each event, so the manager ticks soon after a
  container ends instead of at its next poll (polling stays the source of truth); it
  reopens every stream every ``WATCH_REFRESH_S`` (a silently dead connection never
  errors).

:func:`docker_time` reads the engine's timestamps (inspect, logs, events) for both.
Stdlib only: the caller makes the Docker client.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from andreas.infra.backoff import Backoff
from andreas.executor.base import NodeRef
from andreas.errors import error_line
from andreas.job import LABEL_JOB

log = logging.getLogger("andreas.executor")



class ContainerAction(enum.StrEnum):
    """The container events andreas follows (Docker's ``Action``; the engine has more)."""

    START = "start"
    DIE = "die"            # exited; its ``exitCode`` attribute says how
    OOM = "oom"
    DESTROY = "destroy"    # removed


# events that can change what the manager sees (docker-py: values of one key are OR-ed,
# keys AND-ed; a bare label name matches any value)
WATCH_EVENTS = tuple(a.value for a in ContainerAction)
WATCH_NODES_S = 10.0           # nodes() is re-read this often (every 1 s while empty)
WATCH_BACKOFF_S = (1.0, 30.0)  # first and longest wait before a stream is reopened
WATCH_HEALTHY_S = 5.0          # a stream open this long ends an outage (back-off reset)
WATCH_REFRESH_S = 300.0        # streams are reopened this often (dead connections)
WATCH_REPLAY_S = 2.0           # a new stream starts this far back
WATCH_JOIN_S = 2.0             # how long stopping waits for a watcher's thread
_WATCH_SLICE_S = 0.2           # the supervisor notices a closed executor this quickly

_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")


def docker_time(value: object) -> float | None:
    """Docker's RFC 3339 time (``2026-11-22T13:50:17.372208480Z``) as UTC seconds; None
    for its zero time (``0001-01-01T00:00:00Z``) and anything that is not such a time.

    ``datetime.fromisoformat`` (Python 3.11) reads the date and zone, ``Z`` included, and
    even 9 fraction digits, but cuts those to microseconds and also accepts forms Docker
    never writes (no zone: local time); so the shape is checked here and the fraction
    added in full."""
    if not isinstance(value, str):
        return None
    m = _RFC3339.fullmatch(value.strip())
    if m is None:
        return None
    whole, fraction, zone = m.groups()
    try:
        t = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    except (ValueError, OverflowError):
        return None
    if fraction:
        t += int(fraction) / 10 ** len(fraction)
    return t if t > 0 else None


@dataclass(frozen=True, kw_only=True)
class ContainerEvent:
    """One container event as the engine reported it."""

    action: str                 # a ContainerAction's value, or another the engine has
    container_id: str
    time_s: float
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)  # labels, exitCode

    @property
    def exit_code(self) -> int | None:
        """A ``die`` event's exit code (None when the engine gave none)."""
        raw = self.attributes.get("exitCode")
        return int(raw) if raw not in (None, "") else None

    @classmethod
    def from_raw(cls, raw: object) -> ContainerEvent | None:
        """The decoded event the SDK yields; None for anything without a container id."""
        if not isinstance(raw, dict):
            return None
        actor = raw.get("Actor") or {}
        cid = raw.get("id") or actor.get("ID")
        if not cid:
            return None
        t = int(raw["timeNano"]) / 1e9 if raw.get("timeNano") else float(raw.get("time") or 0)
        return cls(action=raw.get("Action") or raw.get("status") or "", container_id=cid,
                   time_s=t, attributes=dict(actor.get("Attributes") or {}))


def close_stream(stream: Any) -> None:
    """Close an SDK stream (events or logs) from any thread, so its blocked reader
    returns; best effort."""
    if stream is None:
        return
    try:
        stream.close()
    except Exception:  # noqa: BLE001 - SSH: the SDK refuses; close the channel itself
        try:
            stream._response.raw._fp.fp.channel.close()
        except Exception:  # noqa: BLE001 - best effort
            pass


def close_client(client: Any) -> None:
    if client is None:
        return
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


class EventFollower:
    """One engine's labelled container events, read in a daemon thread; see the module doc.

    ``connect()`` returns the client for the next stream (raising counts as a failed
    attempt); ``release(client)`` is called when that stream is done (None: the caller
    keeps its client). ``on_open()`` runs once a stream is open, before it is read;
    raising fails the stream. ``on_event`` gets every :class:`ContainerEvent`; its errors
    are logged and the stream goes on. ``name`` starts every log line.
    """

    def __init__(self, connect: Callable[[], Any], on_event: Callable[[ContainerEvent], None],
                 *, name: str, thread_name: str, events: tuple[str, ...],
                 label: str = LABEL_JOB, release: Callable[[Any], None] | None = None,
                 on_open: Callable[[], None] | None = None, replay_s: float = WATCH_REPLAY_S,
                 resume: bool = False, backoff_s: tuple[float, float] = WATCH_BACKOFF_S,
                 healthy_s: float = WATCH_HEALTHY_S, clock: Callable[[], float] = time.time,
                 logger: logging.Logger = log) -> None:
        self.name = name
        self._connect = connect
        self._on_event = on_event
        self._release = release
        self._on_open = on_open
        self._filters = {"type": "container", "label": [label], "event": list(events)}
        self.replay_s = replay_s
        self.resume = resume
        self.backoff_s = backoff_s
        self.healthy_s = healthy_s
        self._clock = clock
        self._log = logger
        self.halt = threading.Event()
        self.attempts = 0                  # streams tried (tests: no spinning)
        self.failures = 0                  # streams that raised (not counting a stop)
        self._lock = threading.Lock()
        self._stream: Any = None
        self._opened = 0.0                 # monotonic time the current stream opened
        self._refresh = False
        self.thread = threading.Thread(target=self._run, daemon=True, name=thread_name)

    def start(self) -> EventFollower:
        self.thread.start()
        return self

    def interrupt(self, *, refresh: bool = False) -> None:
        """Close the current stream (``refresh``: reopen it at once, no back-off)."""
        with self._lock:
            stream = self._stream
            if refresh and stream is not None:
                self._refresh = True
        close_stream(stream)

    def stop(self) -> None:
        self.halt.set()
        self.interrupt()

    @property
    def streaming(self) -> bool:
        with self._lock:
            return self._stream is not None

    def age(self) -> float:
        """Seconds the current stream has been open (0 with none)."""
        with self._lock:
            return time.monotonic() - self._opened if self._stream is not None else 0.0

    def _deliver(self, event: ContainerEvent) -> None:
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - a consumer's error must not end the stream
            self._log.debug("%s: handling a %s event failed", self.name, event.action,
                            exc_info=True)

    def _run(self) -> None:
        retry = Backoff(initial_s=self.backoff_s[0], max_s=self.backoff_s[1])
        in_a_row, warned, said_back = 0, False, False     # failed streams since healthy
        since = self._clock() - self.replay_s
        while not self.halt.is_set():
            if not self.resume:
                since = self._clock() - self.replay_s
            self.attempts += 1
            client = stream = None
            opened = seen = None
            why = "the engine ended the event stream"
            try:
                client = self._connect()
                asked = self._clock()
                stream = client.events(decode=True, filters=self._filters, since=int(since))
                with self._lock:
                    self._stream, self._opened = stream, time.monotonic()
                if self.halt.is_set():         # stopped before the stream was visible
                    break
                if self._on_open is not None:
                    self._on_open()
                opened, seen = time.monotonic(), asked
                if warned and not said_back:
                    self._log.info("%s: container events received again", self.name)
                    said_back = True
                for raw in stream:
                    if self.halt.is_set():
                        break
                    event = ContainerEvent.from_raw(raw)
                    if event is not None:
                        seen = max(seen, event.time_s)
                        self._deliver(event)
            except Exception as e:  # noqa: BLE001 - vendor errors never leave the thread
                why = error_line(e)
                if not self.halt.is_set():
                    self.failures += 1
            finally:
                with self._lock:
                    self._stream = None
                    refreshed, self._refresh = self._refresh, False
                close_stream(stream)
                if client is not None and self._release is not None:
                    self._release(client)
            if self.halt.is_set():
                break
            if seen is not None:
                since = seen - self.replay_s   # used when resuming
            # healthy by time alone: a new stream replays recent events, so a count of
            # events would let an engine that drops every stream reset the back-off
            if opened is not None and time.monotonic() - opened >= self.healthy_s:
                in_a_row, warned, said_back = 0, False, False
            if refreshed:
                continue
            if not warned:
                self._log.warning("%s: no container events: %s; retrying every %.0f-%.0f s",
                                  self.name, why, *self.backoff_s)
                warned = True
            else:
                self._log.debug("%s: event stream retry failed: %s", self.name, why)
            self.halt.wait(retry.delay_s(in_a_row))
            in_a_row += 1


class EventWatch:
    """The followers of one :meth:`DockerExecutor.watch` call (one per node, each with
    its own client) and the supervisor thread that follows ``nodes()`` (every
    ``WATCH_NODES_S``, or at once by :meth:`sync`) and stops them all on ``stop`` (or
    the executor's close)."""

    def __init__(self, connect: Callable[[NodeRef], Any], nodes: Callable[[], list[NodeRef]],
                 wake: Callable[[str], None], stop: threading.Event) -> None:
        self._connect = connect
        self._nodes = nodes
        self._wake = wake
        self._stop = stop
        self.closed = threading.Event()
        self.watchers: dict[NodeRef, EventFollower] = {}
        self._lock = threading.Lock()      # nodes() and watchers: the supervisor or sync()
        self.thread = threading.Thread(target=self._run, daemon=True, name="andreas-events")

    def _follower(self, ref: NodeRef) -> EventFollower:
        return EventFollower(lambda: self._connect(ref), lambda _event: self._wake(ref.name),
                             name=f"node {ref.name} ({ref.docker_endpoint})",
                             thread_name=f"andreas-events-{ref.name}", events=WATCH_EVENTS,
                             release=close_client, replay_s=WATCH_REPLAY_S,
                             backoff_s=WATCH_BACKOFF_S, healthy_s=WATCH_HEALTHY_S)

    def sync(self) -> None:
        """Follow ``nodes()`` now: the followers of nodes no longer in it are stopped
        before this returns (their streams ending is no outage, no warning), new ones
        started. Never raises."""
        with self._lock:
            if self._done():
                return
            try:
                wanted = set(self._nodes())
            except Exception:
                log.debug("event watch: nodes() failed", exc_info=True)
                return
            for ref in [r for r in self.watchers if r not in wanted]:
                self.watchers.pop(ref).stop()
            for ref in wanted - self.watchers.keys():
                if self._done():
                    return
                self.watchers[ref] = self._follower(ref).start()
            for w in self.watchers.values():
                if w.age() >= WATCH_REFRESH_S:
                    w.interrupt(refresh=True)

    def _done(self) -> bool:
        return self._stop.is_set() or self.closed.is_set()

    def _run(self) -> None:
        try:
            while not self._done():
                self.sync()
                deadline = time.monotonic() + (WATCH_NODES_S if self.watchers else 1.0)
                while not self._done() and time.monotonic() < deadline:
                    self._stop.wait(_WATCH_SLICE_S)
        except Exception:
            log.exception("event watch failed; the manager polls without it")
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop every follower and wait (a little) for their threads."""
        self.closed.set()
        with self._lock:
            watchers = list(self.watchers.values())
        for w in watchers:
            w.stop()
        deadline = time.monotonic() + WATCH_JOIN_S
        for w in watchers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
