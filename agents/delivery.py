"""Delivery: the writer thread between the sampling thread and the database.

Why a thread and a queue: sampling must keep its 1-s rhythm whatever the database does
(a slow commit, a server restart, a 30-s timeout); :meth:`Delivery.put` never blocks and
never touches I/O.

The writer thread, in a loop:

1. collects entries into a batch (up to ``batch_rows`` or ``batch_s`` after the first);
2. **direct mode**: writes the batch in one transaction. On a ``transient`` or
   ``refused`` error (see :func:`agents.store_writer.classify`) it switches to spooling:
   the batch goes to the spool (fsync) and a retry is scheduled with exponential back-off
   (capped; longer for ``refused``, which needs an operator);
3. **spool mode**: every batch is appended to the spool (so order is kept), and at each
   retry time the spool is replayed **in order, oldest first**, in chunks, each chunk
   committed in the spool only after the database committed it. When the spool is empty
   the thread goes back to direct writes. New entries never overtake spooled ones;
4. entries the database rejects as data (a row it refuses, however often it is sent) are
   isolated one by one and set aside in ``rejected.jsonl`` next to the spool with the
   reason, logged as errors: retrying them could only block everything behind them.

Heartbeats are not spooled: only the latest matters, and it rides along with the next
batch that reaches the database.

:meth:`Delivery.stop` (SIGTERM) drains the queue: written to the database when it
answers within ``shutdown_s``, otherwise spooled (fsync) for the next start.
"""

from __future__ import annotations

import enum
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agents.entries import HEARTBEAT, Entry
from agents.spool import Spool
from agents.store_writer import DeliveryError
from andreas.infra.backoff import Backoff
from andreas.store.faults import FaultKind

log = logging.getLogger(__name__)

REJECTED_FILE = "rejected.jsonl"
MAX_REJECTED_BYTES = 64 << 20
_STOP = object()


class Writer(Protocol):
    """What delivery needs from the store side (:class:`agents.store_writer.StoreWriter`)."""

    def write(self, entries: Sequence[Entry], heartbeat_t: float | None = None) -> None: ...


class DeliveryMode(enum.StrEnum):
    """Where entries go now: straight to the database, or to the spool during an outage."""

    DIRECT = "direct"
    SPOOL = "spool"


@dataclass
class DeliveryStats:
    """Counters for logs, ``--check`` and tests (entries, not batches)."""

    written: int = 0          # stored directly
    spooled: int = 0          # appended to the spool
    replayed: int = 0         # stored from the spool
    rejected: int = 0         # refused by the database as data, set aside
    refused: int = 0          # not taken by a full spool: LOST (logged loudly)
    outages: int = 0          # switches from direct writes to the spool
    mode: DeliveryMode = DeliveryMode.DIRECT
    last_error: str | None = None
    stored_t: float | None = None   # the newest record time the database holds (metrics' lag)


