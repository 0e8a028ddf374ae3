"""The spool's files on disk: numbered JSON-lines segments, the committed sequence, the
state file; reading them back line by line and moving aside what cannot be read.

Apart from ``spool.py`` (the writer and its locking) so that both stay small; the layout
is described there.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from andreas.errors import AndreasError
from andreas.infra.fileio import replace_atomic

log = logging.getLogger("agents.spool")    # the spool's own log

_SEGMENT = re.compile(r"seg-(\d{20})\.jsonl")
_COMMITTED = "committed"
_STATE = "state.json"


class SpoolError(AndreasError):
    """The spool directory cannot be used (permissions, another agent holds it)."""


def _open_segment(path: Path, flags: int = os.O_RDONLY) -> Any:
    """A segment file, unbuffered, never through a symlink (a link planted in the spool
    must not make the agent write, cut or read another file) and only if it is a regular
    file (a FIFO or a directory named like a segment would hang or fail the reads)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path.name} is not a regular file")
        os.set_blocking(fd, True)
        mode = "rb" if flags & (os.O_WRONLY | os.O_RDWR) == 0 else (
            "ab" if flags & os.O_APPEND else "r+b")
        return os.fdopen(fd, mode, buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _segment_files(directory: Path, *, move_aside: bool = False
                   ) -> list[tuple[int, Path, int]]:
    """(first seq, path, size) of the segment files, in order; anything else named like a
    segment (a symlink, a directory, a FIFO) is never opened, loudly, and with
    ``move_aside`` renamed to ``<name>.ignored`` (a rename never follows a link) so the
    spool can write its own segment of that name."""
    out = []
    for p in directory.iterdir():
        m = _SEGMENT.fullmatch(p.name)
        if not m:
            continue
        try:
            info = p.lstat()
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            log.error("spool %s: %s is not a regular file (a symlink, directory or FIFO); "
                      "ignored, never followed%s", directory, p.name,
                      _move_aside(p) if move_aside else "")
            continue
        out.append((int(m.group(1)), p, info.st_size))
    return sorted(out, key=lambda s: s[0])


def _move_aside(path: Path) -> str:
    aside = path.with_name(f"{path.name}.ignored-{os.urandom(3).hex()}")
    try:
        os.rename(path, aside)
    except OSError as e:
        return f"; cannot move it aside ({e.strerror}): remove it"
    return f"; moved aside to {aside.name}"


def _parse(line: bytes) -> tuple[int, dict[str, Any]] | None:
    try:
        record = json.loads(line)
        seq, entry = record["seq"], record["entry"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if not isinstance(seq, int) or not isinstance(entry, dict):
        return None
    return seq, entry


def _read_small(path: Path, limit: int = 4096) -> bytes:
    """A small spool file (never through a symlink, only a regular file)."""
    with _open_segment(path) as f:
        return f.read(limit)


def _read_committed(directory: Path) -> int:
    path = directory / _COMMITTED
    try:
        text = _read_small(path, 64).decode("ascii").strip()
        if not re.fullmatch(r"[0-9]{0,19}", text):
            raise ValueError("not a sequence number")
        return int(text or 0)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as e:     # never the file's content in the message
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not a number"
        raise SpoolError(f"spool {path}: unreadable committed sequence ({why}); fix or "
                         "remove it (removing replays every spooled record; the store skips "
                         "those it already holds)") from None


def _write_committed(directory: Path, seq: int, fsync: bool) -> None:
    replace_atomic(directory / _COMMITTED, f"{seq}\n", durable=fsync)


def _read_state(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads(_read_small(directory / _STATE))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}
