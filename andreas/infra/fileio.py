"""Atomic files: a temporary file in the same directory, then a rename, so a reader never
sees half a file and a failed write leaves the old one in place.

The one writer of the project (``andreas/job.py`` keeps its own: it must stay stdlib-only
and importable alone inside training images). ``durable`` adds the fsyncs that make the
new file survive a power cut (the file before the rename, the directory after it); the
agent's spool turns them off in tests to stay fast.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from andreas.errors import InputError


def replace_atomic(path: str | Path, data: str | bytes, *, durable: bool = True) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; raises OSError.

    A new file gets the mode a plain open() would give (0o666 less the umask: the
    temporary is created with it, so the process-wide umask is never changed under other
    threads); a file replaced keeps its permission bits, so a report written over a 0600
    file stays private, as it would with open(path, "w").
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    try:
        keep: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        keep = None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if keep is not None else 0o666)
    try:
        if keep is not None:
            os.fchmod(fd, keep)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(target.parent)
    return target


def write_text_atomic(path: str | Path, text: str, *, label: str | None = None) -> Path:
    """:func:`replace_atomic` for files a user asked for: an OSError becomes one
    InputError line naming ``label`` (default: the path)."""
    try:
        return replace_atomic(path, text)
    except OSError as e:
        raise InputError(f"{label or path}: cannot write: {e.strerror or e}") from None


def fsync_dir(directory: str | Path) -> None:
    """Make the directory's entries (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MAX_DOCUMENT_BYTES = 256 << 20       # a snapshot, a trace, a job file, a config file


def read_capped(path: str | Path, *, what: str, limit: int = MAX_DOCUMENT_BYTES,
                label: str | None = None) -> bytes:
    """The bytes of a document a user named, refusing what would hang or exhaust memory:
    a file that is not a regular file (``/dev/zero``, a FIFO) or larger than ``limit``.
    Every problem is one InputError line naming ``label`` (default: the path)."""
    shown = label or str(path)
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{shown}: not a regular file (a {what} must be a file)")
            data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"{shown}: cannot read {what} ({e.strerror or e})") from None
    if len(data) > limit:
        raise InputError(f"{shown}: larger than {limit >> 20} MiB (too large for a {what})")
    return data


def read_text_capped(path: str | Path, *, what: str, limit: int = MAX_DOCUMENT_BYTES,
                     label: str | None = None) -> str:
    """:func:`read_capped` as UTF-8 text; other bytes are one InputError line."""
    data = read_capped(path, what=what, limit=limit, label=label)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{label or path}: not UTF-8 text (byte {e.start}: "
                         f"{data[e.start:e.start + 1]!r})") from None
