"""agents/epochs.py, the pure part of epoch tracking: pairing, line splitting, Docker's
timestamp prefix. The tracker's threads: tests/agents/test_tracker.py; Docker times:
tests/executor/test_events.py."""

from __future__ import annotations

from typing import Any

from agents.epochs import EpochPairer, LineSplitter, split_timestamp
from agents.records import EpochRecord
from andreas.job import format_progress, parse_progress


def ev(epoch: int, event: str, t: float, job: str = "j1") -> Any:
    return parse_progress(format_progress(job, epoch, 9, event, t=t))


# --- pairing -------------------------------------------------------------------------

def pairer(**kw: Any) -> EpochPairer:
    return EpochPairer(job_id="j1", attempt=2, container_id="c" * 64, gpu_uuids=("GPU-a",), **kw)


def test_pairs_start_and_end() -> None:
    p = pairer()
    assert p.feed(ev(1, "start", 10.0)) is None
    assert p.open_epoch == 1
    r = p.feed(ev(1, "end", 12.5))
    assert r == EpochRecord(job_id="j1", attempt=2, epoch=1, start_s=10.0, end_s=12.5,
                            container_id="c" * 64, gpu_uuids=("GPU-a",))
    assert p.open_epoch is None and p.records == 1


def test_missing_start_uses_the_previous_epochs_end() -> None:
    p = pairer()
    p.feed(ev(1, "start", 10.0))
    p.feed(ev(1, "end", 11.0))
    r = p.feed(ev(2, "end", 13.0))                      # start line of epoch 2 lost
    assert (r.epoch, r.start_s, r.end_s) == (2, 11.0, 13.0)
    assert p.feed(ev(4, "end", 20.0)) is None           # epoch 3 unseen: no start known
    assert p.records == 2


def test_each_epoch_once_and_nonsense_dropped() -> None:
    emitted: set[int] = set()
    p = pairer(emitted=emitted)
    p.feed(ev(1, "start", 10.0))
    assert p.feed(ev(1, "end", 11.0)) is not None
    p.feed(ev(1, "start", 10.0))                        # the log read again
    assert p.feed(ev(1, "end", 11.0)) is None
    p.feed(ev(2, "start", 12.0))
    assert p.feed(ev(2, "end", 11.5)) is None           # ends before it starts
    assert p.feed(ev(3, "start", 13.0, job="other")) is None
    assert p.feed(ev(3, "end", 14.0, job="other")) is None
    assert emitted == {1}
    again = pairer(emitted=emitted)                     # a second run of the same attempt
    again.feed(ev(1, "start", 30.0))
    assert again.feed(ev(1, "end", 31.0)) is None


def test_abandoned_start_is_the_open_epoch_until_a_later_end() -> None:
    p = pairer()
    p.feed(ev(1, "start", 1.0))
    p.feed(ev(1, "end", 2.0))
    p.feed(ev(2, "start", 2.0))
    assert p.open_epoch == 2
    p.feed(ev(2, "start", 5.0))                         # restarted epoch: the latest start
    assert p.feed(ev(2, "end", 6.0)).start_s == 5.0


# --- lines and times -----------------------------------------------------------------

def test_line_splitter_joins_chunks_and_keeps_partial_lines() -> None:
    s = LineSplitter()
    assert list(s.feed(b"ab")) == []
    assert list(s.feed(b"c\r\nde\nf")) == ["abc", "de"]
    assert list(s.feed("g\xe9\n")) == ["fg\xe9"]
    assert list(s.feed(b"\xff\xfe tail")) == []
    assert list(s.flush()) == ["\ufffd\ufffd tail"]
    assert list(s.flush()) == []


def test_timestamps_split_off() -> None:
    assert split_timestamp("2026-11-22T13:50:17Z hello world") == (1795355417.0, "hello world")
    assert split_timestamp("hello world") == (None, "hello world")
    assert split_timestamp("2026-11-22T13:50:17Z") == (None, "2026-11-22T13:50:17Z")