class Delivery:
    """Decouples producers from the database; see the module docstring."""

    def __init__(self, writer: Writer, spool: Spool, *, batch_rows: int = 500,
                 batch_s: float = 1.0, replay_rows: int = 2000, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, refused_backoff_s: float = 60.0,
                 shutdown_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_stored: Callable[[Sequence[Entry]], None] | None = None) -> None:
        self.writer = writer
        # Told of every batch once it is durable (committed, or in the spool), in order:
        # the agent's resume state (agents/resume.py).
        self.on_stored = on_stored
        self.spool = spool
        self.batch_rows = int(batch_rows)
        self.batch_s = float(batch_s)
        self.replay_rows = int(replay_rows)
        # one count of failures in a row, two caps: a refusal (grants, a full disk) has its own
        self.backoff = Backoff(initial_s=float(backoff_s), max_s=float(max_backoff_s))
        self.refused_backoff = Backoff(initial_s=float(backoff_s),
                                       max_s=float(refused_backoff_s))
        self.shutdown_s = float(shutdown_s)
        self._clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._heartbeat: float | None = None
        self._failures = 0                  # failed writes in a row (the back-off's count)
        self._retry_at = 0.0
        self._error_logged: tuple[str, str] | None = None
        self.stats = DeliveryStats(mode=DeliveryMode.SPOOL if spool.pending
                                   else DeliveryMode.DIRECT)
        self._rejected_path = Path(spool.directory) / REJECTED_FILE

    # ------------------------------------------------------------------ producers' side

    def put(self, entry: Entry) -> None:
        """Hand over one entry; never blocks, never raises on database trouble."""
        self._queue.put(entry)

    def put_many(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            self._queue.put(e)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="andreas-delivery", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float | None = None) -> bool:
        """Flush what is queued (database or spool) and end the thread; True when done."""
        self._stopping.set()
        self._queue.put(_STOP)
        if self._thread is None:
            return True
        self._thread.join(timeout_s if timeout_s is not None else self.shutdown_s + 30.0)
        return not self._thread.is_alive()

    # ------------------------------------------------------------------ the writer thread

    def _run(self) -> None:
        try:
            while True:
                batch, stop = self._collect()
                try:
                    if batch:
                        self._handle(batch)
                    elif self.stats.mode is DeliveryMode.SPOOL and self._clock() >= self._retry_at:
                        self._replay()
                except Exception:
                    log.exception("delivery: unexpected error; the batch goes to the spool")
                    self.stats.mode = DeliveryMode.SPOOL
                    self._retry_at = self._clock() + self.backoff.max_s
                    self._to_spool(batch)
                if stop:
                    break
            self._shutdown()
        except Exception:
            log.exception("delivery thread failed; spooling what is queued")
            self._spool_rest()
        finally:
            self.spool.close()

    def _collect(self) -> tuple[list[Entry], bool]:
        """Block for the first entry (at most batch_s, so retries still happen), then
        gather until batch_rows or batch_s after the first one."""
        batch: list[Entry] = []
        try:
            first = self._queue.get(timeout=self.batch_s)
        except queue.Empty:
            return batch, False
        if first is _STOP:
            return batch, True
        batch.append(first)
        deadline = self._clock() + self.batch_s
        while len(batch) < self.batch_rows:
            remaining = deadline - self._clock()
            try:
                item = self._queue.get(timeout=max(0.0, remaining)) if remaining > 0 \
                    else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return self._data(batch), True
            batch.append(item)
        return self._data(batch), self._stopping.is_set() and self._queue.empty()

    def _data(self, batch: list[Entry]) -> list[Entry]:
        """Heartbeats leave the batch: the latest one rides along with the next write."""
        out = []
        for e in batch:
            if e.get("kind") == HEARTBEAT:
                t = float(e["t"])
                self._heartbeat = t if self._heartbeat is None else max(self._heartbeat, t)
            else:
                out.append(e)
        return out

    def _handle(self, batch: list[Entry]) -> None:
        if self.stats.mode is DeliveryMode.DIRECT:
            try:
                self._write(batch)
                self.stats.written += len(batch)
                return
            except DeliveryError as e:
                if e.kind is FaultKind.DATA:
                    stored, processed, err = self._isolate(batch, e)
                    self.stats.written += stored
                    if err is None:
                        return
                    batch, e = batch[processed:], err
                self._enter_spool(e)
        self._to_spool(batch)
        if self._clock() >= self._retry_at:
            self._replay()

    def _write(self, entries: Sequence[Entry]) -> None:
        heartbeat = self._heartbeat
        self.writer.write(entries, heartbeat_t=heartbeat)
        self._stored(entries)
        newest = max((e["t"] for e in entries if isinstance(e.get("t"), (int, float))),
                     default=None)
        if newest is not None and (self.stats.stored_t is None or newest > self.stats.stored_t):
            self.stats.stored_t = float(newest)
        if heartbeat is not None and self._heartbeat == heartbeat:
            self._heartbeat = None
        if self._error_logged is not None:
            self._error_logged = None

    def _stored(self, entries: Sequence[Entry]) -> None:
        if self.on_stored is not None and entries:
            try:
                self.on_stored(entries)
            except Exception:
                log.exception("delivery: the stored-records callback failed")

    def _enter_spool(self, e: DeliveryError) -> None:
        self.stats.mode = DeliveryMode.SPOOL
        self.stats.outages += 1
        self.stats.last_error = str(e)
        self._failures = 0
        self._schedule_retry(e)
        log.warning("database unavailable (%s: %s); spooling to %s, retry in %.0f s",
                    e.kind, e, self.spool.directory, self._retry_at - self._clock())

    def _schedule_retry(self, e: DeliveryError) -> None:
        backoff = self.refused_backoff if e.kind is FaultKind.REFUSED else self.backoff
        self._retry_at = self._clock() + backoff.delay_s(self._failures)
        self._failures += 1
        key = (e.kind, str(e))
        if e.kind is FaultKind.REFUSED and key != self._error_logged:
            log.error("the database refuses this agent's writes: %s; records are kept in the "
                      "spool until this is fixed", e)
        self._error_logged = key

    def _to_spool(self, batch: list[Entry]) -> None:
        taken = self.spool.append(batch)
        self.spool.flush()
        self._stored(batch)       # refused ones too: a mark past a lost sample undercharges
        self.stats.spooled += taken
        self.stats.refused += len(batch) - taken

    def _replay(self) -> bool:
        """Deliver the spool in order; True when it is empty (back to direct writes)."""
        while self.spool.pending:
            chunk = self.spool.peek(self.replay_rows)
            if not chunk:
                break
            entries = [e for _, e in chunk]
            try:
                self._write(entries)
                done = len(entries)
            except DeliveryError as e:
                if e.kind is not FaultKind.DATA:
                    self.stats.last_error = str(e)
                    self._schedule_retry(e)
                    log.info("database still unavailable (%s); %d record(s) spooled, next "
                             "retry in %.0f s", e, self.spool.pending,
                             self._retry_at - self._clock())
                    return False
                done, processed, err = self._isolate(entries, e)
                if err is not None:
                    if processed:
                        self.spool.commit(chunk[processed - 1][0])
                    self.stats.replayed += done
                    self._schedule_retry(err)
                    return False
            self.spool.commit(chunk[-1][0])
            self.stats.replayed += done
        if self.stats.mode is DeliveryMode.SPOOL:
            log.info("database back: the spool is delivered in order (%d record(s) in all); "
                     "direct writes resumed", self.stats.replayed)
        self.stats.mode = DeliveryMode.DIRECT
        self._failures = 0
        return True

    def _isolate(self, entries: Sequence[Entry],
                 error: DeliveryError) -> tuple[int, int, DeliveryError | None]:
        """Write entries one at a time; set aside those the database refuses as data.

        Returns (stored, processed, interruption): when the database goes away on the way
        (a non-data error), ``entries[processed:]`` were not handled and the error says why.
        """
        stored = 0
        log.error("the database rejected a batch of %d record(s) (%s); finding the bad ones",
                  len(entries), error)
        for i, e in enumerate(entries):
            try:
                self._write([e])
                stored += 1
            except DeliveryError as err:
                if err.kind is not FaultKind.DATA:
                    return stored, i, err
                self._reject(e, err)
        return stored, len(entries), None

    def _reject(self, entry: Entry, error: DeliveryError) -> None:
        self.stats.rejected += 1
        log.error("record set aside in %s (the database refuses it: %s): %s",
                  self._rejected_path, error, json.dumps(entry)[:300])
        try:
            size = self._rejected_path.stat().st_size if self._rejected_path.exists() else 0
            if size < MAX_REJECTED_BYTES:
                with self._rejected_path.open("a") as f:
                    f.write(json.dumps({"t": time.time(), "error": str(error),
                                        "entry": entry}) + "\n")
        except OSError as e:
            log.error("cannot write %s: %s", self._rejected_path, e)

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        """Everything still queued: to the database if it answers in time, else spooled."""
        rest = self._data(self._drain())
        deadline = self._clock() + self.shutdown_s
        if self.stats.mode is DeliveryMode.SPOOL and self.spool.pending:
            if rest:
                self._to_spool(rest)
                rest = []
            self._retry_at = 0.0
            while self._clock() < deadline and not self._replay():
                time.sleep(min(0.5, max(0.0, deadline - self._clock())))
        if rest or self._heartbeat is not None:
            if self.stats.mode is DeliveryMode.DIRECT:
                try:
                    self._write(rest)
                    self.stats.written += len(rest)
                    rest = []
                except DeliveryError as e:
                    left: DeliveryError | None = e      # None: all isolated
                    if e.kind is FaultKind.DATA:
                        stored, processed, left = self._isolate(rest, e)
                        self.stats.written += stored
                        rest = rest[processed:]
                    if left is not None:
                        log.warning("database unavailable at shutdown (%s): spooling %d "
                                    "record(s)", left, len(rest))
            if rest:
                self._to_spool(rest)
        self.spool.flush()
        if self.spool.pending:
            log.warning("stopped with %d record(s) in the spool %s; they are delivered after "
                        "the next start", self.spool.pending, self.spool.directory)

    def _drain(self) -> list[Entry]:
        out: list[Entry] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return out
            if item is not _STOP:
                out.append(item)

    def _spool_rest(self) -> None:
        try:
            rest = self._data(self._drain())
            if rest:
                self._to_spool(rest)
            self.spool.flush()
        except Exception:
            log.exception("could not spool the remaining records")
