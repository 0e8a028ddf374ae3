"""Atomic text files: a temporary file in the same directory, fsync, then a rename, so a
reader never sees half a file and a failed write leaves the old one in place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from andreas.errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str, *, label: str | None = None) -> None:
    """Write ``text`` to ``path`` atomically, with the mode a plain open() would give.
    An OSError becomes one InputError line naming ``label`` (default: the path)."""
    target = Path(path)
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=target.parent or ".",
                                         prefix=f".{target.name}.", suffix=".tmp",
                                         delete=False) as f:
            tmp = f.name
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise InputError(f"{label or target}: cannot write: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
