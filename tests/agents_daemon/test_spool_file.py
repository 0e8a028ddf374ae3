"""The spool: ordered, bounded, durable; a crash at any moment neither loses an
acknowledged record nor stores one twice."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.spool import Spool, SpoolError, inspect_spool, parse_size
from agents.store_writer import StoreWriter
from andreas.store.registry import agent_engine
from andreas.errors import InputError

from .helpers_agent import gpu_entry, power_of, spec, sqlite_store, stored

ROOT = Path(__file__).resolve().parents[2]


def entries(a: int, b: int) -> list[dict]:
    return [{"kind": "x", "i": i, "pad": "p" * 40} for i in range(a, b)]


def drain(spool: Spool, limit: int = 3) -> list[int]:
    out = []
    while True:
        batch = spool.peek(limit)
        if not batch:
            return out
        out += [e["i"] for _, e in batch]
        spool.commit(batch[-1][0])


def test_fifo_across_segments_and_reopen(tmp_path):
    spool = Spool(tmp_path, max_bytes=1 << 20, segment_bytes=300)
    assert spool.append(entries(0, 20)) == 20
    spool.flush()
    assert len(list(tmp_path.glob("seg-*.jsonl"))) > 3
    first = spool.peek(4)
    assert [s for s, _ in first] == [1, 2, 3, 4]
    assert spool.peek(4) == first                        # the same until committed
    spool.commit(first[1][0])                            # part of a peek
    assert [e["i"] for _, e in spool.peek(3)] == [2, 3, 4]
    spool.close()
    spool = Spool(tmp_path, max_bytes=1 << 20, segment_bytes=300)   # a restart
    assert (spool.committed_seq, spool.last_seq, spool.pending) == (2, 20, 18)
    spool.append(entries(20, 25))
    assert drain(spool) == list(range(2, 25))
    assert spool.pending == 0 and list(tmp_path.glob("seg-*.jsonl")) == []
    spool.append(entries(25, 26))                        # numbering goes on
    assert spool.peek(1)[0][0] == 26
    spool.close()


def test_delivered_segments_are_deleted_as_they_complete(tmp_path):
    spool = Spool(tmp_path, max_bytes=1 << 20, segment_bytes=300)
    spool.append(entries(0, 30))
    before = spool.bytes
    batch = spool.peek(12)
    spool.commit(batch[-1][0])
    assert 0 < spool.bytes < before
    assert spool.peek(1)[0][1]["i"] == 12
    spool.close()


def test_one_agent_per_spool(tmp_path):
    spool = Spool(tmp_path)
    with pytest.raises(SpoolError, match="in use by another andreas-agent"):
        Spool(tmp_path)
    spool.close()
    Spool(tmp_path).close()


def test_full_spool_refuses_loudly_and_says_so(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="agents.spool")
    spool = Spool(tmp_path, max_bytes=2000, segment_bytes=500)
    taken = spool.append(entries(0, 100))
    assert 0 < taken < 100 and spool.refused == 100 - taken
    levels = [r.getMessage() for r in caplog.records]
    assert any("over 80 % full" in m for m in levels) and any("over 90 % full" in m for m in levels)
    assert any("SPOOL FULL" in m and f"{100 - taken} new record(s) REFUSED" in m
               for m in levels)
    spool.flush()
    state = inspect_spool(tmp_path, 2000)
    assert state.pending == taken
    text = state.describe()
    assert "FULL: new records are REFUSED" in text and f"{100 - taken} record(s) were refused" \
        in text
    drain(spool)                                        # the database came back
    assert spool.append(entries(100, 101)) == 1
    spool.close()
    assert "FULL" not in inspect_spool(tmp_path, 2000).describe()
    assert json.loads((tmp_path / "state.json").read_text())["refused"] == 100 - taken


def test_a_torn_last_line_is_cut(tmp_path, caplog):
    spool = Spool(tmp_path)
    spool.append(entries(0, 3))
    spool.close()
    (seg,) = tmp_path.glob("seg-*.jsonl")
    with seg.open("ab") as f:
        f.write(b'{"seq":4,"entry":{"kind":"x","i":3')     # the crash came mid-write
    spool = Spool(tmp_path)
    assert "torn by a crash" in caplog.text
    assert spool.last_seq == 3
    spool.append(entries(3, 4))
    assert drain(spool) == [0, 1, 2, 3]
    spool.close()


def test_a_corrupt_line_inside_is_skipped_loudly(tmp_path, caplog):
    spool = Spool(tmp_path)
    spool.append(entries(0, 3))
    spool.close()
    (seg,) = tmp_path.glob("seg-*.jsonl")
    lines = seg.read_bytes().splitlines(keepends=True)
    seg.write_bytes(lines[0] + b"garbage\n" + b"".join(lines[1:]))
    spool = Spool(tmp_path)
    assert drain(spool) == [0, 1, 2]
    assert spool.corrupt_lines == 1 and "unreadable line" in caplog.text
    spool.close()


def test_sizes():
    assert parse_size("1GiB") == 1 << 30
    assert parse_size("512 MiB") == 512 << 20
    assert parse_size("10MB") == 10_000_000
    assert parse_size(4096) == 4096
    for bad in ("lots", "-1MiB", 0, True, "0"):
        with pytest.raises(InputError):
            parse_size(bad)


def test_crash_after_the_database_commit_replays_without_duplicates(tmp_path):
    url = sqlite_store(tmp_path)
    spool = Spool(tmp_path / "spool")
    spool.append([gpu_entry(i) for i in range(40)])
    spool.flush()
    writer = StoreWriter(agent_engine(url), spec=spec, self_register=True)
    batch = spool.peek(25)
    writer.write([e for _, e in batch])               # stored ...
    spool.close()                                     # ... and the agent dies before commit
    spool = Spool(tmp_path / "spool")
    assert spool.pending == 40
    while batch := spool.peek(10):
        writer.write([e for _, e in batch])
        spool.commit(batch[-1][0])
    writer.close()
    spool.close()
    assert stored(url) == (40, sum(power_of(i) for i in range(40)),
                           sum(int(power_of(i) * 1000) for i in range(40)), 40)


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path):
    """A real process appends, fsyncs, replays into SQLite and commits, and is SIGKILLed
    at random moments (after a random number of acknowledgements plus a random few ms:
    mid-append, mid-replay, mid-commit); it restarts after the last record it
    acknowledged. In the end every record is stored exactly once (raw rows and their
    minute aggregates agree)."""
    url = sqlite_store(tmp_path)
    total, rounds = 5000, 12
    worker = [sys.executable, str(Path(__file__).with_name("spool_kill_worker.py")),
              "--db", url, "--spool", str(tmp_path / "spool")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(5)
    acked = -1
    kills = 0

    def acks(path: Path) -> list[int]:
        return [int(line.split()[1]) for line in path.read_text().splitlines()
                if line.startswith("acked ")]

    for run in range(rounds + 1):
        log_path = tmp_path / f"worker-{run}.out"
        with log_path.open("w") as out:
            proc = subprocess.Popen(worker + ["--start", str(acked + 1), "--end", str(total)],
                                    stdout=out, text=True, env=env)
            if run < rounds:                       # the last run may finish
                wanted = rng.randint(2, 30)
                deadline = time.monotonic() + 60
                while len(acks(log_path)) < wanted and proc.poll() is None:
                    assert time.monotonic() < deadline, "the worker makes no progress"
                    time.sleep(0.002)
                time.sleep(rng.uniform(0.0, 0.02))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    kills += 1
            proc.wait(timeout=120)
        acked = max([acked, *acks(log_path)])
    assert kills >= rounds - 1, "the worker was not killed mid-run"
    done = subprocess.run(worker + ["--drain"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    n, power, energy, aggregated = stored(url)
    assert acked == total - 1
    assert n == total and aggregated == total
    assert power == sum(power_of(i) for i in range(total))
    assert energy == sum(int(power_of(i) * 1000) for i in range(total))


def test_a_record_that_is_not_json_is_dropped_loudly_not_fatally(tmp_path, caplog):
    spool = Spool(tmp_path)
    assert spool.append([{"i": 0}, {"i": float("nan")}, {"i": object()}, {"i": 3}]) == 2
    assert spool.unwritable == 2 and "not plain JSON" in caplog.text
    assert [e["i"] for _, e in spool.peek(10)] == [0, 3]
    spool.close()


# ------------------------------------------------------------------ issue 32, point 13
def _returns(fn, timeout_s: float = 30.0):
    """``fn()`` in a thread; fails (instead of hanging the suite) when it does not return."""
    import threading

    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:      # noqa: BLE001 - handed to the test
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    assert not t.is_alive(), f"{fn} hung"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_a_symlinked_segment_is_never_followed(tmp_path, caplog):
    """The spool followed a symlink named like a segment and truncated its target."""
    target = tmp_path / "precious.txt"
    target.write_text("not a spool line\n" * 3 + "half")
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    (spool_dir / "seg-00000000000000000001.jsonl").symlink_to(target)
    (spool_dir / "committed").symlink_to(target)
    with caplog.at_level(logging.ERROR, logger="agents.spool"), pytest.raises(SpoolError) as e:
        Spool(spool_dir)
    assert "not a spool line" not in str(e.value)              # never the file's content
    (spool_dir / "committed").unlink()
    spool = Spool(spool_dir)
    assert "not a regular file" in caplog.text and "never followed" in caplog.text
    assert spool.append(entries(0, 3)) == 3
    spool.flush()
    assert drain(spool) == [0, 1, 2]
    spool.close()
    assert target.read_text() == "not a spool line\n" * 3 + "half"
    (aside,) = spool_dir.glob("seg-00000000000000000001.jsonl.ignored-*")
    assert aside.is_symlink() and aside.resolve() == target


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_directory_or_fifo_named_like_a_segment_is_ignored(tmp_path, kind, caplog):
    """A directory or a FIFO named like a segment ended in a traceback or a hang."""
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    odd = spool_dir / "seg-00000000000000000005.jsonl"
    odd.mkdir() if kind == "directory" else os.mkfifo(odd)
    with caplog.at_level(logging.ERROR, logger="agents.spool"):
        spool = _returns(lambda: Spool(spool_dir))
        assert _returns(lambda: spool.append(entries(0, 2))) == 2
        spool.flush()
        assert _returns(lambda: drain(spool)) == [0, 1]
        state = _returns(lambda: inspect_spool(spool_dir))
        spool.close()
    assert "not a regular file" in caplog.text
    assert state.committed_seq == 2


def test_a_deeply_nested_line_is_a_corrupt_line(tmp_path, caplog):
    """A 100 000-deep nested line ended in a RecursionError traceback."""
    spool = Spool(tmp_path, fsync=False)
    spool.append(entries(0, 1))
    spool.close()
    seg = next(tmp_path.glob("seg-*.jsonl"))
    with seg.open("ab") as f:
        f.write(b"[" * 100_000 + b"\n")
        f.write(json.dumps({"seq": 2, "entry": {"kind": "x", "i": 1}}).encode() + b"\n")
    with caplog.at_level(logging.ERROR, logger="agents.spool"):
        spool = _returns(lambda: Spool(tmp_path, fsync=False))
        assert drain(spool) == [0, 1]
    assert spool.corrupt_lines == 1
    spool.close()


class _FullDisk:
    """Segment files whose writes fail with ENOSPC while ``full`` is set."""

    full = False

    def __init__(self, real):
        self.real = real

    def write(self, data):
        if _FullDisk.full:
            raise OSError(28, "No space left on device")
        return self.real.write(data)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __iter__(self):
        return iter(self.real)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()


def test_a_full_disk_loses_records_countably_and_the_delivery_thread_lives(tmp_path,
                                                                           monkeypatch,
                                                                           caplog):
    """On a full disk the delivery thread died (7 tracebacks) and samples were lost
    without being counted."""
    import agents.spool as spool_mod
    from agents.delivery import Delivery
    from agents.store_writer import DeliveryError

    real_open = spool_mod._open_segment
    monkeypatch.setattr(spool_mod, "_open_segment",
                        lambda path, flags=os.O_RDONLY: _FullDisk(real_open(path, flags)))

    class Down:
        def write(self, entries, heartbeat_t=None):
            raise DeliveryError("(2003) Can't connect", "transient")

    delivery = Delivery(Down(), Spool(tmp_path / "spool", fsync=False), batch_rows=10,
                        batch_s=0.05, backoff_s=0.05, max_backoff_s=0.1, shutdown_s=1.0)
    delivery.start()
    try:
        with caplog.at_level(logging.ERROR):
            delivery.put_many(entries(0, 5))
            _returns(lambda: _wait(lambda: delivery.stats.spooled == 5))
            _FullDisk.full = True
            delivery.put_many(entries(5, 12))
            _returns(lambda: _wait(lambda: delivery.stats.refused == 7))
            assert delivery._thread.is_alive()
            _FullDisk.full = False
            delivery.put_many(entries(12, 15))
            _returns(lambda: _wait(lambda: delivery.stats.spooled == 8))
    finally:
        _FullDisk.full = False
        delivery.stop(5.0)
    assert "Traceback" not in caplog.text and "No space left" in caplog.text
    assert delivery.spool.disk_errors == 7


def _wait(cond, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
    return True
