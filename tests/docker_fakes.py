"""A Docker stream (events, logs) a test feeds item by item: ``q.put(item)``; an exception
item is raised to the reader, ``END`` or ``close()`` ends it."""

from __future__ import annotations

import queue
from typing import Any

END = object()


class FakeStream:
    def __init__(self, items: list | None = None, follow: bool = True) -> None:
        self.q: queue.Queue = queue.Queue()
        for item in items or []:
            self.q.put(item)
        if not follow:
            self.q.put(END)
        self.closed = False

    def __iter__(self) -> FakeStream:
        return self

    def __next__(self) -> Any:
        item = self.q.get()
        if item is END or self.closed:
            raise StopIteration
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self.closed = True
        self.q.put(END)
