"""Delivery: batches to the database, spools while it is away, replays in order before
anything new, sets aside only what the database rejects as data, flushes on stop."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agents.delivery import Delivery
from agents.entries import heartbeat
from agents.spool import Spool
from agents.store_writer import DeliveryError


class StubWriter:
    """Records what reached 'the database'; ``down`` makes writes fail like a lost server."""

    def __init__(self) -> None:
        self.stored: list[int] = []
        self.batches: list[int] = []
        self.heartbeats: list[float] = []
        self.down: str | None = None
        self.bad: set[int] = set()
        self.lock = threading.Lock()
        self.delay = 0.0
        self.gate = threading.Event()        # cleared: every write blocks until it is set
        self.gate.set()

    def write(self, entries, heartbeat_t=None):
        self.gate.wait()
        time.sleep(self.delay)
        with self.lock:
            if self.down:
                raise DeliveryError(f"(2003) Can't connect ({self.down})", self.down)
            if any(e["i"] in self.bad for e in entries):
                raise DeliveryError("(1452) a foreign key constraint fails", "data")
            self.stored += [e["i"] for e in entries]
            self.batches.append(len(entries))
            if heartbeat_t is not None:
                self.heartbeats.append(heartbeat_t)


def entry(i: int) -> dict:
    return {"kind": "gpu", "i": i}


def make(tmp_path, writer, **kw) -> Delivery:
    options = dict(batch_rows=50, batch_s=0.05, backoff_s=0.05, max_backoff_s=0.2,
                   refused_backoff_s=0.2, shutdown_s=2.0)
    options.update(kw)
    d = Delivery(writer, Spool(tmp_path / "spool"), **options)
    d.start()
    return d


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_batches_and_the_latest_heartbeat(tmp_path):
    w = StubWriter()
    d = make(tmp_path, w)
    for i in range(120):
        d.put(entry(i))
    d.put(heartbeat(5.0))
    d.put(heartbeat(7.0))
    assert d.stop()
    assert w.stored == list(range(120))
    assert max(w.batches) <= 50
    assert w.heartbeats[-1] == 7.0
    assert d.stats.written == 120 and d.stats.spooled == 0


def test_put_never_waits_for_the_database(tmp_path):
    """Every put returns while the database is stuck in a write (no timing: the write
    cannot finish before the test releases it)."""
    w = StubWriter()
    w.gate.clear()
    d = make(tmp_path, w, batch_rows=500)
    for i in range(1000):
        d.put(entry(i))
    assert w.stored == []                     # all 1000 puts returned, nothing written yet
    w.gate.set()
    assert d.stop(timeout_s=60)
    assert w.stored == list(range(1000))


@pytest.mark.parametrize("kind", ["transient", "refused"])
def test_outage_spools_then_replays_in_order_before_new_entries(tmp_path, kind, caplog):
    w = StubWriter()
    d = make(tmp_path, w)
    for i in range(30):
        d.put(entry(i))
    wait_for(lambda: len(w.stored) == 30)
    w.down = kind
    for i in range(30, 200):
        d.put(entry(i))
        time.sleep(0.001)
    wait_for(lambda: d.stats.spooled >= 170)
    assert d.stats.mode == "spool" and d.spool.pending > 0
    w.down = None
    for i in range(200, 260):
        d.put(entry(i))
    wait_for(lambda: len(w.stored) == 260)
    assert d.stop()
    assert w.stored == list(range(260))                # in order, each once
    assert d.stats.mode == "direct" and d.stats.outages == 1
    assert d.spool.pending == 0 and not list((tmp_path / "spool").glob("seg-*"))
    if kind == "refused":
        assert "the database refuses this agent's writes" in caplog.text


def test_rejected_rows_are_set_aside_and_the_rest_stored(tmp_path, caplog):
    w = StubWriter()
    w.bad = {7, 8}
    d = make(tmp_path, w)
    for i in range(20):
        d.put(entry(i))
    assert d.stop()
    assert w.stored == [i for i in range(20) if i not in (7, 8)]
    rejected = [json.loads(line) for line in
                (tmp_path / "spool" / "rejected.jsonl").read_text().splitlines()]
    assert [r["entry"]["i"] for r in rejected] == [7, 8]
    assert "(1452)" in rejected[0]["error"] and d.stats.rejected == 2
    assert "record set aside" in caplog.text


def test_rejected_rows_in_a_replay_do_not_block_the_spool(tmp_path):
    w = StubWriter()
    w.down = "transient"
    d = make(tmp_path, w)
    for i in range(40):
        d.put(entry(i))
    wait_for(lambda: d.stats.spooled == 40)
    w.bad = {13}
    w.down = None
    wait_for(lambda: d.spool.pending == 0)
    assert d.stop()
    assert w.stored == [i for i in range(40) if i != 13]


def test_stop_during_an_outage_spools_everything_for_the_next_start(tmp_path):
    w = StubWriter()
    w.down = "transient"
    d = make(tmp_path, w, shutdown_s=0.3)
    for i in range(75):
        d.put(entry(i))
    d.put(heartbeat(1.0))
    assert d.stop()
    assert w.stored == [] and d.spool.state().pending == 75
    w.down = None
    d2 = make(tmp_path, w)                             # the next start
    assert d2.stats.mode == "spool"
    d2.put(entry(75))
    assert d2.stop()
    assert w.stored == list(range(76))


def test_stop_flushes_to_a_database_that_answers(tmp_path):
    w = StubWriter()
    d = make(tmp_path, w, batch_s=5.0)                 # nothing would be written for 5 s
    for i in range(10):
        d.put(entry(i))
    started = time.monotonic()
    assert d.stop()
    assert w.stored == list(range(10)) and time.monotonic() - started < 5.0
