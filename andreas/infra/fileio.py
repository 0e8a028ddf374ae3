"""Atomic files: a temporary file in the same directory, then a rename, so a reader never
sees half a file and a failed write leaves the old one in place.

The one writer of the project (``andreas/job.py`` keeps its own: it must stay stdlib-only
and importable alone inside training images). ``durable`` adds the fsyncs that make the
new file survive a power cut (the file before the rename, the directory after it); the
agent's spool turns them off in tests to stay fast.
"""

from __future__ import annotations

import os
from pathlib import Path

from andreas.errors import InputError


def replace_atomic(path: str | Path, data: str | bytes, *, durable: bool = True) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; raises OSError.

    The file gets the mode a plain open() would give (0o666 less the umask: the temporary
    is created with it, so the process-wide umask is never changed under other threads).
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
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
