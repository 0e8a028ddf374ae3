"""Docker events as a wake-up for the manager (:meth:`DockerExecutor.watch`).

One thread per node streams the engine's events for labelled containers (start, die,
oom, destroy) and calls ``wake(node)`` for each, so the manager ticks soon after a
container ends instead of at its next poll; polling stays the source of truth. Each
stream has its own client (a streaming response holds its connection); a failed or ended
stream is retried with back-off (1 s doubling to 30 s, one warning per outage), reopened
every ``WATCH_REFRESH_S`` (a silently dead connection never errors), and closed on stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from andreas.executor.base import NodeRef
from andreas.executor.errors import one_line
from andreas.job import LABEL_JOB

log = logging.getLogger("andreas.executor")

# events that can change what the manager sees (docker-py: values of one key are OR-ed,
# keys AND-ed; a bare label name matches any value)
EVENT_FILTERS: dict[str, Any] = {"type": "container", "label": LABEL_JOB,
                                 "event": ["start", "die", "oom", "destroy"]}
WATCH_NODES_S = 10.0           # nodes() is re-read this often (every 1 s while empty)
WATCH_BACKOFF_S = (1.0, 30.0)  # first and longest wait before a stream is reopened
WATCH_HEALTHY_S = 5.0          # a stream open this long ends an outage (back-off reset)
WATCH_REFRESH_S = 300.0        # streams are reopened this often (dead connections)
WATCH_REPLAY_S = 2.0           # a new stream starts this far back (the engine subscribes
                               # after it answers; its buffered events cover the gap)
WATCH_JOIN_S = 2.0             # how long stopping waits for a watcher's thread
_WATCH_SLICE_S = 0.2           # the supervisor notices a closed executor this quickly


def _close_stream(stream: Any) -> None:
    """Close an event stream from any thread (its blocked reader returns)."""
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


class _EventWatcher:
    """One node's event stream, read in its own daemon thread with its own client.
    ``connect(node)`` makes a new client; ``halt`` ends the thread."""

    def __init__(self, node: NodeRef, connect: Callable[[NodeRef], Any],
                 wake: Callable[[str], None]) -> None:
        self.node = node
        self._connect = connect
        self._wake = wake
        self.halt = threading.Event()
        self.attempts = 0                  # streams tried (tests: no spinning)
        self._lock = threading.Lock()
        self._stream: Any = None
        self._opened = 0.0                 # monotonic time the current stream opened
        self._refresh = False
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"andreas-events-{node.name}")

    def interrupt(self, *, refresh: bool = False) -> None:
        """Close the current stream (``refresh``: reopen it at once, no back-off)."""
        with self._lock:
            stream = self._stream
            if refresh and stream is not None:
                self._refresh = True
        _close_stream(stream)

    def stop(self) -> None:
        self.halt.set()
        self.interrupt()

    @property
    def streaming(self) -> bool:
        with self._lock:
            return self._stream is not None

    def age(self) -> float:
        with self._lock:
            return time.monotonic() - self._opened if self._stream is not None else 0.0

    def _notify(self) -> None:
        try:
            self._wake(self.node.name)
        except Exception:  # noqa: BLE001 - a wake is a hint; the watcher goes on
            log.debug("node %s: wake failed", self.node.name, exc_info=True)

    def _run(self) -> None:
        name = self.node.name
        delay, warned, said_back = WATCH_BACKOFF_S[0], False, False
        while not self.halt.is_set():
            self.attempts += 1
            client = stream = None
            opened = None
            why = "the engine ended the event stream"
            try:
                client = self._connect(self.node)
                stream = client.events(decode=True, filters=EVENT_FILTERS,
                                       since=int(time.time() - WATCH_REPLAY_S))
                with self._lock:
                    self._stream, self._opened = stream, time.monotonic()
                opened = time.monotonic()
                if self.halt.is_set():         # stopped before the stream was visible
                    break
                if warned and not said_back:
                    log.info("node %s: container events received again", name)
                    said_back = True
                for event in stream:
                    if self.halt.is_set():
                        break
                    if isinstance(event, dict):
                        self._notify()
            except Exception as e:  # noqa: BLE001 - vendor errors never leave the thread
                why = one_line(e)
            finally:
                with self._lock:
                    self._stream = None
                    refreshed, self._refresh = self._refresh, False
                _close_stream(stream)
                close_client(client)
            if self.halt.is_set():
                break
            # healthy by time alone: a new stream replays recent events, so a count of
            # events would let an engine that drops every stream reset the back-off
            if opened is not None and time.monotonic() - opened >= WATCH_HEALTHY_S:
                delay, warned, said_back = WATCH_BACKOFF_S[0], False, False
            if refreshed:
                continue
            if not warned:
                log.warning("node %s (%s): no container events: %s; the manager's polling "
                            "still sees every change; retrying every %.0f-%.0f s", name,
                            self.node.docker_endpoint, why, *WATCH_BACKOFF_S)
                warned = True
            else:
                log.debug("node %s: event stream retry failed: %s", name, why)
            self.halt.wait(delay)
            delay = min(WATCH_BACKOFF_S[1], delay * 2)


class EventWatch:
    """The watchers of one :meth:`DockerExecutor.watch` call and the supervisor thread
    that follows ``nodes()`` and stops them all on ``stop`` (or the executor's close)."""

    def __init__(self, connect: Callable[[NodeRef], Any], nodes: Callable[[], list[NodeRef]],
                 wake: Callable[[str], None], stop: threading.Event) -> None:
        self._connect = connect
        self._nodes = nodes
        self._wake = wake
        self._stop = stop
        self.closed = threading.Event()
        self.watchers: dict[NodeRef, _EventWatcher] = {}
        self.thread = threading.Thread(target=self._run, daemon=True, name="andreas-events")

    def _sync(self) -> None:
        try:
            wanted = set(self._nodes())
        except Exception:  # noqa: BLE001 - keep the current set; try again later
            log.debug("event watch: nodes() failed", exc_info=True)
            return
        for ref in [r for r in self.watchers if r not in wanted]:
            self.watchers.pop(ref).stop()
        for ref in wanted - self.watchers.keys():
            if self._done():
                return
            w = self.watchers[ref] = _EventWatcher(ref, self._connect, self._wake)
            w.thread.start()
        for w in self.watchers.values():
            if w.age() >= WATCH_REFRESH_S:
                w.interrupt(refresh=True)

    def _done(self) -> bool:
        return self._stop.is_set() or self.closed.is_set()

    def _run(self) -> None:
        try:
            while not self._done():
                self._sync()
                deadline = time.monotonic() + (WATCH_NODES_S if self.watchers else 1.0)
                while not self._done() and time.monotonic() < deadline:
                    self._stop.wait(_WATCH_SLICE_S)
        except Exception:  # noqa: BLE001 - never escapes; polling goes on without events
            log.exception("event watch failed; the manager polls without it")
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop every watcher and wait (a little) for their threads."""
        self.closed.set()
        watchers = list(self.watchers.values())
        for w in watchers:
            w.stop()
        deadline = time.monotonic() + WATCH_JOIN_S
        for w in watchers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
