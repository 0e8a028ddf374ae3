"""Atomic files: a temporary file in the same directory, then a rename, so a reader never
sees half a file and a failed write leaves the old one in place.

The one writer of the project (``andreas/job.py`` keeps its own: it must stay stdlib-only
and importable alone inside training images). ``durable`` adds the fsyncs that make the
new file survive a power cut (the file before the rename, the directory after it); the
agent's spool turns them off in tests to stay fast.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import BinaryIO

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


# Kernel file systems: an output there is a typo, and a write could change the system.
_NO_OUTPUT_UNDER = ("/proc", "/sys", "/dev")


def check_output_file(path: str | Path, label: str) -> Path:
    """An output file a user named, checked before any work: not a directory, not under
    /proc, /sys or /dev, in an existing directory. InputError (one line) otherwise."""
    target = Path(path)
    where = os.path.abspath(target)
    if any(where == p or where.startswith(p + "/") for p in _NO_OUTPUT_UNDER):
        raise InputError(f"{label}: cannot write: {where} is in a kernel file system")
    if target.is_dir():
        raise InputError(f"{label}: cannot write: it is a directory; name a file")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{label}: cannot write: directory {parent} does not exist")
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


def open_capped(path: str | Path, *, what: str, limit: int = MAX_DOCUMENT_BYTES,
                label: str | None = None) -> BinaryIO:
    """A document a user named, opened for reading (binary) after the checks every reader
    needs: a regular file (``/dev/zero`` would never end, a FIFO would block the open
    itself: it is opened without blocking and refused), at most ``limit`` bytes (a larger
    one would take minutes or all memory). Every problem is one InputError line naming
    ``label`` (default: the path), never the file's content."""
    shown = label or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{shown}: cannot read {what} ({e.strerror or e})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{shown}: not a regular file (a {what} must be a file)")
        if info.st_size > limit:
            raise InputError(f"{shown}: {_size(info.st_size)}, larger than {_size(limit)} "
                             f"(too large for a {what})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 \
        else f"{n} bytes"


def read_capped(path: str | Path, *, what: str, limit: int = MAX_DOCUMENT_BYTES,
                label: str | None = None) -> bytes:
    """The bytes of a document a user named (:func:`open_capped`'s checks; a file that
    grows past ``limit`` while read is refused too)."""
    shown = label or str(path)
    with open_capped(path, what=what, limit=limit, label=label) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise InputError(f"{shown}: cannot read {what} ({e.strerror or e})") from None
    if len(data) > limit:
        raise InputError(f"{shown}: larger than {_size(limit)} (too large for a {what})")
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


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 100


def safe_name(text: object, fallback: str) -> str:
    """A name taken from a document (a trace's name) as one harmless path component: runs
    of other characters become ``_``, no leading ``.`` or ``-`` (so never ``..``, a hidden
    file or an option), at most MAX_NAME_CHARS; ``fallback`` when nothing is left. Names
    from documents never become paths any other way."""
    name = _UNSAFE_NAME.sub("_", text if isinstance(text, str) else "").lstrip(".-_")
    return name[:MAX_NAME_CHARS] or fallback
