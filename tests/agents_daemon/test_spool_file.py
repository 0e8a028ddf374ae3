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
