"""Checkpoint I/O: atomic writes, the ``latest.json`` manifest, and where to resume."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .names import positive_int

MANIFEST_NAME = "latest.json"
MANIFEST_FORMAT = "andreas-checkpoint/1"

@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """A complete checkpoint: the last completed epoch, when it was written, where it is."""

    epoch: int
    time: float
    path: Path


_CHECKPOINT_NAME = re.compile(r"epoch-([0-9]{6,})(\.[^/]*)?")


def checkpoint_name(epoch: int, suffix: str = ".ckpt") -> str:
    """``epoch-000005.ckpt``: the name :func:`save_checkpoint` gives epoch 5's checkpoint."""
    return f"epoch-{positive_int(epoch, 'epoch'):06d}{suffix}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_path(path: Path) -> None:
    if path.is_dir():
        for child in sorted(path.rglob("*")):
            if child.is_file() and not child.is_symlink():
                _fsync_file(child)
        _fsync_dir(path)
    elif path.exists():
        _fsync_file(path)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass          # some file systems refuse fsync on directories
    finally:
        os.close(fd)


def _temporary(target: Path) -> Path:
    # Same directory (rename stays atomic), hidden, and the target's suffix kept last
    # (Keras insists on ".keras").
    return target.with_name(f".{target.stem}.tmp-{secrets.token_hex(4)}{target.suffix}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def atomic_write(path: str | Path, data: bytes | str | Callable[[Path], object]) -> Path:
    """Write ``path`` atomically: bytes, text (UTF-8), or a writer called with a
    temporary path in the same directory (it may create a file or a directory there,
    e.g. ``torch.save(state, p)``); then fsync and rename over ``path``. A reader sees
    the old content or the new, never a part. Returns ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(target)
    try:
        if callable(data):
            data(tmp)
            if not tmp.exists():
                raise ValueError(f"{target}: the writer created nothing at {tmp}")
        else:
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
        _fsync_path(tmp)
        if tmp.is_dir() and target.exists():
            # A directory cannot be renamed over a non-empty one: move the old aside first.
            old = _temporary(target)
            os.replace(target, old)
            os.replace(tmp, target)
            _remove(old)
        else:
            os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        _remove(tmp)
        raise
    return target


def write_manifest(checkpoint_dir: str | Path, epoch: int, path: str | Path,
                   t: float | None = None) -> Checkpoint:
    """Atomically point ``latest.json`` at a complete checkpoint of ``epoch``."""
    directory = Path(checkpoint_dir)
    positive_int(epoch, "epoch")
    target = Path(path)
    if not target.is_absolute():
        target = directory / target
    try:
        stored = str(target.relative_to(directory))
    except ValueError:
        stored = str(target)
    t = time.time() if t is None else float(t)
    doc = {"format": MANIFEST_FORMAT, "epoch": epoch, "time": t, "path": stored}
    atomic_write(directory / MANIFEST_NAME, json.dumps(doc, indent=1) + "\n")
    return Checkpoint(epoch=epoch, time=t, path=target)


def save_checkpoint(checkpoint_dir: str | Path, epoch: int,
                    data: bytes | str | Callable[[Path], object], *, suffix: str = ".ckpt",
                    t: float | None = None, keep: int | None = 2) -> Checkpoint:
    """Write epoch ``epoch``'s checkpoint as ``epoch-NNNNNN<suffix>`` atomically (see
    :func:`atomic_write`), then the manifest, then delete all but the ``keep`` newest
    checkpoints of this naming (None keeps all) and temporary files left by a crash."""
    directory = Path(checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = atomic_write(directory / checkpoint_name(epoch, suffix), data)
    written = write_manifest(directory, epoch, target, t)
    if keep is not None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 or None, got {keep!r}")
        found = sorted(_scan(directory), key=lambda c: c[0], reverse=True)
        epochs_kept = sorted({e for e, _ in found}, reverse=True)[:keep]
        for e, p in found:
            if e not in epochs_kept and e != epoch:
                _remove(p)
    for pattern in (".epoch-*.tmp-*", f".{Path(MANIFEST_NAME).stem}.tmp-*"):
        for stale in directory.glob(pattern):
            _remove(stale)
    return written


def _scan(directory: Path) -> list[tuple[int, Path]]:
    found = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    for p in entries:
        m = _CHECKPOINT_NAME.fullmatch(p.name)
        if m is not None and ".tmp-" not in p.name:
            found.append((int(m.group(1)), p))
    return found


def read_manifest(checkpoint_dir: str | Path) -> Checkpoint | None:
    """``latest.json`` as a Checkpoint; None when it is missing, unreadable, not the
    andreas format, or points at nothing."""
    directory = Path(checkpoint_dir)
    try:
        doc = json.loads((directory / MANIFEST_NAME).read_text(encoding="utf-8"))
        epoch, t, stored = doc["epoch"], doc["time"], doc["path"]
        if doc.get("format", MANIFEST_FORMAT) != MANIFEST_FORMAT:
            return None
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            return None
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not isinstance(stored, str):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    path = Path(stored)
    if not path.is_absolute():
        path = directory / path
    if not path.exists():
        return None
    return Checkpoint(epoch=epoch, time=float(t), path=path)


def latest_checkpoint(checkpoint_dir: str | Path | None) -> Checkpoint | None:
    """The newest complete checkpoint: the manifest's, or a newer ``epoch-NNNNNN*`` file
    (a crash between the rename and the manifest update), or None."""
    if checkpoint_dir is None:
        return None
    directory = Path(checkpoint_dir)
    best = read_manifest(directory)
    for epoch, path in _scan(directory):
        if best is None or epoch > best.epoch:
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            best = Checkpoint(epoch=epoch, time=mtime, path=path)
    return best


def completed_epochs(checkpoint_dir: str | Path | None) -> int:
    """Epochs already done according to the checkpoints (0 with none). Keras:
    ``model.fit(..., initial_epoch=completed_epochs(dir))``."""
    latest = latest_checkpoint(checkpoint_dir)
    return 0 if latest is None else latest.epoch


def resume_epoch(checkpoint_dir: str | Path | None) -> int:
    """The 1-based epoch to run next: 1 without a checkpoint, k + 1 after epoch k."""
    return completed_epochs(checkpoint_dir) + 1

