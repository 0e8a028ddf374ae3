"""IN-clauses in bounded pieces: a list of ids of any length becomes statements with at
most :data:`CHUNK` bound values each (SQLite allows 32766 and MariaDB's packet size is
finite; one owner for the size, not one per reader)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

CHUNK = 1000
T = TypeVar("T")


def chunks(items: Iterable[T], size: int = CHUNK) -> Iterator[list[T]]:
    """``items`` in consecutive lists of at most ``size`` (nothing for no items)."""
    if size < 1:
        raise ValueError(f"chunk size {size}: must be at least 1")
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
