"""The agent's local spool: where records wait while the database cannot be reached.

Why it looks like this (no sample lost, none duplicated):

- **Append-only JSON lines**, one record per line, each with a sequence number that only
  grows (``{"seq": 17, "entry": {...}}``). Lines are human-readable for an operator
  looking at a stuck spool, and a torn last line (a crash mid-write) is easy to detect
  and cut off: it was never acknowledged, because :meth:`Spool.flush` (``fsync``) had not
  returned.
- **Segments** (``seg-<first seq>.jsonl``, at most ``segment_bytes`` each) so space is
  given back as soon as a segment has been delivered, without rewriting files.
- **A committed-sequence file** (``committed``, replaced atomically: write, fsync,
  rename, fsync the directory) records the last sequence number the database has
  acknowledged. Replay starts after it, in sequence order. A crash between the database
  commit and this file's update replays that batch once more; the store's inserts skip
  rows they already hold (primary keys of samples and gaps, the unique key of epoch
  events), so the replayed batch is not duplicated. Neither lost nor duplicated.
- **Bounded** (default 1 GiB, counted over the segment files): warnings at 80 % and 90 %;
  when full, new records are **refused loudly** (an error in the log, a counter in
  ``state.json`` that ``andreas-agent --check`` prints), never dropped silently and
  never allowed to fill the disk.
- One process per spool directory (an exclusive ``flock`` on ``lock``); one thread uses a
  :class:`Spool` (the delivery thread), so there is no locking inside.

:func:`inspect_spool` reads the state of a spool from another process without touching
it (``--check``).
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andreas.infra.fileio import fsync_dir, replace_atomic
from agents.spool_files import (_STATE, SpoolError, _open_segment, _parse, _read_committed,
                                 _read_state, _segment_files, _write_committed)

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 1 << 30            # 1 GiB
MAX_SEGMENT_BYTES = 64 << 20           # 64 MiB: space is given back a segment at a time
WARN_LEVELS = (0.8, 0.9)
_LOCK = "lock"


@dataclass(frozen=True, kw_only=True)
class SpoolState:
    """What ``--check`` and the daemon's log say about a spool."""

    path: str
    bytes: int
    max_bytes: int
    segments: int
    committed_seq: int
    last_seq: int
    refused: int = 0
    last_refused_t: float | None = None
    corrupt_lines: int = 0
    refusing: bool = False          # the last record offered did not fit

    @property
    def pending(self) -> int:
        """Records written to the spool and not yet acknowledged by the database."""
        return max(0, self.last_seq - self.committed_seq)

    @property
    def usage(self) -> float:
        return self.bytes / self.max_bytes if self.max_bytes else 0.0

    @property
    def full(self) -> bool:
        return self.refusing or self.bytes >= self.max_bytes

    def describe(self) -> str:
        text = (f"spool {self.path}: {self.pending} record(s) waiting for the database, "
                f"{_size(self.bytes)} of {_size(self.max_bytes)} ({self.usage:.0%})")
        if self.full:
            text += ("; FULL: new records are REFUSED (lost) until the database is back; "
                     "restore the connection or raise [spool] max_size")
        elif self.usage >= WARN_LEVELS[0]:
            text += "; WARNING: nearly full (new records are refused when full)"
        if self.refused:
            when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.last_refused_t))
                    if self.last_refused_t else "an unknown time")
            text += f"; {self.refused} record(s) were refused in all, the last at {when}"
        if self.corrupt_lines:
            text += f"; {self.corrupt_lines} corrupt line(s) skipped (see the daemon log)"
        return text


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n} B"


@dataclass
class _Segment:
    first_seq: int
    path: Path
    size: int


