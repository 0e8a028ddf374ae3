"""A background poller for end-to-end tests: one shape for every watch a test keeps
while the system under test runs (node states, Slurm's queue)."""

from __future__ import annotations

import threading
from typing import Self


class Poller:
    """Calls :meth:`poll` every ``interval_s`` on a daemon thread between :meth:`start`
    and :meth:`stop`; :meth:`opened` and :meth:`closed` run on that thread around it (a
    database connection belongs to the thread that uses it)."""

    interval_s: float = 0.1
    thread_name: str = "e2e-poller"

    def start(self) -> Self:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.thread_name)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends the polling; a poller never started has nothing to stop."""
        thread = getattr(self, "_thread", None)
        if thread is not None:
            self._stop.set()
            thread.join(timeout=10)

    def _run(self) -> None:
        self.opened()
        try:
            while not self._stop.wait(self.interval_s):
                self.poll()
        finally:
            self.closed()

    def opened(self) -> None:
        """Before the first poll, on the polling thread."""

    def poll(self) -> None:
        raise NotImplementedError

    def closed(self) -> None:
        """After the last poll, on the polling thread."""