class Spool:
    """A bounded, durable FIFO of JSON-serialisable dicts (the delivery side's entries).

    ``append`` -> ``flush`` (durable) ... ``peek`` -> write them to the database ->
    ``commit(last seq)``. Only entries after the committed sequence are ever returned.
    """

    def __init__(self, directory: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 segment_bytes: int | None = None, fsync: bool = True,
                 clock: Any = time.time) -> None:
        if max_bytes <= 0:
            raise SpoolError(f"spool max size must be > 0 bytes, got {max_bytes}")
        self.directory = Path(directory)
        self.max_bytes = int(max_bytes)
        self.segment_bytes = int(segment_bytes or max(4096, min(MAX_SEGMENT_BYTES,
                                                                self.max_bytes // 8)))
        self._fsync = fsync
        self._clock = clock
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SpoolError(f"spool directory {self.directory}: cannot create it "
                             f"({e.strerror}); set [spool] path or ANDREAS_SPOOL_DIR") from None
        self._lock_file = self._lock()
        try:
            self.committed_seq = _read_committed(self.directory)
        except BaseException:
            self._lock_file.close()           # refused: the lock goes with it
            raise
        self._segments = self._scan()
        self.last_seq = self.committed_seq
        self.corrupt_lines = 0
        self.unwritable = 0
        self.disk_errors = 0             # records the disk refused (full, read-only): lost
        self._disk_logged_at = -1e300
        self._recover_tail()
        # the read cursor: (segment index, byte offset) of the first record after committed
        self._cursor: tuple[int, int] | None = None
        self._peeked: list[tuple[int, int, int]] = []   # (seq, segment index, end offset)
        self._out: Any = None
        self._level = 0                  # warning thresholds already logged (0, 1, 2)
        state = _read_state(self.directory)
        self.refused = int(state.get("refused", 0))
        self.last_refused_t: float | None = state.get("last_refused_t")
        self._refusing = bool(state.get("refusing", False))
        self._refused_logged_at = -1e300
        self._refused_since_log = 0
        self._drop_delivered()
        if self.pending:
            log.warning("spool %s: %d record(s) from an earlier run wait for the database",
                        self.directory, self.pending)

    # ------------------------------------------------------------------ public

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def pending(self) -> int:
        return self.last_seq - self.committed_seq

    def state(self) -> SpoolState:
        return SpoolState(path=str(self.directory), bytes=self.bytes, max_bytes=self.max_bytes,
                          segments=len(self._segments), committed_seq=self.committed_seq,
                          last_seq=self.last_seq, refused=self.refused,
                          last_refused_t=self.last_refused_t, corrupt_lines=self.corrupt_lines,
                          refusing=self._refusing)

    def append(self, entries: Iterable[Mapping[str, Any]]) -> int:
        """Append entries (not yet durable: call :meth:`flush`); returns how many were
        taken. When the spool is full the rest are refused: counted and logged loudly."""
        taken = refused = 0
        for entry in entries:
            try:
                line = (json.dumps({"seq": self.last_seq + 1, "entry": entry},
                                   separators=(",", ":"), allow_nan=False) + "\n").encode()
            except (TypeError, ValueError) as e:     # NaN, an object: a bug upstream
                self.unwritable += 1
                log.error("spool %s: a record that is not plain JSON was dropped (%s): %r",
                          self.directory, e, entry)
                continue
            if self.bytes + len(line) > self.max_bytes:
                refused += 1
                continue
            if self._refusing and not refused:
                self._refusing = False
                log.warning("spool %s takes records again (%d were refused in all)",
                            self.directory, self.refused)
                self._write_state()
            if not self._write_line(line):
                refused += 1                       # the disk refused it: lost, counted
                continue
            self.last_seq += 1
            taken += 1
        if refused:
            self._refuse(refused)
        self._check_level()
        return taken

    def _write_line(self, line: builtins.bytes) -> bool:
        """Append one line to the last segment; False (logged, the segment cut back to
        whole lines) when the disk refuses it: full, read-only, gone."""
        size = self._segments[-1].size if self._segments else 0
        try:
            out = self._writable(len(line))
            size = self._segments[-1].size
            written = out.write(line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")
        except OSError as e:
            self._disk_error(e, size)
            return False
        self._segments[-1].size += len(line)
        return True

    def _disk_error(self, e: OSError, size: int) -> None:
        """A write failed: cut a torn line off, close the segment (the next write opens it
        again), and say so at most once a minute."""
        if self._out is not None:
            try:
                os.ftruncate(self._out.fileno(), size)
            except OSError:
                pass
            try:
                self._out.close()
            except OSError:
                pass
            self._out = None
        now = self._clock()
        self.disk_errors += 1
        if now - self._disk_logged_at >= 60.0:
            self._disk_logged_at = now
            log.error("spool %s: cannot write (%s): new records are LOST until the disk "
                      "takes writes again (%d write(s) failed so far)", self.directory,
                      e.strerror or e, self.disk_errors)

    def flush(self) -> None:
        """Make every appended entry durable (fsync; lines are written unbuffered). A
        failing fsync is logged, not raised: the records stay in the file."""
        if self._out is not None and self._fsync:
            try:
                os.fsync(self._out.fileno())
            except OSError as e:
                log.error("spool %s: fsync failed (%s)", self.directory, e.strerror or e)

    def peek(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` (seq, entry) pairs after the committed sequence, in order; the
        same ones again until :meth:`commit` moves past them."""
        self._peeked = []
        out: list[tuple[int, dict[str, Any]]] = []
        if not self.pending:
            return out
        index, offset = self._cursor if self._cursor is not None else self._locate()
        expected = self.committed_seq + 1
        while index < len(self._segments) and len(out) < limit:
            seg = self._segments[index]
            with _open_segment(seg.path) as f:
                f.seek(offset)
                while len(out) < limit:
                    line = f.readline()
                    if not line:
                        break
                    offset += len(line)
                    record = _parse(line)
                    if record is None or record[0] < expected:
                        self._corrupt(seg.path, offset - len(line), record)
                        continue
                    seq, entry = record
                    if seq != expected:
                        log.error("spool %s: sequence jumps from %d to %d (records lost "
                                  "outside the agent?)", seg.path, expected - 1, seq)
                    expected = seq + 1
                    out.append((seq, entry))
                    self._peeked.append((seq, index, offset))
            if len(out) < limit:
                index, offset = index + 1, 0
        return out

    def commit(self, seq: int) -> None:
        """The database holds every entry up to ``seq`` (one returned by the last peek):
        record it durably, then give back the segments that are fully delivered."""
        position = next(((i, off) for s, i, off in self._peeked if s == seq), None)
        if position is None:
            raise ValueError(f"commit({seq}): not a sequence number of the last peek")
        try:
            _write_committed(self.directory, seq, self._fsync)
        except OSError as e:        # a full disk: a restart replays these; the store skips
            self._disk_error(e, self._segments[-1].size if self._segments else 0)
        self.committed_seq = seq
        self._cursor = position
        self._peeked = [p for p in self._peeked if p[0] > seq]
        self._drop_delivered()
        self._check_level()

    def close(self) -> None:
        self.flush()
        if self._out is not None:
            self._out.close()
            self._out = None
        self._write_state()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    # ------------------------------------------------------------------ internals

    def _lock(self) -> Any:
        try:
            fd = os.open(self.directory / _LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise SpoolError(f"spool {self.directory}: cannot open its lock file "
                             f"({e.strerror}; a symlink is never followed)") from None
        f = os.fdopen(fd, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            f.close()
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise SpoolError(f"spool {self.directory} is in use by another andreas-agent "
                                 "(one agent per spool directory)") from None
            raise SpoolError(f"spool {self.directory}: cannot lock ({e.strerror})") from None
        return f

    def _scan(self) -> list[_Segment]:
        return [_Segment(first, p, size)
                for first, p, size in _segment_files(self.directory, move_aside=True)]

    def _recover_tail(self) -> None:
        """Find the last sequence number; cut a torn last line (crash mid-append)."""
        while self._segments:
            seg = self._segments[-1]
            with _open_segment(seg.path) as f:
                data = f.read()
            good, last, offset = 0, None, 0
            for line in data.splitlines(keepends=True):   # a bad line *inside* is kept:
                offset += len(line)                        # peek skips it, loudly
                record = _parse(line) if line.endswith(b"\n") else None
                if record is not None:
                    good, last = offset, record[0]
            if good < len(data):
                log.warning("spool %s: cutting %d byte(s) of a record torn by a crash at "
                            "offset %d (it was never acknowledged)", seg.path,
                            len(data) - good, good)
                with _open_segment(seg.path, os.O_RDWR) as f:
                    f.truncate(good)
                    if self._fsync:
                        os.fsync(f.fileno())
                seg.size = good
            if last is None:                     # empty segment: remove it, look further back
                seg.path.unlink()
                self._segments.pop()
                continue
            self.last_seq = max(self.committed_seq, last)
            return

    def _locate(self) -> tuple[int, int]:
        """(segment index, offset) of the first record after the committed sequence."""
        target = self.committed_seq + 1
        for index in range(len(self._segments) - 1, -1, -1):
            if self._segments[index].first_seq <= target:
                break
        else:
            index = 0
        offset = 0
        with _open_segment(self._segments[index].path) as f:
            for line in f:
                record = _parse(line)
                if record is not None and record[0] >= target:
                    break
                offset += len(line)
        return index, offset

    def _writable(self, size: int) -> Any:
        """The open last segment, rotated when this line would make it too big."""
        if self._out is not None and self._segments[-1].size + size > self.segment_bytes \
                and self._segments[-1].size > 0:
            self.flush()
            self._out.close()
            self._out = None
        if self._out is None:
            if not self._segments or self._segments[-1].size + size > self.segment_bytes:
                path = self.directory / f"seg-{self.last_seq + 1:020d}.jsonl"
                self._out = _open_segment(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                self._segments.append(_Segment(self.last_seq + 1, path, 0))
                self._fsync_dir()
            else:
                self._out = _open_segment(self._segments[-1].path,
                                          os.O_WRONLY | os.O_APPEND)
        return self._out

    def _drop_delivered(self) -> None:
        """Delete the segments whose every record the database has acknowledged."""
        while self._segments:
            seg = self._segments[0]
            last = (self._segments[1].first_seq - 1 if len(self._segments) > 1
                    else self.last_seq)
            if last > self.committed_seq:
                break
            if len(self._segments) == 1 and self._out is not None:
                self._out.close()
                self._out = None
            seg.path.unlink(missing_ok=True)
            self._segments.pop(0)
            if self._cursor is not None:   # it pointed into (the end of) the deleted one?
                self._cursor = ((0, 0) if self._cursor[0] == 0
                                else (self._cursor[0] - 1, self._cursor[1]))
            self._peeked = [(s, i - 1, off) for s, i, off in self._peeked if i > 0]
        if not self._segments:
            self._cursor = None
            self._peeked = []

    def _fsync_dir(self) -> None:
        if self._fsync:
            fsync_dir(self.directory)

    def _corrupt(self, path: Path, offset: int, record: tuple | None) -> None:
        self.corrupt_lines += 1
        what = "unreadable" if record is None else f"out of order (seq {record[0]})"
        log.error("spool %s: %s line at offset %d skipped (the disk corrupted it?)", path,
                  what, offset)

    def _check_level(self) -> None:
        """Warn once per threshold crossed upwards; re-arm when well below the first."""
        usage = self.bytes / self.max_bytes
        level = sum(usage >= w for w in WARN_LEVELS)
        for crossed in WARN_LEVELS[self._level:level]:
            log.warning("spool %s is over %.0f %% full (%s of %s): the database has been "
                        "unreachable for a while; when full, new records are REFUSED",
                        self.directory, crossed * 100, _size(self.bytes),
                        _size(self.max_bytes))
        if level > self._level:
            self._level = level
        elif self._level and usage < WARN_LEVELS[0] - 0.1:
            log.info("spool %s down to %.0f %% full", self.directory, usage * 100)
            self._level = 0

    def _refuse(self, count: int) -> None:
        """Refused records are lost: say so loudly, at most once a minute, with counts."""
        now = self._clock()
        self.refused += count
        self.last_refused_t = now
        self._refused_since_log += count
        if not self._refusing:
            self._refusing = True
            self._refused_logged_at = -1e300
        if now - self._refused_logged_at >= 60.0:
            log.error("SPOOL FULL or its disk refusing writes (%s of %s at %s): %d new "
                      "record(s) REFUSED and lost since the last message (%d in all); the "
                      "database is still unreachable",
                      _size(self.bytes), _size(self.max_bytes), self.directory,
                      self._refused_since_log, self.refused)
            self._refused_logged_at = now
            self._refused_since_log = 0
            self._write_state()

    def _write_state(self) -> None:
        if not self.refused:
            return
        data = {"refused": self.refused, "last_refused_t": self.last_refused_t,
                "refusing": self._refusing}
        try:
            replace_atomic(self.directory / _STATE, json.dumps(data), durable=False)
        except OSError as e:                # a full disk: the counts stay in memory
            log.debug("spool %s: cannot record its state (%s)", self.directory, e)


def inspect_spool(directory: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> SpoolState:
    """A spool's state, read without locking or changing it (for ``--check``)."""
    directory = Path(directory)
    committed = _read_committed(directory) if directory.is_dir() else 0
    segments = _segment_files(directory) if directory.is_dir() else []
    last = committed
    if segments:
        with _open_segment(segments[-1][1]) as f:
            data = f.read()
        for line in reversed(data.splitlines()):
            record = _parse(line)
            if record is not None:
                last = max(last, record[0])
                break
    state = _read_state(directory) if directory.is_dir() else {}
    return SpoolState(path=str(directory), bytes=sum(s for _, _, s in segments),
                      max_bytes=max_bytes, segments=len(segments), committed_seq=committed,
                      last_seq=last, refused=int(state.get("refused", 0)),
                      last_refused_t=state.get("last_refused_t"),
                      refusing=bool(state.get("refusing", False)))


def parse_size(value: str | int, what: str = "size") -> int:
    """``1073741824``, ``"1GiB"``, ``"512 MiB"``, ``"10MB"`` -> bytes (InputError otherwise)."""
    from andreas.errors import InputError

    if isinstance(value, bool):
        raise InputError(f"{what} must be a size like 1GiB or 512MiB, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise InputError(f"{what} must be > 0, got {value}")
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", str(value), re.IGNORECASE)
    if not m:
        raise InputError(f"{what} must be a size like 1GiB or 512MiB, got {value!r}")
    number, unit = float(m.group(1)), (m.group(2) or "B").upper()
    factors = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
               "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
    size = int(number * factors[unit])
    if size <= 0:
        raise InputError(f"{what} must be > 0, got {value!r}")
    return size


__all__ = ["DEFAULT_MAX_BYTES", "Spool", "SpoolError", "SpoolState", "inspect_spool",
           "parse_size"]
